"""Tests of decomp.runtime.scoring.metrics: DROP-style normalisation, em, f1, set_em, evaluate."""
from __future__ import annotations

import math

import numpy as np
import pytest

from decomp.runtime.scoring.metrics import (
    as_alternatives, best_score, coerce_answer, drop_answer_strings, em, f1, score_predictions,
    normalize_answer, set_em, split_items,
)


# --- normalisation ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("The Cat!", "cat"),
    ("1,000", "1000.0"),          # not a number with the comma: punctuation goes, then a number
    ("3.0", "3.0"),
    ("3", "3.0"),
    ("well-known  A dog", "well known dog"),
    ("U.S.A.", "usa"),
    ("-5", "5.0"),               # the hyphen splits tokens, so the sign is lost (as in DROP)
    ("3.50 dollars", "3.5 dollars"),
    ("an apple, the pear", "apple pear"),
    ("", ""),
])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_numbers_written_differently_normalise_alike():
    assert normalize_answer("3.0") == normalize_answer("3")
    assert normalize_answer("1,000") == normalize_answer("1000")
    assert normalize_answer("3.1") != normalize_answer("3")


# --- drop_answer_strings ---------------------------------------------------------------------

def test_drop_answer_strings_prefers_number_then_spans_then_date():
    date = {"day": "5", "month": "May", "year": "1990"}
    assert drop_answer_strings({"number": "12", "spans": ["x"], "date": date}) == ("12",)
    assert drop_answer_strings({"number": "", "spans": ["x", "y"], "date": date}) == ("x", "y")
    assert drop_answer_strings({"number": "", "spans": [], "date": date}) == ("5 May 1990",)
    empty_date = {"day": "", "month": "", "year": ""}
    assert drop_answer_strings({"number": "", "spans": [], "date": empty_date}) == ("",)
    assert drop_answer_strings({"number": 7}) == ("7",)


# --- em --------------------------------------------------------------------------------------

def test_em_on_single_spans():
    assert em("The Cat!", "cat") == 1.0
    assert em("3", "3.0") == 1.0
    assert em("cats", "cat") == 0.0


def test_em_on_span_lists_is_order_free_but_counts_spans():
    assert em(["Riften", "Geissant"], ["geissant", "riften"]) == 1.0
    assert em(["Riften"], ["Geissant", "Riften"]) == 0.0
    assert em(["Riften", "Riften"], ["Riften"]) == 0.0      # same set, different length
    assert em("Riften, Geissant", ["Riften", "Geissant"]) == 0.0   # one span is not two


def test_em_returns_a_plain_float():
    assert type(em("a", "b")) is float


# --- f1 --------------------------------------------------------------------------------------

def test_f1_partial_overlap_hand_computed():
    # pred bag {big, red, dog}, gold bag {big, dog}: P = 2/3, R = 1, F1 = 0.8
    assert f1("the big red dog", "big dog") == 0.8
    # pred {x, y, z, w}, gold {x, y, q}: P = 2/4, R = 2/3, F1 = 2*(1/2)(2/3)/(1/2+2/3) = 4/7 -> 0.57
    assert f1("x y z w", "x y q") == 0.57


def test_f1_uses_token_sets_not_counts():
    assert f1("dog dog", "dog") == 1.0


def test_f1_number_mismatch_scores_zero():
    # without the number rule the bags {5.0, apples} and {6.0, apples} would score 0.5
    assert f1("5 apples", "6 apples") == 0.0
    assert f1("5 apples", "5 apples please") == 0.8
    # gold without numbers: a number in the prediction does not block the match
    assert f1("5 apples", "apples") == round(2 * 0.5 / 1.5, 2)


def test_f1_multi_span_alignment_is_one_to_one():
    # gold spans {x y}, {z w}; pred spans {z w}, {x q}:
    # best alignment: gold0-pred1 (F1 = 0.5), gold1-pred0 (F1 = 1.0) -> mean 0.75
    assert f1(["z w", "x q"], ["x y", "z w"]) == 0.75
    # one pred span cannot cover two gold spans: mean over max(2, 1) spans
    assert f1("x y", ["x y", "x y z"]) == 0.5
    # extra predicted spans lower the score too
    assert f1(["x y", "q r"], "x y") == 0.5


def test_f1_is_rounded_plain_float():
    value = f1("x y z", "x")
    assert type(value) is float and value == 0.5


# --- set_em ----------------------------------------------------------------------------------

