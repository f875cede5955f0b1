"""`decomp trace show RUN --json`, `decomp trace export RUN --jsonl`, and the rows' table at 80
and 60 columns (runtime/views/export.py, tree.py)."""
from __future__ import annotations

import json

from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.views.tree import show_rows
from tests.helpers import invoke
from tests.runtime.views.tree_helpers import ROWS, make_run, text_of


def test_show_json_holds_the_summary_and_every_row(tmp_path):
    run_dir = make_run(tmp_path, ROWS)
    result = invoke("trace", "show", run_dir, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["summary"]["rows"] == 3 and shown["summary"]["failed"] == 1
    assert [row["id"] for row in shown["rows"]] == ["ok", "bad", "wrong"]
    assert shown["rows"] == RunDir.open(run_dir).records()


def test_show_json_of_one_row_holds_its_tree(tmp_path):
    run_dir = make_run(tmp_path, ROWS)
    result = invoke("trace", "show", run_dir, "--row", "bad", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    run = RunDir.open(run_dir)
    assert shown["id"] == "bad" and "error" in shown
    assert shown["trace"] == run.trace(shown["index"]).to_dict()
    assert shown["trace"]["children"]  # the whole tree, not its root only


def test_export_writes_one_row_with_its_tree_per_line(tmp_path):
    run_dir = make_run(tmp_path, ROWS)
    out = tmp_path / "rows.jsonl"
    assert invoke("trace", "export", run_dir, "--jsonl", "-o", out).exit_code == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    run = RunDir.open(run_dir)
    assert [line["index"] for line in lines] == [0, 1, 2]
    for line in lines:
        assert line["trace"] == run.trace(line["index"]).to_dict()
        assert {k: v for k, v in line.items() if k != "trace"} == run.find(line["id"])
    printed = invoke("trace", "export", run_dir, "--jsonl")
    assert [json.loads(line) for line in printed.stdout.splitlines()] == lines


def test_export_needs_its_format_named(tmp_path):
    run_dir = make_run(tmp_path, ROWS)
    result = invoke("trace", "export", run_dir)
    assert result.exit_code == 2 and "--jsonl" in result.output


def test_rows_table_stays_legible_at_80_and_60_columns(tmp_path):
    long = [{**ROWS[0], "id": "a-rather-long-row-identifier-" + "x" * 40}, *ROWS[1:]]
    run = RunDir.open(make_run(tmp_path, long))
    for width in (80, 60):
        text = text_of(lambda c: show_rows(run, c), width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        header = next(line for line in text.splitlines() if "answer" in line)
        assert "id" in header and "┃┃" not in header  # the columns kept their names, none collapsed
        assert "n a s" in text and "bad" in text
