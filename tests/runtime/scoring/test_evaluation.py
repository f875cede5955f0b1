"""Tests of decomp.runtime.scoring.evaluation: predictions files read (bad lines skipped with a
warning naming the line) and scored."""
from __future__ import annotations

import json

import pytest

from decomp.runtime.scoring.evaluation import read_predictions
from decomp.runtime.scoring.metrics import score_predictions

def test_read_predictions(tmp_path):
    path = tmp_path / "out.jsonl"
    lines = [
        json.dumps({"id": "1", "answer": "cat"}),
        "",
        '{"id": "2", "answer": oops}',
        json.dumps({"id": 3, "answer": ["x", "y"]}),
        json.dumps({"id": "4", "answer": "partial", "error": "model timed out"}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"answer": "no id"}),
        json.dumps({"id": "1", "answer": "cat"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    predictions = read_predictions(path)
    assert predictions == {"1": "cat", "3": ["x", "y"], "4": None}
    warnings = predictions.warnings
    assert len(warnings) == 4
    assert warnings[0].startswith("line 3: not valid JSON (Expecting value at column 23)")
    assert warnings[1] == "line 6: expected a JSON object, got a list"
    assert warnings[2] == "line 7: the line has no 'id'"
    assert warnings[3] == "line 8: repeated id '1' (first on line 1), with the same answer"


def test_an_id_predicted_twice_with_different_answers_is_an_error(tmp_path):
    """Which of the two would the score be of? Neither is taken: the error names both lines."""
    path = tmp_path / "out.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "1", "answer": "cat"}, {"id": "2", "answer": "x"}, {"id": 1, "answer": "dog"}]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"out.jsonl: id '1' is predicted twice with different answers: "
                                         r"line 1 says \"cat\", line 3 says \"dog\"; keep the line you mean"):
        read_predictions(path)


def test_read_predictions_then_evaluate(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps({"id": "q1", "answer": "4"}) + "\n"
                    + json.dumps({"id": "q2", "answer": None, "error": "boom"}) + "\n")
    gold = {"q1": [("4",)], "q2": [("7",)], "q3": [("1",)]}
    result = score_predictions(gold, read_predictions(path), "em")
    assert result == {"metric": "em", "score": pytest.approx(1 / 3), "n": 3, "missing": 1}


def test_read_predictions_missing_file(tmp_path):
    with pytest.raises(OSError):
        read_predictions(tmp_path / "nope.jsonl")
