"""The owner key that signs `decomp optimize`'s folder markers: made once per user in the state
folder (mode 0600, never over a key already there), the same key read after, and a key that is
a link, a folder, open to others, another user's or damaged refused in words, never printed."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.learning.optimize.folder import FolderError, OwnedFolder
from decomp.learning.optimize.owner_key import (KEY_FILE, STATE_ENV, OwnerKeyError, _key_file_problem,
                                               default_state_dir, owner_key)


def test_the_key_is_made_once_private_and_read_back(tmp_path):
    key = owner_key(tmp_path / "state")
    path = tmp_path / "state" / KEY_FILE
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert owner_key(tmp_path / "state") == key and sorted(p.name for p in path.parent.iterdir()) == [KEY_FILE]


def test_the_state_folder_comes_from_the_environment(tmp_path, monkeypatch):
    assert default_state_dir() == Path(os.environ[STATE_ENV])  # conftest's, one per test
    monkeypatch.delenv(STATE_ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg" / "decomp"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_state_dir() == tmp_path / "home" / ".local" / "state" / "decomp"


def _open_to_others(path):
    path.write_text("ab" * 32 + "\n")
    path.chmod(0o644)


def _a_link(path):
    (path.parent / "real.key").write_text("ab" * 32 + "\n")
    (path.parent / "real.key").chmod(0o600)
    path.symlink_to(path.parent / "real.key")


def _damaged(path):
    path.write_text("not a key")
    path.chmod(0o600)


BAD = {
    "open to others": (_open_to_others, r"can be read or written by others \(mode 0644; chmod 600 it\)"),
    "a link": (_a_link, "is a link, not a plain file"),
    "a folder": (lambda path: path.mkdir(), "is not a plain file"),
    "damaged": (_damaged, "does not hold 64 hexadecimal digits"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_key_that_may_not_be_used_is_refused_in_words(tmp_path, monkeypatch, case):
    make, words = BAD[case]
    (tmp_path / "state").mkdir()
    make(tmp_path / "state" / KEY_FILE)
    with pytest.raises(OwnerKeyError, match=f"the owner key {tmp_path / 'state' / KEY_FILE} {words}: decomp signs"):
        owner_key(tmp_path / "state")
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    with pytest.raises(FolderError, match=words):  # and no folder is claimed with it
        OwnedFolder.claim(tmp_path / "out", ".w")
    assert not (tmp_path / "out").exists()


def test_a_key_of_another_user_is_refused():
    info = os.stat_result((stat.S_IFREG | 0o600, 0, 0, 1, os.getuid() + 1, 0, 65, 0, 0, 0))
    assert _key_file_problem(info) == f"belongs to another user (uid {os.getuid() + 1})"
    assert _key_file_problem(os.stat_result((stat.S_IFREG | 0o600, 0, 0, 1, os.getuid(), 0, 65, 0, 0, 0))) == ""


def test_optimize_names_a_key_open_to_others_and_never_prints_it(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    _open_to_others(tmp_path / "state" / KEY_FILE)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.txt").write_text('Q: x\nA: "y"\n')
    (tmp_path / "p.decomp").write_text('handler f = prompt(file="p.txt")\nmain f\n')
    for name in ("train", "dev"):
        (tmp_path / f"{name}.jsonl").write_text('{"id": "a", "question": "q", "answer": "a"}\n')
    result = CliRunner().invoke(main, ["optimize", "p.decomp", "--train", "train.jsonl", "--dev", "dev.jsonl",
                                       "--out", "out", "--model", "fake:x:y"])
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.output
    assert f"the owner key {tmp_path / 'state' / KEY_FILE} can be read or written by others" in result.stderr
    assert "ab" * 32 not in result.output and not (tmp_path / "out").exists()
