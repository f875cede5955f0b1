"""decomp.load / run / arun / open_run: the notebook API (runtime/runs/notebook.py)."""
import asyncio
import json

import pytest

import decomp

Q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)


def test_one_question_and_a_dataset_and_reading_it_back(tmp_path):
    program = decomp.load("decomp/letter_cat_symbolic")
    assert decomp.run(program, question=Q).answer == "n a s"
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"id": "a", "question": Q, "answer": "n a s"}) + "\n"
                    + json.dumps({"id": "b", "question": "no words"}) + "\n")
    run = decomp.run(program, dataset=data)
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
        inside = decomp.run(program, question=Q)           # a running loop: a worker thread runs it
        awaited = await decomp.arun(program, question=Q)
        run = await decomp.arun(program, dataset=[{"id": "x", "question": Q}])
        return inside.answer, awaited.answer, run.rows()[0]["answer"]

    assert asyncio.run(cell()) == ("n a s", "n a s", "n a s")


def test_bad_calls_are_clear_errors():
    program = decomp.load("decomp/letter_cat_symbolic")
    with pytest.raises(TypeError, match="not both"):
        decomp.run(program, question=Q, dataset=[{"question": Q}])
    with pytest.raises(TypeError, match="unknown settings"):
        decomp.load("decomp/letter_cat_symbolic", cache="off")
    with pytest.raises(TypeError, match="row 1"):
        decomp.run(program, dataset=[{"question": Q}, "text"])


def test_trust_is_settable_from_python(tmp_path):
    from decomp.dsl.errors import DecompError
    path = tmp_path / "p.decomp"
    path.write_text('handler h = python(function="string:capwords")\nmain h\n', encoding="utf-8")
    with pytest.raises(DecompError, match="'string:capwords' is not allowed"):
        decomp.load(path)
    program = decomp.load(path, trust=["string"])
    assert decomp.run(program, question="hello big world").answer == "Hello Big World"
    assert decomp.run(program, dataset=[{"id": "r", "question": "a b"}]).rows()[0]["answer"] == "A B"
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
