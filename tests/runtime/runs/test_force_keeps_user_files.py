"""`--force` replaces a run, never a folder of the user's (issue 41): a folder holding a
`run.json` (which anyone can write) and the user's files is refused by `decomp run --force` and
`decomp merge --force` before anything is removed; a real run is still started over."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.rundir import RunDir
@pytest.fixture
def files(tmp_path):
    (tmp_path / "p.decomp").write_text('handler ask = prompt(text="Q: a?\\nA: 1\\n")\nmain ask\n')
    (tmp_path / "answers.json").write_text(json.dumps({"mapping": {"What is 2+2?": " 4", "What is 3+3?": " 6"}}))
    (tmp_path / "rows.jsonl").write_text('{"id": "a", "question": "What is 2+2?"}\n'
                                         '{"id": "b", "question": "What is 3+3?"}\n')
    return tmp_path


def _decomp(folder, *args):
    return subprocess.run([sys.executable, "-m", "decomp", *args], capture_output=True, text=True, timeout=120,
                          cwd=folder)


def _users(folder):
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "n.txt").write_text("my notes")
    (folder / "data.csv").write_text("a,b\n")
    (folder / "run.json").write_text("")  # a name anyone can create: no proof the rest is decomp's
    return folder


def _intact(folder):
    assert (folder / "data.csv").read_text() == "a,b\n" and (folder / "notes" / "n.txt").read_text() == "my notes"
    assert (folder / "run.json").read_text() == ""


def test_decomp_run_force_refuses_a_folder_with_the_users_files(files):
    folder = _users(files / "proj")
    proc = _decomp(files, "run", "p.decomp", "--input", "rows.jsonl", "--model", "fake:answers.json",
                   "--run-dir", "proj", "--force")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "proj holds files no run writes (data.csv, notes): nothing there is deleted, not even with --force" \
        in proc.stderr
    _intact(folder)


def test_decomp_merge_force_refuses_a_folder_with_the_users_files(files):
    for shard in ("0/2", "1/2"):
        done = _decomp(files, "run", "p.decomp", "--input", "rows.jsonl", "--model", "fake:answers.json",
                       "--shard", shard, "--run-dir", f"s{shard[0]}")
        assert done.returncode == 0, done.stderr
    folder = _users(files / "proj")
    proc = _decomp(files, "merge", "s0", "s1", "--out", "proj", "--force")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "proj holds files no run writes (data.csv, notes)" in proc.stderr
    _intact(folder)
    assert [p.name for p in files.iterdir() if ".merging-" in p.name] == []  # its staging folder is gone
    assert _decomp(files, "merge", "s0", "s1", "--out", "merged").returncode == 0
    assert _decomp(files, "merge", "s0", "s1", "--out", "merged", "--force").returncode == 0  # a run: replaced


def test_a_real_run_is_still_started_over(files):
    run = files / "run"
    assert _decomp(files, "run", "p.decomp", "--input", "rows.jsonl", "--model", "fake:answers.json",
                   "--run-dir", "run").returncode == 0
    manifest = json.loads((run / "run.json").read_text())
    RunDir.create(run, manifest, force=True).close()
    assert not (run / "results.jsonl").exists() or (run / "results.jsonl").read_text() == ""
    (run / "mine.txt").write_text("mine")
    with pytest.raises(RunDirError, match=r"holds files no run writes \(mine.txt\)"):
        RunDir.create(run, manifest, force=True)
    assert (run / "mine.txt").read_text() == "mine" and (run / "run.json").is_file()
