"""Run directories (decomp.runtime.runs: rundir, manifest, summary): the manifest, the program copy, results and
traces, the summary."""
import json
import sqlite3

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.runs.progress import progress
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.manifest import make_manifest, program_files
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.storage.summary import summarize
from decomp.runtime.engine.tracing import TraceNode

LETTER_Q = 'Take the letters at position {p} of the words in "Donna Guan Nascimento" and concatenate them using a space.'
GOLD = {1: "D G N", 2: "o u a", 3: "n a s"}


#: `decomp run --input`'s exit status when rows ended in an error: the `data` rows hold one ("nope").
ROWS_FAILED = 3


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def data(tmp_path):
    rows = [{"id": f"r{p}", "question": LETTER_Q.format(p=p), "answer": GOLD[p]} for p in (1, 2, 3)]
    rows.append({"id": "nope", "question": "no quotes here", "answer": "x"})
    return write_rows(tmp_path / "rows.jsonl", rows)


def run_cli(*args):
    result = CliRunner().invoke(main, ["run", "decomp/letter_cat_symbolic", *map(str, args)])
    return result


def test_a_dataset_run_writes_its_run_directory(tmp_path, data):
    run_dir = tmp_path / "run"
    result = run_cli("--input", data, "--run-dir", run_dir)
    assert result.exit_code == ROWS_FAILED, result.output
    assert result.stderr.startswith(f"error: 1 of 4 row(s) ended in an error (in {run_dir / 'results.jsonl'}")
    printed = json.loads(result.stdout)
    assert printed["run_dir"] == str(run_dir)
    assert (printed["rows"], printed["failed"], printed["score"], printed["scored_rows"]) == (4, 1, 0.75, 4)
    assert json.loads((run_dir / "summary.json").read_text()) == {k: v for k, v in printed.items() if k != "run_dir"}
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["format"] == 1 and manifest["program"]["main"] == "letter_cat"
    assert manifest["program"]["files"].keys() == {"letter_cat_symbolic.decomp"}
    assert (run_dir / "program" / "letter_cat_symbolic.decomp").read_text().startswith("# Letter concatenation")
    assert manifest["options"]["concurrency"] == 8 and manifest["input"]["path"] == str(data.resolve())
    assert len(manifest["sessions"]) == 1 and manifest["sessions"][0]["rows"] == 4
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["index"] for r in lines) == [0, 1, 2, 3]
    by_id = {r["id"]: r for r in lines}
    assert by_id["r3"]["answer"] == "n a s" and by_id["r3"]["score"] == 1.0 and by_id["r3"]["gold"] == "n a s"
    assert "error" in by_id["nope"] and by_id["nope"]["score"] == 0.0
    assert by_id["r1"]["usage"]["handlers"]["join"]["calls"] == 1 and by_id["r1"]["seconds"] > 0


def test_every_row_has_its_tree_and_a_failure_is_marked(tmp_path, data):
    run_dir = tmp_path / "run"
    assert run_cli("--input", data, "--run-dir", run_dir).exit_code == ROWS_FAILED
    run = RunDir.open(run_dir)
    tree = run.trace(run.find("r3")["index"])
    assert tree.kind == "row" and tree.answer == "n a s" and tree.ok
    calls = [n for n in tree.walk() if n.kind == "call"]
    assert {n.handler for n in calls} >= {"name", "words", "letter", "join"}
    assert all(n.seconds is not None and n.location.endswith(".decomp:" + n.location.split(":")[-1]) for n in calls)
    failed = run.trace(run.find("nope")["index"])
    assert not failed.ok and any(n.error for n in failed.walk() if n is not failed)
    assert [i for i, _ in run.traces()] == [0, 1, 2, 3]


def test_the_default_run_directory_is_under_decomp_runs_dir_and_resume_finds_it(tmp_path, data, monkeypatch):
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    first = json.loads(run_cli("--input", data).stdout)
    assert first["run_dir"].startswith(str(tmp_path / "runs" / "letter_cat_symbolic-rows-"))
    again = run_cli("--input", data, "--resume")
    assert again.exit_code == ROWS_FAILED, again.output  # the failed row is part of the run: still failed
    resumed = json.loads(again.stdout)
    assert resumed["run_dir"] == first["run_dir"] and resumed["sessions"] == 2 and resumed["rows"] == 4


