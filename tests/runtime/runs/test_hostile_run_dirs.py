"""Run directories an attacker (or a careless editor) wrote: run.json nested 100,000 deep or of the
wrong types, trace blobs that are lists or hold fields of the wrong type, results lines too deep or
a row written twice with different results. Every command that reads a run (trace show, trace
html, trace diff, eval, run --resume, merge) says what is wrong in one worded line and exit
status 1, never a traceback, and reads each file in time linear in its size."""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Callable

import pytest

from decomp.runtime.storage.rundir import RunDir
from tests.helpers import invoke

DEEP = "[" * 100_000 + "]" * 100_000
PROGRAM = "decomp/letter_cat_symbolic"


def _question(words: str) -> str:
    return f'Take the letters at position 1 of the words in "{words}" and concatenate them using a space.'


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> tuple[Path, Path]:
    """(a finished run, its input): shard 0/1 of two rows, so `decomp merge` takes it too."""
    folder = tmp_path_factory.mktemp("good")
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "a", "question": _question("ab cd"), "answer": "a c"},
        {"id": "b", "question": _question("ef gh"), "answer": "e g"}]), encoding="utf-8")
    result = invoke("run", PROGRAM, "--input", data, "--run-dir", folder / "run", "--shard", "0/1", "--cache", "off")
    assert result.exit_code == 0, result.output
    results = folder / "run" / "results.jsonl"  # lines are in the order rows end: put row a first, as
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)  # the damage below assumes
    results.write_text("".join(sorted(lines, key=lambda line: json.loads(line)["index"])), encoding="utf-8")
    return folder / "run", data


