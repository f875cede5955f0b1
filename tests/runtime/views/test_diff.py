"""`decomp trace diff`: which rows differ between two runs, and the first node where their trees part."""
from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.views.diff import diff_runs, first_divergence, show_diff
from tests.helpers import invoke

SYMBOLIC = Path(__file__).resolve().parents[3] / "programs" / "decomp" / "letter_cat_symbolic.decomp"
LETTERS = "decomp.programs.decomp.letters"


def question(words: str, position: str = "position 3") -> str:
    return f'Take the letters at {position} of the words in "{words}" and concatenate them using a space.'


ROWS = [
    {"id": "a", "question": question("Donna Guan Nascimento"), "answer": "n a s"},
    {"id": "c", "question": question("Ada Lovelace", "the last")},
    {"id": "d", "question": question("Grace Hopper", "position 1")},
    {"id": "e", "question": "Take the letters at position 1 of the words in no quotes here."},
    {"id": "f", "question": question("Alan Turing")},
]
# B's `position` is off by one for "position 3": rows a and f differ, the others agree.
BUGGY = f'''from {LETTERS} import position as _position


def position(query):
    n = _position(query)
    return n + 1 if n == 3 else n


def shout(query):
    return query.upper()
'''


@pytest.fixture
def programs(tmp_path, monkeypatch):
    """A folder with a.decomp (the bundled symbolic letter_cat) and buggy.py; `variant(name,
    old, new)` writes a copy of a.decomp with `old` replaced by `new`."""
    (tmp_path / "buggy.py").write_text(BUGGY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = SYMBOLIC.read_text(encoding="utf-8")
    (tmp_path / "a.decomp").write_text(source, encoding="utf-8")

    def variant(name: str, *replacements: tuple[str, str]) -> Path:
        text = source
        for old, new in replacements:
            assert old in text
            text = text.replace(old, new)
        path = tmp_path / f"{name}.decomp"
        path.write_text(text, encoding="utf-8")
        return path

    return variant


def run(tmp_path, program, name, rows=ROWS, *extra) -> RunDir:
    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = invoke("run", program, "--input", data, "--run-dir", tmp_path / name, *extra)
    failed = json.loads(result.stdout)["failed"]
    assert result.exit_code == (3 if failed else 0), result.output  # 3: the run finished with rows in error
    return RunDir.open(tmp_path / name)


def off_by_one(programs):
    return programs("b", (f'"{LETTERS}:position"', '"buggy:position"'))


# ---- which rows
def test_diff_finds_exactly_the_rows_that_differ_and_their_first_divergent_node(tmp_path, programs):
    a = run(tmp_path, tmp_path / "a.decomp", "ra")
    b = run(tmp_path, off_by_one(programs), "rb")
    found = diff_runs(a, b)
    assert [d["id"] for d in found] == ["a", "f"]
    first = found[0]
    assert (first["index_a"], first["index_b"], first["answer_a"], first["answer_b"]) == (0, 0, "n a s", "n n c")
    assert first["only_in"] is None and first["note"] is None
    # Hand-checked: step 3 (foreach) differs only in its answer, so the walk goes down. Item 1
    # ("Donna") gives "n" either way (its letters 3 and 4 are both n), but below it the call of
    # `position` answered 3 in A and 4 in B: the first node, in pre-order, with no differing node
    # beneath it. Its step differs only by that same answer, so the call is reported, not the step.
    assert first["diverges_at"] == {
        "path": 'row > step 3 [letter] > item 1 "Donna" > call [letter] > step 1 [position] > call [position]',
        "field": "answer", "a": 3, "b": 4, "location": f"{tmp_path / 'a.decomp'}:24",
    }
    assert found[1]["diverges_at"]["path"].startswith('row > step 3 [letter] > item 1 "Alan" > ')


def test_identical_runs_have_no_differences(tmp_path, programs):
    a = run(tmp_path, tmp_path / "a.decomp", "ra")
    again = run(tmp_path, tmp_path / "a.decomp", "ra2")
    assert diff_runs(a, again) == []
    out = _shown([], a, again)
    assert "5 rows compared, 0 differ, 0 only in A, 0 only in B" in out and "no differences" in out


def test_rows_in_one_run_only_are_reported_as_such(tmp_path, programs):
    a = run(tmp_path, tmp_path / "a.decomp", "ra", ROWS[:3])
    b = run(tmp_path, tmp_path / "a.decomp", "rb", [ROWS[0], ROWS[2], ROWS[4]])
    found = diff_runs(a, b)
    assert [(d["id"], d["only_in"], d["index_a"], d["index_b"]) for d in found] == [("c", "a", 1, None),
                                                                                     ("f", "b", None, 2)]
    assert all(d["diverges_at"] is None and "only in run" in d["note"] for d in found)
    out = _shown(found, a, b)
    assert "2 rows compared, 0 differ, 1 only in A, 1 only in B" in out and "(no such row)" in out


def test_a_row_failing_in_one_run_only_differs(tmp_path, programs):
    a = run(tmp_path, tmp_path / "a.decomp", "ra")
    b = run(tmp_path, programs("b", ('pattern=r\'words in "([^"]*)"\'', 'pattern=r\'words in "(Donna[^"]*)"\'')), "rb")
    found = {d["id"]: d for d in diff_runs(a, b)}
    assert set(found) == {"c", "d", "f"}  # e fails in both: the same outcome
    point = found["c"]["diverges_at"]
    assert point["path"] == "row > step 1 [name] > call [name]" and point["field"] == "error"
    assert point["a"] is None and "did not match" in point["b"]
    assert found["c"]["error_b"] and found["c"]["answer_b"] is None


# ---- what diverged
@pytest.mark.parametrize("replacement, field, path, a, b", [
    # step 2 reads the whole question instead of step 1's name: another sub-query, reported there
    (("QS: [words] #1", "QS: [words] #question"), "query", "row > step 2 [words]",
     '"Donna Guan Nascimento"', question("Donna Guan Nascimento")),
    # another handler at step 2 (it keeps only the last word)
    (("QS: [words] #1", "QS: [words2] #1"), "handler", "row > step 2 [words]", "words", "words2"),
    # the letter program shouts its result: a third step in B only
    (("QS: [letter_at] #1 #word", "QS: [letter_at] #1 #word\n    QS: [shout] #2"), "missing",
     'row > step 3 [letter] > item 1 "Donna" > call [letter] > step 3 [shout]', None, 'step [shout] "n"'),
])
def test_each_kind_of_divergence(tmp_path, programs, replacement, field, path, a, b):
    words2 = 'handler words2    = regex(pattern=r\'[^\\s"]+(?=")\', all=true)\n'
    shout = 'handler shout     = python(function="buggy:shout")\n'
    extra = [("handler words     =", words2 + "handler words     ="), ("handler join", shout + "handler join")]
    run_a = run(tmp_path, tmp_path / "a.decomp", "ra", ROWS[:1])
    run_b = run(tmp_path, programs("b", replacement, *extra), "rb", ROWS[:1])
    (found,) = diff_runs(run_a, run_b)
    point = found["diverges_at"]
    assert (point["field"], point["path"], point["a"], point["b"]) == (field, path, a, b)


def test_model_runs_part_at_the_model_request(tmp_path):
    ask = question("Donna Guan Nascimento")
    runs = []
    for name, words in (("ra", '["Donna", "Guan", "Nascimento"]'), ("rb", '["Donna", "Guan"]')):
        fake = tmp_path / f"{name}.json"
        fake.write_text(json.dumps({
            "script": {ask: ['[split] What are the words in "Donna Guan Nascimento"?',
                             '(foreach) [str_position] What is the letter at position 3 of "#1"?', "[EOQ]"]},
            "mapping": {"What are the words in": " " + words, "Donna": ' "n"', "Guan": ' "a"',
                        "Nascimento": ' "s"'}}), encoding="utf-8")
        runs.append(run(tmp_path, "decomp/letter_cat_llm", name, [{"id": "m", "question": ask}],
                        "--model", f"fake:{fake}", "--cache", "off"))
    (found,) = diff_runs(*runs)
    assert found["answer_a"] == ["n", "a", "s"] and found["answer_b"] == ["n", "a"]
    point = found["diverges_at"]
    assert point["path"] == "row > step 1 [split] > call [split] > model [split]"
    assert point["field"] == "raw_output"
    assert point["a"] == ' ["Donna", "Guan", "Nascimento"]' and point["b"] == ' ["Donna", "Guan"]'
    assert point["location"] == "<[letter_cat] step 1>:1"  # the model request's nearest located ancestor


# ---- the walk itself, on hand-made trees
def _row(*children, answer=None):
    return TraceNode("row", label="r", answer=answer, children=list(children))


def _step(handler, query, answer, *children, error=None):
    return TraceNode("step", handler=handler, query=query, answer=answer, error=error,
                     location=f"p.decomp:{len(query)}", children=list(children))


def test_answer_only_differences_look_below_first():
    a = _row(_step("s", "q", 1, _step("t", "qq", 5), _step("u", "qqq", 7)), answer=1)
    b = _row(_step("s", "q", 2, _step("t", "qq", 5), _step("u", "qqq", 8)), answer=2)
    assert first_divergence(a, b) == {"path": "row > step 1 [s] > step 2 [u]", "field": "answer", "a": 7, "b": 8,
                                      "location": "p.decomp:3"}


def test_a_query_difference_is_reported_without_looking_below():
    a = _row(_step("s", "q", 1, _step("t", "x", 5)), answer=1)
    b = _row(_step("s", "Q", 2, _step("t", "y", 6)), answer=2)
    assert first_divergence(a, b)["path"] == "row > step 1 [s]"
    assert first_divergence(a, b)["field"] == "query"


def test_nothing_differs_below_so_the_node_itself_is_reported():
    a = _row(_step("s", "q", 1), answer=1)
    b = _row(_step("s", "q", 1), answer=2)
    assert first_divergence(a, b) == {"path": "row", "field": "answer", "a": 1, "b": 2, "location": None}
    assert first_divergence(a, _row(_step("s", "q", 1), answer=1)) is None


def test_a_difference_in_an_agreeing_subtree_still_comes_first():
    a = _row(_step("s", "q", 1, _step("t", "x", 5)), _step("u", "w", 3), answer=3)
    b = _row(_step("s", "q", 1, _step("t", "x", 6)), _step("u", "w", 4), answer=4)
    assert first_divergence(a, b)["path"] == "row > step 1 [s] > step 1 [t]"


def test_errors_compare_without_folders():
    a = _row(_step("s", "q", None, error="/x/p.decomp:3:1: boom"))
    b = _row(_step("s", "q", None, error="/elsewhere/p.decomp:3:1: boom"))
    assert first_divergence(a, b) is None


def test_a_missing_trace_is_a_note(tmp_path, programs):
    a = run(tmp_path, tmp_path / "a.decomp", "ra")
    run(tmp_path, off_by_one(programs), "rb")
    with sqlite3.connect(tmp_path / "rb" / "traces.sqlite") as db:
        db.execute("DELETE FROM traces WHERE id = 'a'")
    found = diff_runs(a, RunDir.open(tmp_path / "rb"))
    assert found[0]["id"] == "a" and found[0]["diverges_at"] is None
    assert found[0]["note"] == "no stored trace for this row in run B"
    assert found[1]["diverges_at"] is not None


# ---- printing and the command line
def _shown(differences, a, b) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    show_diff(differences, a, b, console)
    return console.export_text()


def test_show_diff_prints_the_runs_counts_and_each_divergence(tmp_path, programs):
    a = run(tmp_path, tmp_path / "a.decomp", "ra")
    b = run(tmp_path, off_by_one(programs), "rb")
    out = _shown(diff_runs(a, b), a, b)
    assert f"A  {a.path}" in out and f"B  {b.path}" in out
    assert "5 rows compared, 2 differ, 0 only in A, 0 only in B" in out
    assert 'A: "n a s"' in out and 'B: "n n c"' in out
    assert 'first difference: row > step 3 [letter] > item 1 "Donna" > call [letter] > step 1 [position]' in out
    assert "another answer" in out and "A: 3" in out and "B: 4" in out and "at a.decomp:24" in out
    assert "row f" in out and "row c" not in out


def test_cli_diff_prints_text_and_json_lines(tmp_path, programs):
    run(tmp_path, tmp_path / "a.decomp", "ra")
    run(tmp_path, off_by_one(programs), "rb")
    text = invoke("trace", "diff", tmp_path / "ra", tmp_path / "rb")
    assert text.exit_code == 0, text.output
    assert "2 differ" in text.output and "row a" in text.output
    lines = invoke("trace", "diff", tmp_path / "ra", tmp_path / "rb", "--json")
    assert lines.exit_code == 0, lines.output
    parsed = [json.loads(line) for line in lines.output.splitlines()]
    assert [d["id"] for d in parsed] == ["a", "f"] and parsed[0]["diverges_at"]["field"] == "answer"


def test_cli_diff_refuses_a_run_dir_of_another_format(tmp_path, programs):
    run(tmp_path, tmp_path / "a.decomp", "ra")
    run(tmp_path, tmp_path / "a.decomp", "rb")
    manifest = json.loads((tmp_path / "rb" / "run.json").read_text())
    (tmp_path / "rb" / "run.json").write_text(json.dumps({**manifest, "format": 99}))
    result = invoke("trace", "diff", tmp_path / "ra", tmp_path / "rb")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "format 99" in result.output and "Traceback" not in result.output


def test_cli_diff_with_a_corrupt_traces_file_is_a_clear_error(tmp_path, programs):
    run(tmp_path, tmp_path / "a.decomp", "ra")
    run(tmp_path, off_by_one(programs), "rb")
    (tmp_path / "rb" / "traces.sqlite").write_bytes(b"garbage" * 500)
    for name in ("traces.sqlite-wal", "traces.sqlite-shm"):
        (tmp_path / "rb" / name).unlink(missing_ok=True)
    result = invoke("trace", "diff", tmp_path / "ra", tmp_path / "rb")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "traces.sqlite is corrupt" in result.output and "Traceback" not in result.output


# ---- outcomes
OUTCOMES = '''from decomp import Failed


def upper(query):
    return query.upper()


def fails_on_same(query):
    return Failed(query.upper()) if query == "same" else query.upper()
'''


def test_the_same_answer_ok_in_one_run_and_failed_in_the_other_differs(tmp_path, monkeypatch):
    (tmp_path / "outcome_flip.py").write_text(OUTCOMES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = 'handler h = python(function="outcome_flip:FN")\nprogram p(question) {\n    QS: [h] #question\n}\nmain p\n'
    for name, fn in (("a", "upper"), ("b", "fails_on_same")):
        (tmp_path / f"{name}.decomp").write_text(source.replace("FN", fn), encoding="utf-8")
    rows = [{"id": "s", "question": "same"}, {"id": "o", "question": "other"}]
    a = run(tmp_path, tmp_path / "a.decomp", "ra", rows)
    b = run(tmp_path, tmp_path / "b.decomp", "rb", rows)
    assert [r["outcome"] for r in b.records()] == ["failed", "ok"]
    found = diff_runs(a, b)
    assert [d["id"] for d in found] == ["s"]
    assert (found[0]["answer_a"], found[0]["answer_b"]) == ("SAME", "SAME")
    assert found[0]["error_a"] is None and found[0]["error_b"] is None
    assert "1 differ" in _shown(found, a, b)
