"""Text no encoding can write (a lone surrogate, from a data row or a reply) and JSON's missing
numbers (NaN, Infinity) never stop a run: they are stored escaped, read back as they were, and
printed escaped; `--resume` finishes. A null question is a row error, not the text "None"."""
import json
import math

from click.testing import CliRunner

from decomp import FakeModel, Session
from decomp.dsl.values import printable, storable_json
from decomp.runtime.cli import main
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.storage.rundir import RunDir
PROGRAM = 'handler up = python(function="helpers:up")\nprogram p(question) {\n  QS: [up] #question\n}\nmain p\n'
HELPERS = 'def up(query):\n    return query.upper() + "!\\udc80"\n'   # a reply holding a lone surrogate


def _program(tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    path = tmp_path / "s.decomp"
    path.write_text(PROGRAM, encoding="utf-8")
    return path


def _rows(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "question": "ok"}\n{"id": "b\\ud800", "question": "x\\ud800y"}\n'
                    '{"id": "c", "question": "fine"}\n', encoding="utf-8")
    return rows


def test_storable_json_round_trips_surrogates_and_names_nan():
    value = {"a": "x\ud800y", "b": float("nan"), "c": [float("-inf")], "d": "Lougerière"}
    text = storable_json(value)
    text.encode("utf-8")  # writable
    assert json.loads(text) == {"a": "x\ud800y", "b": "NaN", "c": ["-Infinity"], "d": "Lougerière"}
    assert storable_json({"d": "Lougerière"}) == '{"d": "Lougerière"}'  # no escapes when not needed
    assert printable("a\udc80b") == "a\\udc80b" and printable("plain") == "plain"


def test_a_surrogate_row_and_reply_are_stored_and_the_run_resumes(tmp_path):
    program, rows, run_dir = _program(tmp_path), _rows(tmp_path), tmp_path / "run"
    runner = CliRunner()
    first = runner.invoke(main, ["run", str(program), "--input", str(rows), "--run-dir", str(run_dir),
                                 "--cache-dir", str(tmp_path / "cache")])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output.strip().splitlines()[-1])["failed"] == 0
    records = RunDir.open(run_dir).records()
    assert [r["answer"] for r in records] == ["OK!\udc80", "X\ud800Y!\udc80", "FINE!\udc80"]
    assert records[1]["id"] == "b\ud800"
    (run_dir / "results.jsonl").read_text(encoding="utf-8")  # valid UTF-8 on disk
    assert RunDir.open(run_dir).trace(1).answer == "X\ud800Y!\udc80"
    again = runner.invoke(main, ["run", str(program), "--input", str(rows), "--run-dir", str(run_dir), "--resume",
                                 "--cache-dir", str(tmp_path / "cache")])
    assert again.exit_code == 0, again.output
    shown = runner.invoke(main, ["trace", "show", str(run_dir), "--row", "a"])
    assert shown.exit_code == 0, shown.output


def test_a_surrogate_answer_is_cached_and_printed_escaped(tmp_path):
    program = _program(tmp_path)
    runner = CliRunner()
    args = ["run", str(program), "-q", "x\ud800", "--cache-dir", str(tmp_path / "cache")]
    for _ in range(2):  # the second answer comes from the cache
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output
        assert result.output.strip() == "X\\ud800!\\udc80"
    cache = StepCache(tmp_path / "cache" / "steps.sqlite")
    assert len(cache) == 1


def test_nan_in_a_row_is_written_as_a_string(tmp_path):
    program = _program(tmp_path)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "n", "question": "q", "answer": NaN}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(rows), "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    line = (tmp_path / "r" / "results.jsonl").read_text(encoding="utf-8")
    assert "NaN" not in line.replace('"NaN"', "")  # only as a string: the file is plain JSON
    assert json.loads(line, parse_constant=lambda word: math.nan) is not None


def test_a_null_question_is_a_row_error_not_the_text_none():
    session = Session(model=FakeModel(default="an answer"))
    module = session.load("q.decomp", text='handler ask = prompt(text="Q: x\\nA: y")\nmain ask\n')
    result = session.run(module, {"question": None})
    assert result.answer is None and "the row's 'question' is null" in result.error
    numbered = session.run(module, {"question": 12})
    assert numbered.error is None