# ---------------------------------------------------------------- the damage
def _manifest(edit):
    def apply(run: Path) -> None:
        manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
        edit(manifest)
        (run / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    return apply


def _deep_options(run: Path) -> None:
    text = (run / "run.json").read_text(encoding="utf-8")
    (run / "run.json").write_text(text.replace('"options": {', '"options": {"deep": ' + DEEP + ", ", 1), encoding="utf-8")


def _blob(blob) -> Callable[[Path], None]:
    def apply(run: Path) -> None:
        db = sqlite3.connect(run / "traces.sqlite")
        with db:
            db.execute("UPDATE traces SET tree = ? WHERE idx = 0", (blob,))
        db.close()
    return apply


def _packed(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"))


def _results(edit) -> Callable[[Path], None]:
    def apply(run: Path) -> None:
        lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
        (run / "results.jsonl").write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")
    return apply


def _again(lines: list[str], **changes) -> list[str]:
    first = json.loads(lines[0])
    return [*lines, json.dumps({**first, **changes})]


CORRUPT_MANIFEST = {
    "run.json nested 100,000 deep": (_deep_options, r"run.json is corrupt \(nested more than 100 levels deep\); "
                                                    r"start over with --force"),
    "run.json a list 100,000 deep": (lambda run: (run / "run.json").write_text(DEEP),
                                     r"run.json is corrupt \(nested more than 100 levels deep\)"),
    "sessions of numbers": (_manifest(lambda m: m.update(sessions=[1, "x"])),
                            r"run.json is not a run manifest \('sessions' entry 1 is a number, not an object\); "
                            r"start over with --force"),
    "program path a number": (_manifest(lambda m: m["program"].update(path=3)),
                              r"'program.path' is a number, not a string"),
    "model a list": (_manifest(lambda m: m["options"].update(model=["x"])), r"'options.model' is a list, not a string"),
    "files a list": (_manifest(lambda m: m["program"].update(files=[1])),
                     r"'program.files' is not an object of file names and their sha256"),
    "metric a number": (_manifest(lambda m: m.update(metric=5)), r"'metric' is a number, not a string"),
    "seconds a string": (_manifest(lambda m: m["sessions"][0].update(seconds="long")),
                         r"'sessions' entry 1's 'seconds' is a string, not a number"),
}

CORRUPT_TRACE = {
    "a JSON list": (_blob(_packed("[1, 2]")), r"row 0: a trace is a JSON object, not a list"),
    "nodes a string": (_blob(_packed('{"nodes": "x"}')), r"row 0: a trace's 'nodes' is a string, not a list"),
    "nodes of numbers": (_blob(_packed('{"nodes": [1]}')), r"row 0: a trace node is a JSON object, not a number"),
    "a label that is a list": (_blob(_packed('{"kind": "row", "label": [1]}')),
                               r"row 0: a trace node's 'label' is a list, not a string"),
    "children a number": (_blob(_packed('{"kind": "row", "children": 3}')),
                          r"row 0: a trace node's 'children' is a number, not a list"),
    "no kind": (_blob(_packed('{"label": "x"}')), r"row 0: a trace node has no 'kind'"),
    "tokens as text": (_blob(_packed('{"kind": "row", "prompt_tokens": "9"}')),
                       r"row 0: a trace node's 'prompt_tokens' is a string, not a count"),
    "an answer 100,000 deep": (_blob(_packed('{"kind": "row", "answer": ' + DEEP + "}")),
                               r"row 0: a trace node's 'answer' is nested more than 500 levels deep"),
    "not compressed": (_blob(b"garbage"), r"row 0: the tree is not compressed JSON text"),
    "null": (_blob(None), r"row 0: the tree is null, not compressed JSON"),
}

CORRUPT_RESULTS = {
    "a row twice, another answer": (
        _results(lambda lines: _again(lines, answer="DIFFERENT")),
        r"results.jsonl:3: row 0 \(id 'a'\) is written twice with different results: line 1 says answer \"a c\", "
        r"line 3 says answer \"DIFFERENT\"; delete the line that is wrong"),
    "a row twice, once an error": (
        _results(lambda lines: _again(lines, error="boom")),
        r"results.jsonl:3: row 0 \(id 'a'\) is written twice with different results: line 1 says answer \"a c\", "
        r"line 3 says error \"boom\""),
    "a line 100,000 deep": (_results(lambda lines: [*lines, '{"index": 5, "answer": ' + DEEP + "}"]),
                            r"results.jsonl:3: not a results line: nested too deeply to read"),
    "a line 600 deep": (_results(lambda lines: [*lines, '{"index": 5, "answer": ' + "[" * 600 + "]" * 600 + "}"]),
                        r"results.jsonl:3: not a results line: nested more than 500 levels deep"),
    "a row without an index": (_results(lambda lines: [*lines, '{"id": "z", "answer": 1}']),
                               r"results.jsonl:3: not a results line: no row 'index'"),
}


def _damaged(good, tmp_path, damage) -> Path:
    run = tmp_path / "run"
    shutil.copytree(good[0], run, ignore=shutil.ignore_patterns("run.lock"))
    damage(run)
    return run


def _commands(run: Path, good: tuple[Path, Path], tmp_path: Path) -> dict[str, list]:
    data = good[1]
    return {
        "trace show": ["trace", "show", run],
        "trace show --row": ["trace", "show", run, "--row", "a"],
        "trace html": ["trace", "html", run, "-o", tmp_path / "page.html"],
        "trace diff": ["trace", "diff", run, good[0]],
        "eval": ["eval", "--gold", data, "--pred", run],
        "eval success": ["eval", "--pred", run],
        "run --resume": ["run", PROGRAM, "--input", data, "--run-dir", run, "--resume", "--shard", "0/1",
                         "--cache", "off"],
        "merge": ["merge", run, "--out", tmp_path / "merged"],
    }


def _refused(result, message: str) -> None:
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    assert re.search(message, result.output), result.output


@pytest.mark.parametrize("case", sorted(CORRUPT_MANIFEST))
def test_a_damaged_run_json_is_worded_by_every_command(good, tmp_path, case):
    damage, message = CORRUPT_MANIFEST[case]
    run = _damaged(good, tmp_path, damage)
    for name, args in _commands(run, good, tmp_path).items():
        started = time.perf_counter()
        _refused(invoke(*args), message)
        assert time.perf_counter() - started < 20, name
    assert not (tmp_path / "page.html").exists() and not (tmp_path / "merged").exists()


@pytest.mark.parametrize("case", sorted(CORRUPT_TRACE))
def test_a_damaged_trace_blob_is_worded_where_it_is_read(good, tmp_path, case):
    damage, message = CORRUPT_TRACE[case]
    run = _damaged(good, tmp_path, damage)
    commands = _commands(run, good, tmp_path)
    for name in ("trace show --row", "trace html", "merge"):
        _refused(invoke(*commands[name]), r"traces.sqlite is corrupt \(" + message + r"\); start over with --force")
    assert not (tmp_path / "page.html").exists() and not (tmp_path / "merged").exists()
    assert invoke(*commands["trace show"]).exit_code == 0  # the rows' table needs no tree


@pytest.mark.parametrize("case", sorted(CORRUPT_RESULTS))
def test_damaged_results_lines_are_worded_by_every_command(good, tmp_path, case):
    damage, message = CORRUPT_RESULTS[case]
    run = _damaged(good, tmp_path, damage)
    for args in _commands(run, good, tmp_path).values():
        _refused(invoke(*args), message)


def test_a_row_written_twice_with_the_same_result_is_noted_and_counted_once(good, tmp_path):
    run = _damaged(good, tmp_path, _results(lambda lines: _again(lines, seconds=9.9)))
    result = invoke("eval", "--gold", good[1], "--pred", run)
    assert result.exit_code == 0 and json.loads(result.stdout)["n"] == 2, result.output
    assert RunDir.open(run).notes == [f"{run / 'results.jsonl'}:3: row 0 is written again, with the same result "
                                      "as on line 1; the first line counts"]


def test_a_predictions_file_with_an_id_twice_is_refused_by_eval(good, tmp_path):
    predictions = tmp_path / "out.jsonl"
    predictions.write_text(json.dumps({"id": "a", "answer": "a c"}) + "\n" + json.dumps({"id": "b", "answer": "e g"})
                           + "\n" + json.dumps({"id": "a", "answer": "x y"}) + "\n", encoding="utf-8")
    _refused(invoke("eval", "--gold", good[1], "--pred", predictions),
             r"out.jsonl: id 'a' is predicted twice with different answers: line 1 says \"a c\", line 3 says "
             r"\"x y\"; keep the line you mean")


def test_a_deep_run_json_is_refused_by_a_real_subprocess_in_linear_time(good, tmp_path):
    run = _damaged(good, tmp_path, _deep_options)
    timings = []
    for size in (100_000, 400_000):
        text = (good[0] / "run.json").read_text(encoding="utf-8")
        deep = "[" * size + "]" * size
        (run / "run.json").write_text(text.replace('"options": {', '"options": {"deep": ' + deep + ", ", 1))
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "trace", "show", str(run)],
                              capture_output=True, text=True, timeout=120)
        timings.append(time.perf_counter() - started)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "run.json is corrupt (nested more than 100 levels deep); start over with --force" in proc.stderr
    assert timings[1] < 30


def test_trace_diff_words_a_damaged_tree_of_a_row_whose_answer_differs(good, tmp_path):
    def damage(run: Path) -> None:
        _blob(_packed("[1, 2]"))(run)
        _results(lambda lines: [json.dumps({**json.loads(lines[0]), "answer": "z z"}), *lines[1:]])(run)

    run = _damaged(good, tmp_path, damage)
    for args in (["trace", "diff", good[0], run], ["trace", "diff", run, good[0], "--json"]):
        _refused(invoke(*args), r"traces.sqlite is corrupt \(row 0: a trace is a JSON object, not a list\)")
