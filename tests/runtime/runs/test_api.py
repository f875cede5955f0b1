"""run_dataset (decomp.runtime.runs.api, under `Program.run_dataset` and the CLI): what `decomp run
FILE --input DATA` does, from Python: the same run directory, resume, refusals and --output file
as the command line."""
import asyncio
import json
import shutil

import pytest
from click.testing import CliRunner
from tests.helpers import registry_with, untimed

from decomp import FakeModel, RunOptions, Session
from decomp.runtime.runs.api import RunSummary, run_dataset
from decomp.dsl.errors import DecompError
from decomp.runtime.cli import main
from decomp.runtime.runs.api import arun_dataset
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.rundir import RunDir
from tests.runtime.runs.run_helpers import QUESTIONS, files, manifest, results, snapshot  # noqa: F401 (files: the fixture)

def test_run_dataset_writes_the_run_directory_the_cli_writes(tmp_path, files):
    program, answers, data = files
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"

    done = run_dataset(program, data, model=f"fake:{answers}", options=RunOptions(cache_mode="off"), run_dir=mine)
    cli = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--run-dir", str(theirs),
                                    "--model", f"fake:{answers}", "--cache", "off"])
    assert cli.exit_code == 3, cli.output  # the broken line is a row error: rows failed

    assert isinstance(done, RunSummary) and done.run_dir == mine and done.output is None and done.notes == ()
    assert (done.rows, done.failed, done.score, done.summary["scored_rows"]) == (5, 1, 0.75, 4)
    for name in ("run.json", "results.jsonl", "traces.sqlite", "summary.json", "program/arith.decomp"):
        assert (mine / name).is_file(), name
    # the line the CLI prints is the summary's dict; summary.json is that without run_dir
    printed = json.loads(cli.stdout)
    assert untimed(done.to_dict()) == {**untimed(printed), "run_dir": str(mine)}
    assert json.loads((mine / "summary.json").read_text()) == done.summary
    assert {k: v for k, v in done.to_dict().items() if k != "run_dir"} == done.summary

    assert results(mine) == results(theirs)
    assert sorted(results(mine)) == [0, 1, 2, 3, 4]
    assert results(mine)[0]["answer"] == 4 and "error" in results(mine)[2]
    assert [r["id"] for r in done.records()] == ["q0", "q1", "line-3", "q2", "q3"]
    a, b = manifest(mine), manifest(theirs)
    assert a["program"] == b["program"] and a["input"] == b["input"] and a["options"] == b["options"]
    assert a["options"]["model"] == f"fake:{answers}" and a["options"]["cache_mode"] == "off"
    assert list(a["options"]) == list(RunOptions().to_dict())  # one fixed order
    assert (mine / "program" / "arith.decomp").read_bytes() == (theirs / "program" / "arith.decomp").read_bytes()
    run, other = RunDir.open(mine), RunDir.open(theirs)
    try:
        assert [(i, untimed(t.to_dict())) for i, t in run.traces()] == \
               [(i, untimed(t.to_dict())) for i, t in other.traces()]
    finally:
        run.close()
        other.close()


def test_the_one_line_call_takes_the_cli_defaults(files, monkeypatch, tmp_path):
    """No options: the step cache on in $DECOMP_CACHE_DIR, the run under $DECOMP_RUNS_DIR."""
    program, answers, data = files
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    done = run_dataset("prog/arith.decomp", "rows.jsonl", model="fake:answers.json")
    assert done.run_dir.parent == tmp_path / "runs" and done.run_dir.name.startswith("arith-rows-")
    assert (done.rows, done.failed, done.summary["calls"]) == (5, 1, 4)
    options = manifest(done.run_dir)["options"]
    assert options == {**RunOptions().to_dict(), "model": "fake:answers.json"}
    # resume=True without a run_dir finds it, and has no row left to run
    again = run_dataset("prog/arith.decomp", "rows.jsonl", model="fake:answers.json", resume=True)
    assert again.run_dir == done.run_dir and again.summary["sessions"] == 2 and again.rows == 5
    assert manifest(done.run_dir)["sessions"][-1]["rows"] == 0


def test_resume_runs_only_the_rows_a_partial_run_lacks(tmp_path, files):
    program, _, data = files
    run_dir = tmp_path / "run"
    first = FakeModel(mapping={q: " " + a for q, a in QUESTIONS.items()})
    done = run_dataset(program, data, model=first, run_dir=run_dir)
    assert len(first.prompts) == 4
    whole = results(run_dir)

    # as a kill leaves it: three complete lines and half of the fourth
    lines = (run_dir / "results.jsonl").read_bytes().split(b"\n")
    (run_dir / "results.jsonl").write_bytes(b"\n".join(lines[:3]) + b"\n" + lines[3][:25])
    (run_dir / "summary.json").unlink()
    kept = {json.loads(line)["index"] for line in lines[:3]}

    again = FakeModel(mapping={q: " " + a for q, a in QUESTIONS.items()})
    notes = []
    resumed = run_dataset(program, data, model=again, run_dir=run_dir, resume=True, on_note=notes.append)
    assert len(notes) == 1 and "cut off" in notes[0] and resumed.notes == tuple(notes)
    asked = [p.rsplit("Q: ", 1)[1].split("\n")[0] for p in again.prompts]
    by_index = dict(zip([0, 1, 3, 4], QUESTIONS))  # index 2 is the malformed line
    assert sorted(asked) == sorted(by_index[i] for i in range(5) if i not in kept and i in by_index)
    assert results(run_dir) == whole
    assert [s["resumed"] for s in manifest(run_dir)["sessions"]] == [False, True]
    assert manifest(run_dir)["sessions"][-1]["rows"] == 2
    assert untimed({k: v for k, v in resumed.summary.items() if k != "sessions"}) == \
           untimed({k: v for k, v in done.summary.items() if k != "sessions"})