def test_set_em_reordered_lists():
    gold = ["Myristorrhoid", "Chimpwurst", "Geissant", "Riften"]
    assert set_em(["Riften", "Geissant", "Chimpwurst", "Myristorrhoid"], gold) == 1.0
    assert set_em("Riften, Geissant, Chimpwurst, Myristorrhoid", gold) == 1.0
    assert set_em('["riften", "geissant", "chimpwurst", "myristorrhoid"]', gold) == 1.0
    assert set_em("Riften, Geissant, Chimpwurst", gold) == 0.0
    assert set_em("Riften, Geissant, Chimpwurst, Myristorrhoid, Lameze", gold) == 0.0


def test_set_em_splits_a_single_gold_string():
    gold = ("case, umbrella, purse, alarm clock",)
    assert set_em("alarm clock, purse, umbrella, case", gold) == 1.0
    assert set_em(["purse", "case", "alarm clock", "umbrella"], gold) == 1.0
    assert set_em("alarm, clock, purse, umbrella, case", gold) == 0.0


def test_split_items_rule():
    assert split_items("a b, c\nd,, ") == {"b", "c", "d"}    # article 'a' dropped, blanks dropped
    assert split_items(["x, y", "z"]) == {"x y", "z"}        # list items are not split
    assert split_items('[1, "two"]') == {"1.0", "two"}
    assert split_items("[not json, b") == {"not json", "b"}


# --- coercion of odd predictions -------------------------------------------------------------

def test_coerce_answer():
    assert coerce_answer(None) == ""
    assert coerce_answer(12) == "12"
    assert coerce_answer(2.5) == "2.5"
    assert coerce_answer(True) == "true"
    assert coerce_answer({"a": 1}) == '{"a": 1}'
    assert coerce_answer([1, "b", None]) == ["1", "b", ""]
    assert coerce_answer([]) == ""


def test_non_string_predictions_are_scored():
    assert em(12, "12") == 1.0
    assert em(3.0, "3") == 1.0
    assert f1(None, "12") == 0.0
    assert em(None, "") == 1.0
    assert em({"answer": "x"}, "x") == 0.0
    assert set_em([3, 4], "4, 3") == 1.0


# --- alternatives and evaluate ---------------------------------------------------------------

def test_as_alternatives():
    assert as_alternatives("x") == [("x",)]
    assert as_alternatives(["x", "y"]) == [("x", "y")]
    assert as_alternatives([("x",), ("y", "z")]) == [("x",), ("y", "z")]
    assert as_alternatives(7) == [("7",)]
    assert as_alternatives(None) == []
    assert as_alternatives({"number": "4", "spans": []}) == [("4",)]


def test_best_score_takes_max_and_ignores_empty_alternatives():
    alternatives = [("",), ("cat",), ("dog",)]
    assert best_score("dog", alternatives, "em") == 1.0
    assert best_score("", alternatives, "em") == 0.0      # the empty alternative is ignored
    # as in the official DROP evaluator, a row whose every alternative is empty scores 0
    assert best_score("", [("",)], "em") == 0.0
    assert best_score(None, [("",), ("",)], "f1") == 0.0
    assert best_score("x", [], "em") == 0.0


def test_evaluate_counts_missing_predictions_as_zero():
    gold = {"1": [("cat",)], "2": [("dog",)], "3": [("5",)], "4": [("x", "y")]}
    predictions = {"1": "The cat", "3": "5.0", "4": ["y", "x"], "99": "ignored"}
    result = score_predictions(gold, predictions, "em")
    assert result == {"metric": "em", "score": 0.75, "n": 4, "missing": 1}
    assert type(result["score"]) is float


def test_evaluate_f1_mean_and_string_ids():
    gold = {1: [("big dog",)], "2": [("x",)]}
    result = score_predictions(gold, {"1": "the big red dog", 2: "q"}, "f1")
    assert result["score"] == pytest.approx(0.4)
    assert result["missing"] == 0
    assert not isinstance(result["score"], np.floating)


def test_evaluate_set_em_with_gold_alternatives():
    gold = {"a": [("case, purse",), ("purse only",)]}
    assert score_predictions(gold, {"a": "purse, case"}, "set_em")["score"] == 1.0
    assert score_predictions(gold, {"a": "purse"}, "set_em")["score"] == 0.0


def test_evaluate_empty_gold_is_zero_not_nan():
    result = score_predictions({}, {"x": "y"}, "f1")
    assert result == {"metric": "f1", "score": 0.0, "n": 0, "missing": 0}
    assert not math.isnan(result["score"])


def test_unknown_metric_lists_valid_ones():
    with pytest.raises(ValueError, match="em, exact, f1, set_em"):
        score_predictions({"1": [("x",)]}, {"1": "x"}, "accuracy")
