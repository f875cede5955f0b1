"""Opening decomp's SQLite files one way (decomp.runtime.sqlite_store.connect)."""
import subprocess
import sys

import pytest

from decomp.runtime.sqlite_store import connect

pytestmark = pytest.mark.slow

OPEN = """
import sys
from decomp.runtime.sqlite_store import connect
db = connect(sys.argv[1], schema="CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT)", isolation_level=None)
db.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (sys.argv[2], "v"))
db.close()
"""


def test_connect_makes_the_folder_uses_wal_and_runs_the_schema(tmp_path):
    db = connect(tmp_path / "a" / "b.sqlite", schema="CREATE TABLE IF NOT EXISTS t (x)")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    db.close()


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path):
    path = tmp_path / "shared.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(path), str(i)], stderr=subprocess.PIPE, text=True)
             for i in range(6)]
    errors = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _ in errors), errors
    db = connect(path)
    assert db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 6