def test_a_second_run_into_the_same_directory_is_refused_until_force(tmp_path, files):
    program, answers, data = files
    run_dir = tmp_path / "run"
    model = f"fake:{answers}"
    run_dataset(program, data, model=model, run_dir=run_dir)
    before = snapshot(run_dir)
    with pytest.raises(RunDirError, match="already holds a run: pass --resume to finish it, --force to start over"):
        run_dataset(program, data, model=model, run_dir=run_dir)
    assert snapshot(run_dir) == before
    with pytest.raises(RunDirError, match=r"was run with --model fake:.*answers.json; resuming with fake:other"):
        run_dataset(program, data, model="fake:other.json", run_dir=run_dir, resume=True)
    assert snapshot(run_dir) == before

    forced = run_dataset(program, data, model=model, run_dir=run_dir, force=True)
    assert forced.summary["sessions"] == 1 and forced.rows == 5


def test_output_is_written_in_input_order_although_rows_end_out_of_order(tmp_path):
    """A session of one's own (here with a handler kind that waits): rows end last-first."""
    ended, done_events = [], {}

    async def wait(query):
        """Row i ends only after row i+1 has ended (events, not timing): the last row ends first."""
        index = int(query)
        mine = done_events.setdefault(index, asyncio.Event())
        if index < 4:
            await asyncio.wait_for(done_events.setdefault(index + 1, asyncio.Event()).wait(), 30)
        ended.append(query)
        mine.set()
        return query

    program = tmp_path / "wait.decomp"
    program.write_text('handler wait = fn(fn="wait")\nprogram p(question) {\n    QS: [wait] #question\n}\nmain p\n')
    delays = ["0", "1", "2", "3", "4"]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": d}) + "\n" for i, d in enumerate(delays)))
    out = tmp_path / "out" / "lines.jsonl"

    session = Session(registry=registry_with({"wait": wait}))
    done = run_dataset(program, data, session=session, run_dir=tmp_path / "run", output=out)
    assert ended == delays[::-1]  # they did end out of order
    assert done.output == out and done.to_dict()["output"] == str(out)
    ids = [f"r{i}" for i in range(5)]
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ids
    assert [json.loads(line)["id"] for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()] \
        == ids[::-1]
    options = manifest(tmp_path / "run")["options"]
    assert (options["cache_mode"], options["concurrency"], options["max_depth"]) == ("off", 8, 64)


def test_a_loaded_module_a_bundled_program_and_main(tmp_path):
    data = tmp_path / "rows.jsonl"
    question = ('Take the letters at position 1 of the words in "Donna Guan Nascimento" and concatenate them '
                'using a space.')
    data.write_text(json.dumps({"id": "a", "question": question, "answer": "D G N"}) + "\n")
    bundled = run_dataset("decomp/letter_cat_symbolic", data, run_dir=tmp_path / "one")
    assert (bundled.rows, bundled.score) == (1, 1.0)

    session = Session()
    module = session.load(shutil.copy(bundled.run_dir / "program" / "letter_cat_symbolic.decomp", tmp_path))
    done = run_dataset(module, data, session=session, run_dir=tmp_path / "two", main="letter_cat")
    assert done.records()[0]["answer"] == "D G N" and manifest(done.run_dir)["program"]["main"] == "letter_cat"
    with pytest.raises(DecompError, match=r"has no program or handler named 'nope' \(it has: .*letter_cat"):
        run_dataset(module, data, session=session, run_dir=tmp_path / "three", main="nope")
    assert module.main == "letter_cat" and not (tmp_path / "three").exists()
    with pytest.raises(TypeError, match="session="):
        run_dataset(module, data)
    with pytest.raises(TypeError, match="not both"):
        run_dataset("decomp/letter_cat_symbolic", data, session=session, model="fake:")


def test_user_errors_raise_decomp_errors(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"question": "x"}\n')
    with pytest.raises(DecompError, match="no such file or bundled program: .*nowhere.decomp"):
        run_dataset(tmp_path / "nowhere.decomp", data)
    bad = tmp_path / "bad.decomp"
    bad.write_text("main nothing\n")
    with pytest.raises(DecompError, match="main names an unknown program or handler 'nothing'"):
        run_dataset(bad, data, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(RunDirError, match="no earlier run"):
        run_dataset("decomp/letter_cat_symbolic", data, resume=True)


def test_inside_an_event_loop_await_arun_dataset(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": "a", "question": "Reverse the sequence \\"a, b, c\\"."}\n')

    async def in_a_loop():  # the sync call runs on a worker thread with its own loop (Jupyter)
        inside = run_dataset("decomp/reverse_symbolic", data, run_dir=tmp_path / "sync")
        return inside, await arun_dataset("decomp/reverse_symbolic", data, run_dir=tmp_path / "run")

    inside, done = asyncio.run(in_a_loop())
    assert done.records()[0]["answer"] == "c, b, a" == inside.records()[0]["answer"]
