"""`program.run_dataset(data)` with every kind of dataset the notebook API takes: a list of
dicts, a pandas DataFrame (its NaN cells left out), a generator, a JSONL or CSV path; anything
else a worded error naming what was given and what is accepted."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas
import pytest

import decomp

Q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'
ACCEPTED = "give a JSONL, CSV or DROP-style JSON file's path, a list (or any iterable) of row dicts, or a pandas DataFrame"


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def program():
    return decomp.load("decomp/letter_cat_symbolic")


def _input_lines(run) -> list[dict]:
    return [json.loads(line) for line in Path(run.manifest["input"]["path"]).read_text().splitlines()]


def test_a_data_frame_runs_with_its_nan_cells_left_out(program):
    frame = pandas.DataFrame({"id": ["a", "b"], "question": [Q, "no words"], "answer": ["n a s", math.nan],
                              "note": [None, "kept"]})
    run = program.run_dataset(frame, progress=False)
    rows = {row["id"]: row for row in run.rows()}
    assert rows["a"]["answer"] == "n a s" and rows["a"]["score"] == 1.0
    assert rows["b"]["outcome"] == "error" and "score" not in rows["b"]  # no gold: the NaN cell is no answer
    assert _input_lines(run) == [{"id": "a", "question": Q, "answer": "n a s"},
                                 {"id": "b", "question": "no words", "note": "kept"}]
    assert run.summary["rows"] == 2 and run.summary["scored_rows"] == 1


def test_the_same_frame_again_is_the_same_input_and_resumes(program, tmp_path):
    frame = pandas.DataFrame({"id": ["a"], "question": [Q]})
    first = program.run_dataset(frame, run_dir=tmp_path / "r", progress=False)
    again = program.run_dataset(frame.copy(), run_dir=tmp_path / "r", resume=True, progress=False)
    assert again.manifest["input"] == first.manifest["input"]
    assert [row["answer"] for row in again.rows()] == ["n a s"]


def test_numpy_numbers_and_dates_in_a_frame_are_plain_values(program):
    frame = pandas.DataFrame({"id": [1, 2], "question": [Q, Q], "when": pandas.to_datetime(["2024-05-01", None]),
                              "count": pandas.array([3, None], dtype="Int64")})
    run = program.run_dataset(frame, progress=False)
    assert _input_lines(run) == [{"id": 1, "question": Q, "when": "2024-05-01T00:00:00", "count": 3},
                                 {"id": 2, "question": Q}]
    assert [row["id"] for row in run.rows()] == ["1", "2"]


def test_a_generator_of_dicts(program):
    run = program.run_dataset(({"id": f"g{i}", "question": Q} for i in range(2)), progress=False)
    assert [(row["id"], row["answer"]) for row in run.rows()] == [("g0", "n a s"), ("g1", "n a s")]


def test_a_csv_path_and_a_jsonl_path(program, tmp_path):
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text(f'id,question,answer\nc1,"{Q.replace(chr(34), 2 * chr(34))}",n a s\n', encoding="utf-8")
    run = program.run_dataset(csv_path, progress=False)
    assert [(r["id"], r["question"], r["score"]) for r in run.rows()] == [("c1", Q, 1.0)]
    assert run.manifest["input"]["path"].endswith("rows.csv")
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(json.dumps({"id": "j1", "question": Q}) + "\n", encoding="utf-8")
    assert program.run_dataset(str(jsonl), progress=False).rows()[0]["answer"] == "n a s"


@pytest.mark.parametrize("dataset, message", [
    (5, f"dataset is int; {ACCEPTED}"),
    ({"id": "a", "question": Q}, f"dataset is one dict (a single row?); {ACCEPTED}"),
    (b"rows", f"dataset is bytes; {ACCEPTED}"),
    ([{"question": Q}, "text"], "dataset row 1 is str, not a dict of the row's fields"),
    ([{"question": Q, "answer": math.nan}], "dataset row 0, field 'answer' cannot be written as JSON: NaN and "
                                            "infinities are not values JSON can hold (leave the field out)"),
    ([{"question": Q, "answer": object()}], "dataset row 0 cannot be written as JSON: a row's value cannot be of "
                                            "type object"),
    (pandas.DataFrame({0: [Q]}), "the DataFrame's column 0 is named 0, a int: a row's fields are named by strings"),
    (pandas.DataFrame([[Q, Q]], columns=["question", "question"]),
     "the DataFrame has two columns named 'question' (columns 0 and 1)"),
])
def test_what_is_no_dataset_is_said(program, dataset, message):
    with pytest.raises(TypeError) as caught:
        program.run_dataset(dataset, progress=False)
    assert message in str(caught.value)


def test_a_path_that_is_no_file_is_said(program, tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(f"dataset 'missing.jsonl' does not exist; {ACCEPTED}")):
        program.run_dataset("missing.jsonl")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        program.run_dataset(tmp_path)
