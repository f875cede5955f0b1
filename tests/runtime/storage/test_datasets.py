"""Tests of decomp.runtime.storage.datasets: JSONL and DROP-style reading, row errors, detection."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from decomp.runtime.storage.datasets import Row, read_rows
from decomp.runtime.scoring.metrics import gold_by_id, score_predictions

# the real DecomP datasets, cut to their first questions in the original layout (tests/fixtures/README.md)
DATASETS = Path(__file__).resolve().parents[2] / "fixtures" / "decomp" / "datasets"


def _write(tmp_path: Path, text: str, name: str = "rows.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- JSONL -----------------------------------------------------------------------------------

def test_jsonl_rows_fields_and_gold(tmp_path):
    path = _write(tmp_path, "\n".join([
        json.dumps({"id": "a", "question": "Q1?", "context": "C", "answer": "x"}),
        "",
        json.dumps({"id": 7, "question": "Q2?"}),
        json.dumps({"question": "Q3?", "answer": ["p", "q"]}),
    ]) + "\n")
    rows = list(read_rows(path))
    assert rows == [
        Row(0, "a", {"question": "Q1?", "context": "C"}, None, "x"),
        Row(1, "7", {"question": "Q2?"}, None, None),
        Row(2, "line-4", {"question": "Q3?"}, None, ["p", "q"]),
    ]


def test_malformed_line_in_the_middle_does_not_stop_reading(tmp_path):
    bad = '{"id": "b", "question": "Q" "answer": 1}'
    path = _write(tmp_path, "\n".join([
        json.dumps({"id": "a", "question": "Q1?"}),
        json.dumps({"id": "b0", "question": "Q2?"}),
        bad,
        json.dumps({"id": "c", "question": "Q4?"}),
    ]))
    rows = list(read_rows(path))
    assert [row.id for row in rows] == ["a", "b0", "line-3", "c"]
    assert rows[2].error == f"{path}:3: not valid JSON (Expecting ',' delimiter at column 29)"
    assert rows[2].fields is None and rows[2].index == 2
    assert rows[0].error is None and rows[3].error is None
    assert rows[3].fields == {"question": "Q4?"}


def test_row_errors(tmp_path):
    path = _write(tmp_path, "\n".join([
        "[1, 2]",
        json.dumps({"id": "x", "text": "no question"}),
        json.dumps({"id": "y", "question": "Q?"}),
        json.dumps({"id": "y", "question": "again?"}),
        json.dumps({"id": [1], "question": "Q?"}),
        '"just a string"',
    ]))
    errors = [(row.id, row.error) for row in read_rows(path)]
    assert errors == [
        ("line-1", f"{path}:1: expected a JSON object, got a list"),
        ("x", None),  # no question: fine here; a program needing one says so when the row runs
        ("y", None),
        ("line-4", f"{path}:4: repeated id 'y' (first on line 3)"),
        ("line-5", f"{path}:5: the 'id' must be a string or an integer"),
        ("line-6", f"{path}:6: expected a JSON object, got a string"),
    ]


def test_invalid_utf8_line_is_a_row_error(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"id": "a", "question": "ok"}\n{"id": "b", "question": "\xff"}\n'
                     b'{"id": "c", "question": "ok"}\n')
    rows = list(read_rows(path))
    assert [row.error is None for row in rows] == [True, False, True]
    assert rows[1].error.startswith(f"{path}:2: not valid UTF-8")


def test_single_line_object_file_is_jsonl(tmp_path):
    path = _write(tmp_path, json.dumps({"id": "only", "question": "Q?", "answer": "4"}))
    assert list(read_rows(path)) == [Row(0, "only", {"question": "Q?"}, None, "4")]


def test_rows_are_frozen(tmp_path):
    row = next(iter(read_rows(_write(tmp_path, '{"id": 1, "question": "Q"}'))))
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.id = "2"


# --- whole-file errors -----------------------------------------------------------------------

def test_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        read_rows(tmp_path / "absent.jsonl")


def test_pretty_printed_non_drop_json_raises_value_error(tmp_path):
    path = _write(tmp_path, json.dumps({"id": "a", "question": "Q"}, indent=2), "rows.json")
    with pytest.raises(ValueError, match="not a DROP-style dataset"):
        read_rows(path)


# --- DROP ------------------------------------------------------------------------------------

def _drop_answer(number="", spans=(), day=""):
    return {"number": number, "date": {"day": day, "month": "", "year": ""}, "spans": list(spans)}


def test_drop_rows_from_a_small_file(tmp_path):
    data = {
        "p1": {"passage": "Some text.", "qa_pairs": [
            {"question": "How many?", "answer": _drop_answer(number="3"), "query_id": "q1",
             "validated_answers": [_drop_answer(spans=["three"])], "extra": "kept",
             "meta": {"dropped": True}},
            {"question": "Who?", "answer": _drop_answer(spans=["A", "B"]), "query_id": "q2"},
        ]},
        "p2": {"passage": "Other.", "qa_pairs": [
            {"answer": _drop_answer(number="1"), "query_id": "q3"},
        ]},
    }
    rows = list(read_rows(_write(tmp_path, json.dumps(data, indent=1), "drop.json")))
    assert rows[0] == Row(0, "q1", {"question": "How many?", "context": "Some text.",
                                    "extra": "kept"}, None, [("3",), ("three",)])
    assert rows[1] == Row(1, "q2", {"question": "Who?", "context": "Some text."},
                          None, [("A", "B")])
    assert rows[2].id == "q3" and rows[2].fields is None
    assert "has no 'question'" in rows[2].error


REAL_FILES = [
    ("letter_cat/n3_eg20_pos2_space.json", 20, "0",
     'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate '
     "them using a space.", [("n a s",)]),
    ("reverse/test_4_normal_words_eg20.json", 20, "57",
     'Reverse the sequence "alarm clock, purse, umbrella, case".',
     [("case, umbrella, purse, alarm clock",)]),
    ("commaqa_e/iid_test_eg10.json", 10, "beac7fdfa6cdff9d",
     "What movies have people from the country Whime acted in?",
     [("Myristorrhoid", "Chimpwurst", "Geissant", "Riften")]),
]


@pytest.mark.parametrize("name, count, first_id, first_question, first_gold", REAL_FILES)
def test_real_drop_files(name, count, first_id, first_question, first_gold):
    rows = list(read_rows(DATASETS / name))
    assert len(rows) == count
    assert all(row.error is None for row in rows)
    assert [row.index for row in rows] == list(range(count))
    assert len({row.id for row in rows}) == count
    first = rows[0]
    assert (first.id, first.fields["question"], first.gold) == (first_id, first_question, first_gold)
    assert "context" in first.fields and "answer" not in first.fields


def test_real_commaqa_context_and_perfect_gold_scores():
    rows = list(read_rows(DATASETS / "commaqa_e" / "iid_test_eg10.json"))
    assert rows[0].fields["context"].startswith("movie: Geissant ; directed by: Carpoon.")
    # two passages of five questions: each question carries its own passage
    contexts = [row.fields["context"] for row in rows]
    assert contexts[:5] == [contexts[0]] * 5 and contexts[5:] == [contexts[5]] * 5
    assert contexts[5].startswith("movie: Hayout ; directed by: Dormitula.")
    gold = gold_by_id(rows)
    perfect = {row_id: list(alternatives[0]) for row_id, alternatives in gold.items()}
    assert score_predictions(gold, perfect, "em")["score"] == 1.0
    assert score_predictions(gold, {}, "f1") == {"metric": "f1", "score": 0.0, "n": 10, "missing": 10}
