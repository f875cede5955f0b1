"""CSV datasets (decomp.runtime.storage.datasets): a header line, one row per record, an empty cell
a missing field, row problems at their lines; and `decomp run --input rows.csv` runs them."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.storage.datasets import Row, read_rows


def _csv(tmp_path, text: str, name: str = "rows.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_rows_fields_gold_and_empty_cells(tmp_path):
    path = _csv(tmp_path, "id,question,context,answer\r\n"
                          "a,Q1?,C,x\r\n"
                          "\r\n"
                          ",Q2?,,\r\n"
                          '7,"Q3, with a comma and ""quotes""?",C3,y\r\n')
    assert list(read_rows(path)) == [
        Row(0, "a", {"question": "Q1?", "context": "C"}, None, "x"),
        Row(1, "line-4", {"question": "Q2?"}, None, None),
        Row(2, "7", {"question": 'Q3, with a comma and "quotes"?', "context": "C3"}, None, "y"),
    ]


def test_a_cell_over_several_lines_and_a_bom(tmp_path):
    path = _csv(tmp_path, '\ufeffid,question\nm,"line one\nline two"\nn,after\nn,again\n', name="ROWS.CSV")
    rows = list(read_rows(path))
    assert rows[0] == Row(0, "m", {"question": "line one\nline two"}, None, None)
    assert rows[1].fields == {"question": "after"}
    assert rows[2].error == f"{path}:5: repeated id 'n' (first on line 4)"  # the record's own line


def test_ragged_rows_are_row_errors_and_reading_goes_on(tmp_path):
    path = _csv(tmp_path, "id,question\na,Q1?\nb,Q2?,extra\nc\nd,Q4?\n")
    rows = list(read_rows(path))
    assert [row.id for row in rows] == ["a", "line-3", "line-4", "d"]
    assert rows[1].error == f"{path}:3: 3 cells, but the header line names 2 fields"
    assert rows[2].error == f"{path}:4: 1 cells, but the header line names 2 fields"
    assert rows[3].fields == {"question": "Q4?"} and rows[3].index == 3


@pytest.mark.parametrize("text, message", [
    ("id,,answer\na,b,c\n", "rows.csv:1: column 2 of the header line has no name"),
    ("\nid,question,id\na,b,c\n", "rows.csv:2: the header line names 'id' twice (columns 1 and 3)"),
])
def test_an_unusable_header_is_said(tmp_path, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        list(read_rows(_csv(tmp_path, text)))


def test_a_file_that_is_not_utf8_is_said_at_its_line(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"id,question\na,ok\nb,caf\xe9\n")
    with pytest.raises(ValueError, match=r"rows.csv:3: the file is not UTF-8 text \(byte 22\)"):
        list(read_rows(path))


def test_an_empty_file_has_no_rows(tmp_path):
    assert list(read_rows(_csv(tmp_path, ""))) == []


def test_decomp_run_takes_a_csv_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    question = 'Take the letters at position 1 of the words in "Ada Lovelace" and concatenate them.'
    _csv(tmp_path, f'id,question,answer\nq1,"{question.replace(chr(34), 2 * chr(34))}",AL\nq2,,x\n')
    done = CliRunner().invoke(main, ["run", "decomp/letter_cat_symbolic", "--input", "rows.csv",
                                     "--run-dir", "out"])
    assert done.exit_code == 3, done.output  # a row ended in an error: the run's own exit status
    lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert by_id["q1"]["answer"] == "AL" and by_id["q1"]["score"] == 1.0
    assert "question" in by_id["q2"]["error"]  # the empty cell: a question the row lacks
