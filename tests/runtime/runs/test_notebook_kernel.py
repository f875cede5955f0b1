"""The notebook API in a real Jupyter kernel: a small notebook run by nbclient on ipykernel."""
import json
import os
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

Q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'

CELLS = [
    "import decomp\nprogram = decomp.load('decomp/letter_cat_symbolic')\nQ = " + repr(Q),
    "print(decomp.run(program, question=Q).answer)",
    "print((await decomp.arun(program, question=Q)).answer)",
    "run = decomp.run(program, dataset=[{'id': 'q1', 'question': Q, 'answer': 'n a s'}])\n"
    "print(run.summary['rows'], run.summary['score'])",
    "df = decomp.open_run(run.path).to_pandas()\nprint(list(df['id']), list(df['answer']))",
]


def _kernel_env(tmp_path, monkeypatch):
    """The kernel sees this tree's `decomp` (PYTHONPATH) and a kernelspec for this venv's python."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    prefix = tmp_path / "jupyter"
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix)],
                   check=True, capture_output=True)
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))


def _outputs(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_a_notebook_runs_sync_async_and_pandas_cells(tmp_path, monkeypatch):
    _kernel_env(tmp_path, monkeypatch)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=60,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    out = [_outputs(c) for c in notebook.cells]
    assert out[1] == "n a s\n" and out[2] == "n a s\n"
    assert out[3] == "1 1.0\n"
    assert out[4] == "['q1'] ['n a s']\n"
    assert (tmp_path / "runs").is_dir(), json.dumps(out)
