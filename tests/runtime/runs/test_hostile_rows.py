"""Hostile and broken dataset rows (issue 14, item 9): a line nested a thousand deep, rows deeper
than the documented limit, null and non-text questions, NaN and Infinity, numbers no float holds.
Each is that row's error (at FILE:LINE) or a documented conversion; the other rows run, and the
exit status says rows failed."""
import json

from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.storage.datasets import MAX_DEPTH, read_rows
from decomp.runtime.storage.rundir import RunDir
PROGRAM = 'handler echo = python(function="helpers_hostile:echo")\nmain echo\n'
HELPERS = "def echo(query):\n    return query\n"


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _program(tmp_path):
    (tmp_path / "helpers_hostile.py").write_text(HELPERS, encoding="utf-8")
    path = tmp_path / "echo.decomp"
    path.write_text(PROGRAM, encoding="utf-8")
    return path


LINES = [
    '{"id": "a", "question": "one"}',
    '{"id": "deep", "question": ' + nested(2000) + "}",         # too deep for the JSON reader itself
    # the row's object is its first level: a question nested MAX_DEPTH - 1 deep is at the limit
    '{"id": "deeper", "question": ' + nested(MAX_DEPTH) + "}",       # readable, over the limit
    '{"id": "limit", "question": ' + nested(MAX_DEPTH - 1) + "}",    # at the limit: runs
    '{"id": "null", "question": null}',
    '{"id": "number", "question": 12}',
    '{"id": "list", "question": [1, "two"]}',
    '{"id": "object", "question": {"k": true}}',
    '{"id": "true", "question": true}',
    '{"id": "nan", "question": NaN}',
    '{"id": "inf", "question": -Infinity}',
    '{"id": "huge", "question": 1e999}',
    '{"id": "long", "question": ' + "7" * 5000 + "}",
    '{"id": "z", "question": "last"}',
]


def test_hostile_rows_are_row_errors_or_conversions_and_the_rest_run(tmp_path):
    program = _program(tmp_path)
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--run-dir", str(run_dir),
                                       "--cache", "off"])
    assert result.exit_code == 3, result.output  # finished, with rows in error
    assert "Traceback" not in result.output
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["failed"]) == (len(LINES), 3)
    by_id = {r["id"]: r for r in RunDir.open(run_dir).records()}
    assert by_id["line-2"]["error"] == f"{data}:2: nested too deeply to read (lists or objects about a thousand " \
                                       "levels deep)"
    assert by_id["line-3"]["error"] == f"{data}:3: the row nests deeper than {MAX_DEPTH} levels (lists or " \
                                       "objects inside each other)"
    assert "the row's 'question' is null" in by_id["null"]["error"]
    answers = {row_id: record["answer"] for row_id, record in by_id.items() if "error" not in record}
    assert answers == {
        "a": "one", "limit": nested(MAX_DEPTH - 1), "number": "12", "list": '[1, "two"]', "object": '{"k": true}',
        "true": "true", "nan": "NaN", "inf": "-Infinity", "huge": "1e999", "long": "7" * 5000, "z": "last"}
    text = (run_dir / "results.jsonl").read_text(encoding="utf-8")
    json.loads("[" + ",".join(text.splitlines()) + "]", parse_constant=_no_constant)  # plain JSON only


def _no_constant(word):
    raise AssertionError(f"results.jsonl holds {word}, which JSON has not")


def test_values_json_has_not_are_read_as_text(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": 1, "question": "q", "x": [NaN, Infinity, -Infinity, 1e999, -1e999, 1.5, 2], '
                    '"big": ' + "9" * 4400 + ', "answer": NaN}\n', encoding="utf-8")
    (row,) = read_rows(data)
    assert row.error is None
    assert row.fields["x"] == ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", 1.5, 2]
    assert row.fields["big"] == "9" * 4400 and row.gold == "NaN"


def test_a_deep_drop_pair_is_its_row_error(tmp_path):
    deep = json.loads(nested(MAX_DEPTH + 5))
    drop = {"p1": {"passage": "P", "qa_pairs": [
        {"question": "q1", "query_id": "ok", "answer": {"number": "1"}},
        {"question": "q2", "query_id": "deep", "answer": {"number": "2"}, "extra": deep},
        {"question": "q3", "query_id": "after", "answer": {"number": "3"}},
    ]}}
    path = tmp_path / "drop.json"
    path.write_text(json.dumps(drop, indent=1), encoding="utf-8")
    rows = list(read_rows(path))
    assert [row.id for row in rows] == ["ok", "deep", "after"]
    assert [row.error is None for row in rows] == [True, False, True]
    assert rows[1].error == f"{path}: passage 'p1', qa pair 1: the row nests deeper than {MAX_DEPTH} levels " \
                            "(lists or objects inside each other)"


def test_a_file_too_deep_to_parse_whole_is_read_line_by_line(tmp_path):
    path = tmp_path / "drop.json"
    path.write_text('{"p1": {"passage": "P", "qa_pairs": [\n' + nested(3000) + "\n]}}\n", encoding="utf-8")
    rows = list(read_rows(path))  # no RecursionError: every line is a row, each with its error
    assert len(rows) == 3 and all(row.error for row in rows)
    assert rows[1].error == f"{path}:2: nested too deeply to read (lists or objects about a thousand levels deep)"
