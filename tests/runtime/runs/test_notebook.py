"""decomp.load -> Program (run, arun, run_dataset, arun_dataset) and open_run: the one way in from
Python (runtime/runs/notebook.py)."""
import asyncio
import json

import pytest

import decomp
from decomp.handlers.sandbox.trust import Trust

Q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)


def test_one_question_and_a_dataset_and_reading_it_back(tmp_path):
    program = decomp.load("decomp/letter_cat_symbolic")
    assert program.run(Q).answer == "n a s"
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"id": "a", "question": Q, "answer": "n a s"}) + "\n"
                    + json.dumps({"id": "b", "question": "no words"}) + "\n")
    run = program.run_dataset(data)
    assert isinstance(run, decomp.Run) and run.result.rows == 2  # the summary, from the Run
    rows = run.rows()
    assert [(r["id"], r["outcome"], r["answer"]) for r in rows] == [("a", "ok", "n a s"), ("b", "error", None)]
    assert rows[0]["question"] == Q and rows[0]["score"] == 1.0 and "did not match" in rows[1]["error"]
    assert run.summary["rows"] == 2 and run.summary["failed"] == 1
    tree = decomp.open_run(run.path).trace("a")
    assert tree.answer == "n a s" and [c.handler for c in tree.children][:2] == ["name", "words"]
    assert list(decomp.open_run(run.path).to_pandas()["id"]) == ["a", "b"]
    assert "rows=2 failed=1" in repr(run)


def test_sync_run_inside_a_running_loop_and_arun():
    program = decomp.load("decomp/letter_cat_symbolic")

    async def cell():
        inside = program.run(Q)                            # a running loop: a worker thread runs it
        awaited = await program.arun(Q)
        run = await program.arun_dataset([{"id": "x", "question": Q}])
        ran = program.run_dataset([{"id": "y", "question": Q}], progress=False)
        return inside.answer, awaited.answer, run.rows()[0]["answer"], ran.rows()[0]["answer"]

    assert asyncio.run(cell()) == ("n a s", "n a s", "n a s", "n a s")


def test_bad_calls_are_clear_errors():
    program = decomp.load("decomp/letter_cat_symbolic")
    with pytest.raises(TypeError, match=r"run\(\) takes one question \(text\), not list; a dataset of rows runs "
                                        r"with run_dataset\(\)"):
        program.run([{"question": Q}])
    with pytest.raises(TypeError, match=r"give the question \(or the row's fields=...\); a dataset runs with"):
        program.run()
    with pytest.raises(TypeError, match="unknown settings"):
        decomp.load("decomp/letter_cat_symbolic", cache="off")
    with pytest.raises(TypeError, match="row 1"):
        program.run_dataset([{"question": Q}, "text"])


def test_trust_is_settable_from_python(tmp_path):
    from decomp.dsl.errors import DecompError
    path = tmp_path / "p.decomp"
    path.write_text('handler h = python(function="string:capwords")\nmain h\n', encoding="utf-8")
    with pytest.raises(DecompError, match="'string:capwords' is not allowed"):
        decomp.load(path)
    program = decomp.load(path, trust=["string"])
    assert program.run("hello big world").answer == "Hello Big World"
    assert program.run_dataset([{"id": "r", "question": "a b"}]).rows()[0]["answer"] == "A B"
    assert "trust=['string']" in repr(program)


def test_allowed_folders_are_settable_from_python(tmp_path):
    from decomp.dsl.errors import DecompError
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "few.txt").write_text("Q: what?\nA: this\n", encoding="utf-8")
    path = tmp_path / "p" / "m.decomp"
    path.parent.mkdir()
    path.write_text('handler q = prompt(file="../outside/few.txt")\nmain q\n', encoding="utf-8")
    with pytest.raises(DecompError):
        decomp.load(path)
    program = decomp.load(path, allow_roots=[outside])
    assert "allow_roots=" in repr(program) and program.allow_roots == (str(outside),)


def test_a_session_of_ones_own_owns_the_settings_and_runs_datasets_too(tmp_path):
    (tmp_path / "caps.decomp").write_text('handler h = python(function="string:capwords")\nmain h\n', encoding="utf-8")
    (tmp_path / "ask.decomp").write_text('handler ask = prompt(text="Q: {{ query }}\\nA:")\nmain ask\n',
                                         encoding="utf-8")
    session = decomp.Session(trust=Trust.of(["string"]), model=decomp.FakeModel(default='"yes"'))
    caps = decomp.load(tmp_path / "caps.decomp", session=session)  # the session's trust
    assert caps.session is session and caps.trust == ("string",)
    assert caps.run("hello big world").answer == "Hello Big World"
    run = caps.run_dataset([{"id": "r", "question": "a b"}], run_dir=tmp_path / "r")
    assert run.rows()[0]["answer"] == "A B" and run.manifest["options"]["trust"] == ["string"]
    ask = decomp.load(tmp_path / "ask.decomp", session=session)  # the session's model
    assert ask.run("x").answer == "yes"
    assert ask.run_dataset([{"id": "r", "question": "y"}], run_dir=tmp_path / "r2").rows()[0]["answer"] == "yes"
    assert session.usage.calls == 2  # the question and the row: both in the caller's session


def test_a_session_and_settings_are_refused_together(tmp_path):
    session = decomp.Session()
    with pytest.raises(TypeError, match="load\\(\\) takes a session or the settings to build one, not both: the "
                                        "session owns cache_mode, model, trust"):
        decomp.load("decomp/letter_cat_symbolic", session=session, model="fake:x.json", trust=["string"],
                    cache_mode="off")
    program = decomp.load("decomp/letter_cat_symbolic", session=session, main="letter_cat")
    with pytest.raises(TypeError, match="load it again with another session"):
        program.changed(concurrency=2)
