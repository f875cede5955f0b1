"""The notebook API's progress bar (runtime/runs/bars.py): drawn by default in a Jupyter kernel
(tqdm's when installed, else a line of text on stderr), on demand elsewhere, never with
progress=False; each call's own choice."""
from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

import decomp
from decomp.runtime.engine.budgets import Usage
from decomp.runtime.runs.bars import TextBar, run_bar, text_rows, tqdm_rows, wanted

from tests.runtime.runs.run_helpers import kernel_spec

Q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'
ROWS = [{"id": "a", "question": Q}, {"id": "b", "question": "no words"}]


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def program():
    return decomp.load("decomp/letter_cat_symbolic")


def test_progress_true_draws_tqdm_with_the_runs_figures(program, capsys):
    program.run_dataset(ROWS, progress=True)
    err = capsys.readouterr().err
    assert "rows: 100%" in err and "2/2" in err
    assert "failed 1 · calls 0 · tokens 0 · cache hits 0" in err


def test_progress_false_and_the_default_outside_a_kernel_draw_nothing(program, capsys):
    program.run_dataset(ROWS, progress=False)
    program.run_dataset(ROWS, force=True, run_dir="r")  # stderr is no terminal here, and no kernel
    assert capsys.readouterr().err == ""
    assert wanted(None) is False and run_bar(None) is False and run_bar(False) is False


def test_without_tqdm_the_command_lines_bar_is_drawn(program, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if tqdm were not installed
    assert run_bar(True) is True
    program.run_dataset(ROWS, progress=True)
    err = capsys.readouterr().err
    assert err.startswith("rows") and "failed 1 · calls 0" in err and "%|" not in err  # rich's, not tqdm's


def test_the_text_bar_redraws_in_place_and_ends_its_line():
    stream = io.StringIO()
    bar = TextBar(3, "rows scored", stream, every=3600)
    bar.advance(1, "")
    bar.advance(1, "")  # within `every`: not drawn
    bar.advance(1, "failed 0")  # the last: drawn
    bar.close()
    assert stream.getvalue() == "\rrows scored 1/3 ETA 0:00:00\rrows scored 3/3 failed 0 ETA 0:00:00\n"


@pytest.mark.parametrize("bar", [text_rows, tqdm_rows])
def test_a_row_bar_counts_failed_rows_and_listens_to_the_usage(bar, capsys):
    usage = Usage()
    with bar(2, usage) as tick:
        assert usage.listener == tick.refresh  # each call's end redraws the figures
        tick({"index": 0, "answer": "x"})
        tick({"index": 1, "error": "boom"})
        assert tick.line().startswith("failed 1 · calls 0")
    assert usage.listener is None
    assert "2/2" in capsys.readouterr().err


CELLS = [
    "import decomp, sys\n"
    "program = decomp.load('decomp/letter_cat_symbolic')\n"
    f"rows = [{{'id': 'a', 'question': {Q!r}}}]",
    "run = program.run_dataset(rows, run_dir='r1')",
    "run = program.run_dataset(rows, run_dir='r2', progress=False)",
    "sys.modules['tqdm'] = None  # as if tqdm were not installed\n"
    "run = program.run_dataset(rows, run_dir='r3')",
]


@pytest.mark.slow
def test_a_notebook_shows_a_bar_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_spec(tmp_path / "jupyter")))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(decomp.__file__).parent.parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    client = nbclient.NotebookClient(notebook, kernel_name="decomp-test", timeout=120,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [out for cell in notebook.cells for out in cell.outputs if out.output_type == "error"]
    assert not errors, errors

    def stderr(cell) -> str:
        return "".join(out.get("text", "") for out in cell.outputs if out.get("name") == "stderr")

    shown = [stderr(cell) for cell in notebook.cells]
    assert "rows: 100%" in shown[1] and "1/1" in shown[1] and "failed 0 · calls 0" in shown[1]  # tqdm's
    assert shown[2] == ""
    assert "\rrows 1/1 failed 0 · calls 0" in shown[3] and "%|" not in shown[3]  # the text line
