"""`decomp trace show`: the rows' table and one row's tree, on run directories made by `decomp run`."""
from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.views.tree import failed_nodes, short_paths, show_rows, show_tree, where
from tests.helpers import invoke
from tests.runtime.views.tree_helpers import ROWS, make_run, question, text_of

RED = re.compile(r"\x1b\[(?:\d+;)*31(?:;\d+)*m")  # red, bold red, dim red: SGR code 31


def red(line: str) -> bool:
    return RED.search(line) is not None


@pytest.fixture
def letter_run(tmp_path):
    return make_run(tmp_path, ROWS)


def ansi_of(draw, width=160) -> str:
    out = io.StringIO()
    draw(Console(file=out, force_terminal=True, color_system="truecolor", width=width))
    return out.getvalue()


def line_with(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


def tree_of(run_dir, row_id):
    run = RunDir.open(run_dir)
    record = run.find(row_id)
    return record, run.trace(record["index"])


# ---- the rows' table
def test_rows_table_lists_every_row_with_the_runs_header(letter_run):
    run = RunDir.open(letter_run)
    text = text_of(lambda c: show_rows(run, c))
    assert "letter_cat_symbolic.decomp (main letter_cat)" in text and "run.jsonl" in text  # program, input
    assert re.search(r"model\s+\S+", text)
    assert "rows 3  failed 1  score 0.500 over 2" in text  # two rows have gold
    ok = line_with(text, " ok ")
    assert '"n a s"' in ok and re.search(r"│\s+1\s+│", ok)  # answer, gold, score 1
    wrong = line_with(text, " wrong ")
    assert '"a,e"' in wrong and '"a,x"' in wrong
    bad = line_with(text, " bad ")
    assert "[name] regex: pattern" in bad and "—" in bad
    for header in ("answer", "gold", "score", "calls", "tokens", "cached", "error"):
        assert header in text
    assert text.rstrip().endswith(f"decomp trace show {run.path} --row ID for a row's tree")


def test_failed_rows_are_red_and_the_others_not(letter_run):
    run = RunDir.open(letter_run)
    out = ansi_of(lambda c: show_rows(run, c))
    assert red(line_with(out, "bad"))
    assert not red(line_with(out, "wrong")) and not red(line_with(out, '"n a s"'))


def test_a_large_run_shows_failures_first_then_the_first_rows(tmp_path):
    rows = [{"id": f"r{i}", "question": question(f"Word{i} Other{i}")} for i in range(60)]
    for i in (41, 52, 58):
        rows[i]["question"] = f"Take the letters at position 1 of the words in nothing quoted {i}."
    run = RunDir.open(make_run(tmp_path, rows))
    text = text_of(lambda c: show_rows(run, c), width=140)
    body = [line for line in text.splitlines() if re.match(r"\s*\d+ │", line)]
    assert len(body) == 50
    assert [line.split("│")[1].strip() for line in body[:3]] == ["r41", "r52", "r58"]
    assert all("[name] regex" in line for line in body[:3])
    assert [line.split("│")[1].strip() for line in body[3:]] == [f"r{i}" for i in range(48) if i != 41]
    assert "10 more rows not shown (0 of them failed)" in text


def test_an_empty_run_says_so(tmp_path):
    run = RunDir.open(make_run(tmp_path, []))
    assert "no complete rows yet" in text_of(lambda c: show_rows(run, c))


# ---- one row's tree
def test_tree_shows_handlers_queries_answers_and_details(letter_run):
    record, tree = tree_of(letter_run, "ok")
    text = text_of(lambda c: show_tree(record, tree, c), width=200)
    assert text.splitlines()[0].startswith('row 0  id ok  answer "n a s"  gold "n a s"  score 1')
    name = line_with(text, "[name]")
    assert "Take the letters at position 3" in name and '→ "Donna Guan Nascimento"' in name
    assert "letter_cat_symbolic.decomp:15" in name and " ms" in name
    assert "…" in name and len(name) < 200  # the 105-character question is cut to ~80
    assert '[words] "Donna Guan Nascimento" → ["Donna", "Guan", "Nascimento"]' in text
    assert 'step [letter] (foreach) #2 → ["n", "a", "s"]' in text
    assert 'item [letter] Guan → "a"' in text
    assert '[letter_at] 3 Guan → "a"' in text
    assert '[join] ["n", "a", "s"] " " → "n a s"' in text
    # a step and the call it made are one line
    assert text.count("[position]") == 3 and "── call" not in text


def test_tree_of_a_failed_row_shows_the_error_under_the_failing_node_in_red(letter_run):
    record, tree = tree_of(letter_run, "bad")
    text = text_of(lambda c: show_tree(record, tree, c), width=200)
    lines = text.splitlines()
    name_at = next(i for i, line in enumerate(lines) if "[name]" in line)
    assert "✗ [name] regex, letter_cat_symbolic.decomp:15:5: pattern" in lines[name_at + 1]
    assert text.count("✗") == 1  # the row's error, the same text, is not repeated above
    assert text.count("step (not run)") == 3
    out = ansi_of(lambda c: show_tree(record, tree, c), width=200)
    assert red(line_with(out, "[name]")) and red(line_with(out, "✗"))
    assert red(line_with(out, "row bad"))  # the path down to the failure
    assert not red(line_with(out, "[delimiter]"))


def test_failed_nodes_are_the_failures_and_their_ancestors():
    leaf = TraceNode("call", handler="x", error="boom")
    step = TraceNode("step", handler="x", children=[leaf])
    fine = TraceNode("step", handler="y", children=[TraceNode("call", handler="y")])
    root = TraceNode("row", children=[fine, step])
    assert failed_nodes(root) == {id(leaf), id(step), id(root)}


def test_model_nodes_show_the_prompts_last_lines_and_the_raw_output(tmp_path):
    ask = question("Donna Guan Nascimento")
    fake = tmp_path / "fake.json"
    fake.write_text(json.dumps({
        "script": {ask: ['[split] What are the words in "Donna Guan Nascimento"?', "[EOQ]"]},
        "mapping": {"What are the words in": ' ["Donna", "Guan", "Nascimento"]'},
    }), encoding="utf-8")
    run_dir = make_run(tmp_path, [{"id": "m", "question": ask}], "llm", "decomp/letter_cat_llm",
                       "--model", f"fake:{fake}")
    record, tree = tree_of(run_dir, "m")
    text = text_of(lambda c: show_tree(record, tree, c), width=200)
    first_model = line_with(text, "model [letter_cat]")
    assert re.search(r"\d+/\d+ tok", first_model) and " ms" in first_model
    assert "output [split] What are the words in" in text
    assert 'Q: What are the words in "Donna Guan Nascimento"?' in text  # the split prompt's tail
    assert "prompt …" in text
    assert 'Edsger' not in text  # the few-shot examples are not printed
    assert "output [EOQ]" in text


def test_a_row_without_a_trace_says_so(letter_run):
    record, _ = tree_of(letter_run, "ok")
    text = text_of(lambda c: show_tree(record, None, c))
    assert "has no stored trace" in text and "Traceback" not in text


def test_paths_are_cut_to_file_and_line():
    assert where("/a/b/c.decomp:15") == "c.decomp:15"
    assert where("<[letter_cat] step 1>:1") == "<[letter_cat] step 1>:1"
    assert where(None) == ""
    cut = short_paths("/x/y/p.decomp:15:5: regex failed at /x/y/p.decomp:3")
    assert cut == "p.decomp:15:5: regex failed at p.decomp:3"


# ---- through the command line
def test_cli_shows_the_table_and_a_rows_tree(letter_run):
    table = invoke("trace", "show", letter_run)
    assert table.exit_code == 0, table.output
    assert "wrong" in table.output and "--row ID" in table.output
    tree = invoke("trace", "show", letter_run, "--row", "wrong")
    assert tree.exit_code == 0, tree.output
    assert "[delimiter]" in tree.output and '"a,e"' in tree.output
    by_index = invoke("trace", "show", letter_run, "--row", "2")
    assert by_index.output == tree.output


def test_cli_missing_row_is_one_clear_line(letter_run):
    result = invoke("trace", "show", letter_run, "--row", "nope")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"error: {letter_run} has no row 'nope' (its rows: ok, bad, wrong)"]
    assert isinstance(result.exception, SystemExit)


def test_cli_run_dir_of_another_format_is_refused(letter_run):
    manifest = json.loads((letter_run / "run.json").read_text())
    (letter_run / "run.json").write_text(json.dumps({**manifest, "format": 99}))
    for args in ((), ("--row", "ok")):
        result = invoke("trace", "show", letter_run, *args)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
        assert "format 99" in result.output and "Traceback" not in result.output


def test_cli_corrupt_traces_file_is_a_clear_error(letter_run):
    (letter_run / "traces.sqlite").write_bytes(b"this is not a database" * 200)
    for name in ("traces.sqlite-wal", "traces.sqlite-shm"):
        (letter_run / name).unlink(missing_ok=True)
    result = invoke("trace", "show", letter_run, "--row", "ok")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "traces.sqlite is corrupt" in result.output and "Traceback" not in result.output
    assert invoke("trace", "show", letter_run).exit_code == 0  # the table needs no traces


def test_cli_not_a_run_dir(tmp_path):
    result = invoke("trace", "show", tmp_path / "nowhere")
    assert result.exit_code == 1 and "does not exist" in result.output