def test_output_gets_every_row_in_input_order(tmp_path, data):
    out = tmp_path / "out.jsonl"
    result = run_cli("--input", data, "--run-dir", tmp_path / "run", "--output", out)
    assert json.loads(result.stdout)["output"] == str(out)
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["r1", "r2", "r3", "nope"]


def test_find_by_id_then_by_index_and_a_clear_error(tmp_path, data):
    run_cli("--input", data, "--run-dir", tmp_path / "run")
    run = RunDir.open(tmp_path / "run")
    assert run.find("r2")["index"] == 1 and run.find("3")["id"] == "nope"
    with pytest.raises(RunDirError, match=r"has no row 'zz' \(its rows: r1, r2, r3, nope\)"):
        run.find("zz")


def test_opening_what_is_not_a_run_directory_says_so(tmp_path):
    with pytest.raises(RunDirError, match="does not exist"):
        RunDir.open(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(RunDirError, match="has no run.json: not a decomp run directory"):
        RunDir.open(tmp_path / "plain")


def test_a_corrupt_trace_store_is_a_clear_error(tmp_path, data):
    run_cli("--input", data, "--run-dir", tmp_path / "run")
    (tmp_path / "run" / "traces.sqlite").write_bytes(b"this is not a database" * 100)
    for name in ("traces.sqlite-wal", "traces.sqlite-shm"):
        (tmp_path / "run" / name).unlink(missing_ok=True)
    with pytest.raises(RunDirError, match="traces.sqlite is corrupt"):
        RunDir.open(tmp_path / "run").trace(0)


def test_a_damaged_tree_is_a_clear_error(tmp_path, data):
    run_cli("--input", data, "--run-dir", tmp_path / "run")
    with sqlite3.connect(tmp_path / "run" / "traces.sqlite") as db:
        db.execute("UPDATE traces SET tree = ? WHERE idx = 1", (b"garbage",))
    run = RunDir.open(tmp_path / "run")
    assert run.trace(0) is not None
    with pytest.raises(RunDirError, match=r"corrupt \(row 1"):
        run.trace(1)


def test_trace_node_dicts_round_trip():
    root = TraceNode("row", label="r", answer=["a", 1])
    step = root.child("call", handler="h", query="q", seconds=0.5, prompt_tokens=3, completion_tokens=2)
    step.child("model", prompt="P", raw_output="R", cache_hit=True, error="boom")
    data = json.loads(json.dumps(root.to_dict()))
    assert data["ok"] and not data["children"][0]["children"][0]["ok"]
    assert TraceNode.from_dict(data) == root


def test_program_files_are_named_relative_to_the_main_file(tmp_path):
    (tmp_path / "p" / "prompts").mkdir(parents=True)
    main_file = tmp_path / "p" / "main.decomp"
    main_file.write_text("x")
    (tmp_path / "p" / "prompts" / "a.txt").write_text("a")
    (tmp_path / "elsewhere.txt").write_text("e")
    named = program_files(main_file, [tmp_path / "p" / "prompts" / "a.txt", tmp_path / "elsewhere.txt",
                                      tmp_path / "p" / "missing.txt"])
    assert sorted(named) == ["_outside/elsewhere.txt", "main.decomp", "prompts/a.txt"]


def test_manifest_fingerprint_follows_every_file(tmp_path, data):
    main_file = tmp_path / "m.decomp"
    main_file.write_text("x")
    prompt = tmp_path / "p.txt"
    prompt.write_text("one")
    before = make_manifest(main_file, "m", [prompt], data, {})
    prompt.write_text("two")
    after = make_manifest(main_file, "m", [prompt], data, {})
    assert before["program"]["sha256"] != after["program"]["sha256"]
    assert before["input"]["sha256"] == after["input"]["sha256"]


def test_summary_adds_rows_usage_and_sessions():
    records = [
        {"index": 0, "answer": "a", "score": 1.0, "usage": {"calls": 2, "cache_hits": 1, "prompt_tokens": 10,
                                                            "completion_tokens": 4,
                                                            "handlers": {"h": {"calls": 2, "seconds": 0.5}}}},
        {"index": 1, "answer": None, "error": "x", "score": 0.0,
         "usage": {"calls": 1, "handlers": {"h": {"calls": 1, "seconds": 0.25}}}},
        {"index": 2, "answer": None, "error": "bad row"},
    ]
    manifest = {"sessions": [{"seconds": 1.5}, {"seconds": 0.5}, {"seconds": None}]}
    summary = summarize(records, manifest)
    assert summary == {"rows": 3, "failed": 2, "score": 0.5, "metric": "em", "scored_rows": 2, "failed_outcome": 0,
                       "success_rate": 0.333333, "calls_per_row": 1.0, "calls": 3, "cache_hits": 1,
                       "prompt_tokens": 10, "completion_tokens": 4, "handler_calls": 3, "models": {},
                       "wall_s": 2.0, "sessions": 3,
                       "handlers": {"h": {"calls": 3, "seconds": 0.75, "queue_seconds": 0.0, "mean_ms": 250.0,
                                             "service_mean_ms": 250.0, "queue_mean_ms": 0.0}}}
    assert summarize([], {"sessions": []})["score"] is None
    assert "metric" not in summarize([], {"sessions": []})        # no gold: nothing was scored
    assert summarize(records[:1], {"sessions": [], "metric": "set_em"})["metric"] == "set_em"


def test_progress_draws_only_on_a_terminal(capsys):
    from decomp.runtime.engine.budgets import Usage

    usage = Usage(calls=3)
    with progress(2, usage, enabled=False) as tick:
        tick({"index": 0})
    assert capsys.readouterr().err == ""
    with progress(2, usage, enabled=True) as tick:
        tick({"index": 0})
        tick({"index": 1, "error": "x"})
    err = capsys.readouterr().err
    assert "2/2" in err and "failed 1" in err and "calls 3" in err


def test_resuming_with_another_main_is_refused(tmp_path, data):
    assert run_cli("--input", data, "--run-dir", tmp_path / "run").exit_code == ROWS_FAILED
    result = run_cli("--input", data, "--run-dir", tmp_path / "run", "--resume", "--main", "letter_at")
    assert result.exit_code == 1 and "ran the program's 'letter_cat', not 'letter_at'" in result.output


def test_a_second_writer_of_a_run_directory_is_refused_while_the_first_holds_it(tmp_path):
    """One writer per run directory: another process holding the lock (a `--resume` still
    running) makes `resume` and `create --force` refuse, touching nothing; once it ends, both work."""
    import subprocess
    import sys
    import textwrap

    from decomp.runtime.storage.layout import LOCK, RunDirError
    from decomp.runtime.storage.manifest import make_manifest
    from decomp.runtime.storage.rundir import RunDir
    (tmp_path / "p.decomp").write_text("main x\n", encoding="utf-8")
    (tmp_path / "d.jsonl").write_text("", encoding="utf-8")
    manifest = make_manifest(tmp_path / "p.decomp", None, [], tmp_path / "d.jsonl", {})
    run = RunDir.create(tmp_path / "run", manifest)
    run.close()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, sys, time
        handle = open({str(tmp_path / "run" / LOCK)!r}, "a")
        fcntl.flock(handle, fcntl.LOCK_EX)
        print("locked", flush=True)
        sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = sorted(p.name for p in (tmp_path / "run").iterdir())
        for attempt in (lambda: RunDir.resume(tmp_path / "run", manifest),
                        lambda: RunDir.create(tmp_path / "run", manifest, force=True)):
            with pytest.raises(RunDirError, match="being written by another decomp run"):
                attempt()
        assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before
    finally:
        holder.communicate("\n", timeout=10)
    RunDir.resume(tmp_path / "run", manifest).close()
    RunDir.create(tmp_path / "run", manifest, force=True).close()


def test_row_indices_are_a_bitmap_set():
    from decomp.runtime.storage.rundir import RowIndices
    rows = RowIndices()
    for index in (5, 0, 9, 5, 1000):
        rows.add(index)
    assert len(rows) == 4 and list(rows) == [0, 5, 9, 1000]
    assert 9 in rows and 8 not in rows and 10**9 not in rows and -1 not in rows and "5" not in rows
    with pytest.raises(ValueError):
        rows.add(-1)


@pytest.mark.parametrize("index", ["-1", "true", "2147483648", "1.5"])
def test_a_results_line_with_an_impossible_index_is_corrupt(tmp_path, data, index):
    run_cli("--input", data, "--run-dir", tmp_path / "run")
    (tmp_path / "run" / "results.jsonl").write_text('{"index": %s, "id": "a", "answer": "x"}\n' % index)
    with pytest.raises(RunDirError, match="not a results line"):
        RunDir.open(tmp_path / "run")


@pytest.mark.parametrize("line", ['{"index": 0, "score": null}', '{"index": 0, "usage": {"calls": "3"}}',
                                  '{"index": 0, "environment": [1]}'])
def test_a_results_line_with_fields_of_the_wrong_type_is_corrupt(tmp_path, data, line):
    run_cli("--input", data, "--run-dir", tmp_path / "run")
    (tmp_path / "run" / "results.jsonl").write_text(line + "\n")
    with pytest.raises(RunDirError, match=r"results.jsonl:1: not a results line"):
        RunDir.open(tmp_path / "run")


def _bare_manifest(tmp_path):
    (tmp_path / "p.decomp").write_text("main x\n", encoding="utf-8")
    (tmp_path / "d.jsonl").write_text("", encoding="utf-8")
    return make_manifest(tmp_path / "p.decomp", None, [], tmp_path / "d.jsonl", {})


def _record(index):
    return {"id": f"r{index}", "index": index, "answer": "a", "outcome": "ok", "usage": {}, "seconds": 0.1}


def test_sessions_that_never_ended_get_the_rows_they_wrote_on_resume(tmp_path):
    """A session whose process was killed (here: closed without `finish`) is recorded, once the
    run is resumed, with the rows it wrote and its seconds up to its last write; one that wrote
    nothing keeps `seconds` null. Earlier sessions' counts stay as they were."""
    manifest = _bare_manifest(tmp_path)
    run = RunDir.create(tmp_path / "run", manifest)
    for index in range(4):
        run.add(_record(index), TraceNode("row"))
    run.close()  # killed: no finish
    run = RunDir.resume(tmp_path / "run", manifest)
    run.close()  # killed again, before any row
    run = RunDir.resume(tmp_path / "run", manifest)
    run.add(_record(4), TraceNode("row"))
    summary = run.finish(1, 0.5)
    sessions = json.loads((tmp_path / "run" / "run.json").read_text())["sessions"]
    assert [s["rows"] for s in sessions] == [4, 0, 1]
    assert [s.get("killed", False) for s in sessions] == [True, True, False]
    assert [s["rows_before"] for s in sessions] == [0, 4, 4]
    assert sessions[0]["seconds"] is not None and 0 <= sessions[0]["seconds"] < 60
    assert sessions[1]["seconds"] is None and sessions[2]["seconds"] == 0.5
    assert summary["rows"] == 5 and summary["sessions"] == 3


def test_killed_sessions_of_a_run_written_before_rows_before_are_counted_too(tmp_path):
    manifest = _bare_manifest(tmp_path)
    run = RunDir.create(tmp_path / "run", manifest)
    run.add(_record(0), TraceNode("row"))
    run.finish(1, 0.2)
    run = RunDir.resume(tmp_path / "run", manifest)
    run.add(_record(1), TraceNode("row"))
    run.add(_record(2), TraceNode("row"))
    run.close()  # killed
    path = tmp_path / "run" / "run.json"
    written = json.loads(path.read_text())
    for session in written["sessions"]:
        del session["rows_before"]  # as an older decomp wrote them
    path.write_text(json.dumps(written))
    RunDir.resume(tmp_path / "run", manifest).close()
    sessions = json.loads(path.read_text())["sessions"]
    assert [s["rows"] for s in sessions[:2]] == [1, 2] and sessions[1]["killed"] is True
