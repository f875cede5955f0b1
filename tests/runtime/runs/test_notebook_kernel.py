"""The notebook API in a real Jupyter kernel: nbclient runs a notebook on ipykernel, whose cells
run inside the kernel's event loop, as a user's would: `program.run` and `program.run_dataset`
(synchronous, no `await`), `await program.arun(...)` at the top level of a cell, and
`decomp.open_run(...).to_pandas()`."""
from __future__ import annotations

import os
from pathlib import Path

import ipykernel  # noqa: F401  (the test extra installs it: the kernel this test starts)
import nbclient
import nbformat

from tests.runtime.runs.run_helpers import kernel_spec

QUESTION = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'

CELLS = [
    "import asyncio, decomp\n"
    "asyncio.get_running_loop()  # the kernel's loop is running: what broke Session.run before\n"
    "program = decomp.load('decomp/letter_cat_symbolic')",
    f"print(program.run({QUESTION!r}).answer)",
    f"result = await program.arun({QUESTION!r})\nprint(result.answer, result.error)",
    f"run = program.run_dataset([{{'id': 'q1', 'question': {QUESTION!r}, 'answer': 'n a s'}},\n"
    "                           {'id': 'q2', 'question': 'no letters here', 'answer': 'x'}],\n"
    "                          run_dir=RUN_DIR)\n"
    "print(run.summary['rows'])",
    "frame = decomp.open_run(RUN_DIR).to_pandas()\n"
    "print(type(frame).__name__, list(frame['id']), frame.loc[0, 'answer'])",
    "print([child.handler for child in decomp.open_run(RUN_DIR).trace('q1').children][:1])",
]


def test_a_notebook_runs_decomp_in_a_real_kernel(tmp_path, monkeypatch):
    import decomp

    monkeypatch.setenv("JUPYTER_PATH", str(kernel_spec(tmp_path / "jupyter")))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(decomp.__file__).parent.parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(f"RUN_DIR = {str(tmp_path / 'run')!r}")]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in CELLS]
    client = nbclient.NotebookClient(notebook, kernel_name="decomp-test", timeout=120,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()

    def printed(cell, names=("stdout", "stderr")) -> str:
        return "".join(out.get("text", "") for out in cell.outputs
                       if out.output_type == "stream" and out.get("name") in names)

    errors = [out for cell in notebook.cells for out in cell.outputs if out.output_type == "error"]
    assert not errors, errors
    assert not any("never awaited" in printed(cell) for cell in notebook.cells)
    texts = [printed(cell, ("stdout",)).strip() for cell in notebook.cells[1:]]  # stderr: the dataset's progress bar
    assert texts[1] == "n a s"
    assert texts[2] == "n a s None"
    assert texts[3] == "2"
    assert texts[4] == "DataFrame ['q1', 'q2'] n a s"
    assert texts[5].startswith("[") and texts[5] != "[]"
