"""`exact`: strict exact match beside `em`, with no normalisation at all, so that a format error
DROP-style normalisation hides (punctuation, case, brackets) scores 0."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decomp.dsl.checker import METRIC_NAMES, check_metric
from decomp.dsl.parser import parse_module
from decomp.runtime.cli import main
from decomp.runtime.scoring.metrics import METRICS, as_alternatives, best_score, exact, known_metrics

LIST_TEXT = '["PARIS", "TOKYO", "LIMA"]'
GOLD = "PARIS | TOKYO | LIMA"


def test_the_issues_example_em_one_exact_zero():
    alternatives = as_alternatives(GOLD)
    assert best_score(LIST_TEXT, alternatives, "em") == 1.0
    assert best_score(LIST_TEXT, alternatives, "exact") == 0.0


@pytest.mark.parametrize("pred, gold, score", [
    ("Paris", "Paris", 1.0),
    ("paris", "Paris", 0.0),           # case counts
    ("Paris ", "Paris", 0.0),          # so do spaces
    ("Paris.", "Paris", 0.0),          # and punctuation
    ("the Paris", "Paris", 0.0),       # and articles
    (3, "3", 1.0),                     # a number is its text
    (3.0, "3", 0.0),
    (["a", "b"], ["a", "b"], 1.0),     # a list against a gold of several spans, item by item
    (["b", "a"], ["a", "b"], 0.0),     # in order
    (["a", "b"], '["a", "b"]', 1.0),   # or against a one-span gold equal to its JSON text
])
def test_exact_compares_the_very_text(pred, gold, score):
    assert best_score(pred, as_alternatives(gold), "exact") == score


def test_exact_is_the_best_over_alternatives_and_a_built_in():
    assert best_score("Lima", [("Paris",), ("Lima",)], "exact") == 1.0
    assert exact("x", ("x",)) == 1.0
    assert METRICS["exact"] is exact and "exact" in METRIC_NAMES and "exact" in known_metrics()
    assert check_metric(parse_module('metric exact\nhandler up = python(function="capwords")\nmain up\n')) == []


def test_decomp_eval_scores_with_exact(tmp_path):
    (tmp_path / "gold.jsonl").write_text(json.dumps({"id": "1", "answer": GOLD}) + "\n")
    (tmp_path / "pred.jsonl").write_text(json.dumps({"id": "1", "answer": LIST_TEXT}) + "\n")
    runner = CliRunner()

    def score(metric):
        done = runner.invoke(main, ["eval", "--gold", str(tmp_path / "gold.jsonl"), "--pred",
                                    str(tmp_path / "pred.jsonl"), "--metric", metric])
        assert done.exit_code == 0, done.output
        return json.loads(done.output)["score"]

    assert (score("em"), score("exact")) == (1.0, 0.0)
