"""The top level of `decomp` is what the manual's Python page documents (docs/api.md's `::: decomp.NAME`
lines), nothing more, nothing internal; the old entry points warn and still work for one release."""
from __future__ import annotations

import asyncio
import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import decomp

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"
Q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'
ROW = {"id": "a", "question": Q, "answer": "n a s"}


def documented() -> set[str]:
    """The top-level names docs/api.md documents: its `::: decomp.NAME` lines, and the `::: decomp.a.b.NAME`
    lines whose object is `decomp.NAME` itself (documented at its home: griffe cannot follow
    `decomp.hookimpl`, a pluggy marker, from the top level)."""
    paths = re.findall(r"^::: (decomp(?:\.\w+)+)\s*$", API_PAGE.read_text(encoding="utf-8"), re.MULTILINE)
    names = {path.split(".")[1] for path in paths if path.count(".") == 1}
    for path in (path for path in paths if path.count(".") > 1):
        module, name = path.rsplit(".", 1)
        if name in decomp.__all__ and getattr(importlib.import_module(module), name, None) is getattr(decomp, name):
            names.add(name)
    return names


def test_all_is_exactly_what_the_python_page_documents():
    assert len(documented()) > 30  # the page is read, not an empty match
    exported = set(decomp.__all__)
    assert (exported - documented(), documented() - exported) == (set(), set())  # undocumented, unexported
    assert len(decomp.__all__) == len(set(decomp.__all__))


def test_a_name_documented_at_its_home_counts_only_when_it_is_the_exported_object():
    assert "hookimpl" in documented()                   # ::: decomp.handlers.plugins.hookimpl
    assert "Specs" not in documented()                  # ::: decomp.handlers.plugins.Specs: not exported
    assert "MetricComparison" not in documented()


def test_every_exported_name_resolves_and_nothing_internal_is_exported():
    for name in decomp.__all__:
        assert getattr(decomp, name) is not None, name
    for internal in ("parse_step_line", "RunSummary", "run", "arun", "run_dataset", "arun_dataset"):
        assert internal not in decomp.__all__
    with pytest.raises(AttributeError, match="no attribute 'parse_step_line'"):
        decomp.parse_step_line  # noqa: B018


def test_import_decomp_still_imports_only_its_own_file():
    code = "import sys, decomp; print(sorted(m for m in sys.modules if m.startswith('decomp.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout.replace("'", '"')) == ["decomp.handlers", "decomp.handlers.hooks", "decomp.plugins",
                                                          "decomp.runtime", "decomp.runtime.module_entry"]


@pytest.fixture
def folders(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def warned(call, name: str, replacement: str, here: bool = True):
    """What `call()` returns, checking that it warned once that `name` is deprecated, naming
    `replacement`, at the caller's line (`here`: a line of this file)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = call()
    said = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(said) == 1, [str(w.message) for w in said]
    assert str(said[0].message).startswith(f"{name} is deprecated") and replacement in str(said[0].message)
    assert not here or said[0].filename == __file__
    return value


def test_the_new_way_warns_nothing(folders):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program = decomp.load("decomp/letter_cat_symbolic")
        assert program.run(Q).answer == "n a s"
        run = program.run_dataset([ROW], progress=False)
        assert isinstance(run, decomp.Run) and run.summary["score"] == 1.0
        assert run.result.run_dir == run.path and run.result.rows == 1  # the summary, reachable from the Run


def test_decomp_run_warns_and_still_runs_a_question_and_a_dataset(folders):
    program = decomp.load("decomp/letter_cat_symbolic")
    result = warned(lambda: decomp.run(program, question=Q), "decomp.run", "decomp.load(program, ...).run(question)")
    assert isinstance(result, decomp.RunResult) and result.answer == "n a s"
    run = warned(lambda: decomp.run("decomp/letter_cat_symbolic", dataset=[ROW], progress=False), "decomp.run",
                 ".run_dataset(data, ...)")
    assert isinstance(run, decomp.Run) and run.rows()[0]["answer"] == "n a s"
    with pytest.raises(TypeError, match="run_dir go with dataset"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        decomp.run(program, question=Q, run_dir=folders / "r")


def test_decomp_arun_warns_and_still_runs(folders):
    program = decomp.load("decomp/letter_cat_symbolic")

    async def both():
        one = await decomp.arun(program, question=Q)
        many = await decomp.arun(program, dataset=[ROW], progress=False)
        return one.answer, many.rows()[0]["answer"]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(both()) == ("n a s", "n a s")
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(said) == 2 and all(s.startswith("decomp.arun is deprecated") and ".arun_dataset(data" in s for s in said)


def test_decomp_run_dataset_warns_and_still_returns_its_summary(folders):
    data = folders / "rows.jsonl"
    data.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    done = warned(lambda: decomp.run_dataset("decomp/letter_cat_symbolic", data, run_dir=folders / "r1"),
                  "decomp.run_dataset", "decomp.load(program, ...).run_dataset(data, ...)")
    assert (done.rows, done.failed, done.score) == (1, 0, 1.0) and done.run_dir == folders / "r1"
    later = warned(lambda: asyncio.run(decomp.arun_dataset("decomp/letter_cat_symbolic", data,
                                                           run_dir=folders / "r2")),
                   "decomp.arun_dataset", ".arun_dataset(data, ...)", here=False)  # asyncio awaits it
    assert later.score == 1.0 and decomp.open_run(later.run_dir).rows()[0]["answer"] == "n a s"
