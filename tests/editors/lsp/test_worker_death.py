"""`decomp lsp` killed by SIGKILL leaves no process behind: its checker (about 120 MB each; seven
once piled up) and the resource tracker multiprocessing starts end within seconds. A real
server, its worker started by a check, then `kill -9` of the server alone."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from decomp.editors.lsp.analysis import die_with
from tests.editors.lsp.raw_client import RawServer

pytestmark = pytest.mark.slow


def _children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_checker_dies_with_a_server_killed_by_sigkill(tmp_path):
    with RawServer(cwd=tmp_path) as server:
        server.initialize(tmp_path)
        doc = server.open(tmp_path / "p.decomp", 'handler h = regex(pattern="(x")\nmain h\n')
        assert "invalid pattern" in server.diagnostics(doc, lambda d: len(d) == 1)[0]["message"]
        children = _children(server.process.pid)
        assert children, "the check ran in a worker process"
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(pid) for pid in children):
            time.sleep(0.1)
        assert not [pid for pid in children if _alive(pid)]


def test_a_worker_whose_parent_is_already_gone_ends_at_once():
    child = os.fork()
    if child == 0:  # a parent id that is not this process's parent: as if the server died first
        die_with(os.getppid() + 1_000_000)
        os._exit(0)  # not reached
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 1
