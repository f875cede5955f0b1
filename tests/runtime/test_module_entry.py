"""`python -m decomp` and the language server's checker process import nothing from the working
folder: Python's rule for `-m` (and for the `-c` a spawned worker starts with) puts that folder
first on `sys.path`, so a `pygls.py`, `pydantic.py` or `multiprocessing.py` of a folder opened in
an editor would run in place of the real module. Real processes; the stand-ins leave a marker
when they are imported."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from decomp.runtime.module_entry import _dash_m_module
from tests.editors.lsp.raw_client import RawServer

pytestmark = pytest.mark.slow

#: Modules decomp, its language server and its checker's process import, as a hostile folder holds them.
STAND_INS = ("pygls", "pydantic", "lark", "multiprocessing")
PROGRAM = 'handler f = nosuchkind()\nmain f\n'


def workspace(folder: Path) -> Path:
    """A folder whose stand-ins write `NAME.marker` when imported, and a program to open."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in STAND_INS:
        (folder / f"{name}.py").write_text(
            f"open({str(folder / (name + '.marker'))!r}, 'w').write('imported')\n", encoding="utf-8")
    (folder / "p.decomp").write_text(PROGRAM, encoding="utf-8")
    return folder


def markers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.marker"))


class _ScriptServer(RawServer):
    """`decomp lsp` started as the `decomp` console script (no `-m`)."""

    def __init__(self, cwd: Path):
        import queue
        import threading

        script = Path(sys.executable).with_name("decomp")
        self.process = subprocess.Popen([str(script), "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=cwd)
        self._incoming = queue.Queue()
        self._backlog = []
        threading.Thread(target=self._read, daemon=True).start()


def _checked_by_the_worker(server: RawServer, folder: Path) -> list[dict]:
    """Open the program, wait for the checker's diagnostics, shut the server down."""
    server.initialize(folder)
    uri = server.open(folder / "p.decomp", PROGRAM)
    found = server.diagnostics(uri, lambda d: bool(d), timeout=120)
    assert server.shutdown() == 0
    return found


def test_python_dash_m_decomp_lsp_imports_nothing_of_the_working_folder(tmp_path):
    folder = workspace(tmp_path / "opened")
    with RawServer(cwd=folder) as server:  # python -m decomp lsp, as editors/vscode once advised
        found = _checked_by_the_worker(server, folder)
    assert any("unknown handler kind 'nosuchkind'" in d["message"] for d in found), found
    assert markers(folder) == []


def test_the_checker_process_of_the_decomp_command_imports_nothing_of_the_working_folder(tmp_path):
    """The console script puts no working folder on the path; its spawned checker (`python -c`)
    would, but for `PYTHONSAFEPATH` set by the server."""
    folder = workspace(tmp_path / "opened")
    with _ScriptServer(cwd=folder) as server:
        found = _checked_by_the_worker(server, folder)
    assert any("unknown handler kind 'nosuchkind'" in d["message"] for d in found), found
    assert markers(folder) == []


def test_python_dash_m_decomp_check_imports_nothing_of_the_working_folder(tmp_path):
    folder = workspace(tmp_path / "cloned")
    done = subprocess.run([sys.executable, "-m", "decomp", "check", "p.decomp"], cwd=folder, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "unknown handler kind 'nosuchkind'" in done.stderr, done.stderr
    assert markers(folder) == []


@pytest.mark.parametrize("argv, module", [
    (["python", "-m", "decomp", "lsp"], "decomp"),
    (["python", "-P", "-mdecomp.programs.tasklama.taskgraph.splits"], "decomp.programs.tasklama.taskgraph.splits"),
    (["python", "-W", "ignore", "-X", "utf8", "-m", "decomp"], "decomp"),
    (["python", "-Bm", "decomp"], None),  # flags run together: not guessed at
    (["python", "script.py", "-m", "decomp"], None),
    (["python", "-c", "pass", "-m", "decomp"], None),
])
def test_the_module_of_dash_m_is_read_from_the_interpreter_arguments(argv, module):
    assert _dash_m_module(argv) == module
