"""The --out folder of `decomp optimize` is decomp's only by the marker it wrote there: a folder
holding the user's files is refused (with --force too) even when it has an empty `.optimize/` or
a forged marker, a folder decomp made is resumed, decomp removes only what it listed as its own
(never a file the user added or changed), and a damaged `state.json` is named, not a traceback."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.learning.optimize.folder import OWNER, FolderError, OwnedFolder

STUDENT = '''import re

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima", "Kenya": "Nairobi", "Chile": "Santiago",
            "Egypt": "Cairo", "Canada": "Ottawa", "Norway": "Oslo", "Ghana": "Accra", "Nepal": "Kathmandu"}


def teacher(request):
    country = re.findall(r"capital of (\\w+)\\?", request.prompt)[-1]
    return f' "{CAPITALS.get(country, "?")}"'


def student(request):
    solved = len(re.findall(r"^A: ", request.prompt, re.M))
    return teacher(request) if solved >= 3 else ' "I am not sure"'
'''
COUNTRIES = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima", "Kenya": "Nairobi", "Chile": "Santiago",
             "Egypt": "Cairo", "Canada": "Ottawa", "Norway": "Oslo", "Ghana": "Accra", "Nepal": "Kathmandu"}
TOKEN = "0123456789abcdef" * 2


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The capitals example of docs/optimize.md in `tmp_path` (the working folder)."""
    (tmp_path / "capital.txt").write_text('Q: What is the capital of Italy?\nA: "Rome"\n')
    (tmp_path / "capitals.decomp").write_text('handler capital = prompt(file="capital.txt", max_tokens=8)\n'
                                              "main capital\n")
    (tmp_path / "owned_student.py").write_text(STUDENT)
    names = list(COUNTRIES)
    for name, part in (("train", names[:6]), ("dev", names[6:])):
        (tmp_path / f"{name}.jsonl").write_text("".join(
            json.dumps({"id": c.lower(), "question": f"What is the capital of {c}?", "answer": COUNTRIES[c]}) + "\n"
            for c in part))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _args(out="proj", *more):
    return ["optimize", "capitals.decomp", "--train", "train.jsonl", "--dev", "dev.jsonl", "--out", out,
            "--model", "fake:owned_student:student", "--teacher", "fake:owned_student:teacher",
            "--cache-dir", "cache", "--candidates", "2", *more]


def _optimize(*more, out="proj"):
    return CliRunner().invoke(main, _args(out, *more))


def _user_folder(root, work=True):
    """A folder of the user's: data.csv, notes/, and (with `work`) an empty .optimize/."""
    (root / "proj" / "notes").mkdir(parents=True)
    (root / "proj" / "data.csv").write_text("a,b\n1,2\n")
    (root / "proj" / "notes" / "n.txt").write_text("my notes")
    if work:
        (root / "proj" / ".optimize").mkdir()
    return root / "proj"


def _intact(folder):
    assert (folder / "data.csv").read_text() == "a,b\n1,2\n" and (folder / "notes" / "n.txt").read_text() == "my notes"
    assert not (folder / "report.json").exists() and not (folder / "capitals.decomp").exists()


def test_a_users_folder_with_an_empty_work_folder_is_refused_from_a_real_process(project):
    """The case of issue 41: it used to exit 0 having deleted data.csv and notes/."""
    folder = _user_folder(project)
    for more in ([], ["--force"]):
        proc = subprocess.run([sys.executable, "-m", "decomp", *_args("proj", *more)], capture_output=True,
                              text=True, timeout=300, cwd=project)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "--out proj is a folder that holds something else than an optimised program" in proc.stderr
        assert "(.optimize, data.csv, notes; no .optimize/owner.json written by decomp)" in proc.stderr
        assert "nothing in it is deleted, not even with --force" in proc.stderr and proc.stdout == ""
        _intact(folder)


def _forged(**fields):
    """A writer of a hand-made marker: a well-formed one of the current format, with `fields`
    changed (None: left out), and a made-up signature."""
    marker = {"format": "decomp-optimize-folder/2", "token": TOKEN, "work": [], "files": {}, "replacing": {},
              "folders": [], "mac": "0" * 64, **fields}
    return lambda path: path.write_text(json.dumps({k: v for k, v in marker.items() if v is not None}))


DATA_SHA = hashlib.sha256(b"a,b\n1,2\n").hexdigest()
FORGED = {
    "an empty marker": lambda path: path.write_text(""),
    "an empty object": lambda path: path.write_text("{}"),
    "a list": lambda path: path.write_text("[1]"),
    "a folder": lambda path: path.mkdir(),
    "no token": _forged(token=None),
    "a token of the wrong form": _forged(token="x"),
    "no signature": _forged(mac=None),
    "a path out of the folder": _forged(work=["../../data.csv"]),
    "a listed file in the work folder": _forged(files={".optimize/x": "0" * 64}),
    "a replaced file out of the folder": _forged(replacing={"../data.csv": DATA_SHA}),
    "the user's file listed, signed by no one": _forged(files={"data.csv": DATA_SHA}),
    "the user's file listed, the format before signing": _forged(format="decomp-optimize-folder/1", mac=None,
                                                                replacing=None, files={"data.csv": DATA_SHA}),
    "nested 200,000 deep": lambda path: path.write_text("[" * 200_000 + "]" * 200_000),
    "a link to a marker decomp wrote": lambda path: path.symlink_to(_real_marker(path.parent.parent.parent)),
}


def _real_marker(root):
    OwnedFolder.claim(root / "elsewhere", ".optimize")
    return root / "elsewhere" / ".optimize" / OWNER


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_marker_grants_no_ownership(project, case):
    folder = _user_folder(project)
    FORGED[case](folder / ".optimize" / OWNER)
    result = _optimize("--force")
    assert result.exit_code == 1
    assert "holds something else than an optimised program" in result.stderr
    assert "Traceback" not in result.stderr
    _intact(folder)


def test_the_reviewers_forged_marker_listing_data_csv_is_refused_and_data_csv_kept(tmp_path):
    """Issue 41, third round: a well-formed hand-made marker listing the user's data.csv with its
    sha256 made claim() accept the folder and clear() (what --force runs) delete data.csv."""
    folder = _user_folder(tmp_path)
    _forged(files={"data.csv": DATA_SHA})(folder / ".optimize" / OWNER)
    with pytest.raises(FolderError, match=r"holds something else than an optimised program .*its signature does "
                                          r"not verify"):
        OwnedFolder.claim(folder, ".optimize")
    _intact(folder)


def test_a_marker_signed_with_another_users_key_is_refused(tmp_path):
    theirs = bytes(range(32))
    owned, _ = OwnedFolder.claim(tmp_path / "proj", ".optimize", key=theirs)
    (tmp_path / "proj" / "data.csv").write_text("a,b\n1,2\n")
    owned.marker["files"]["data.csv"] = DATA_SHA
    owned._save()
    with pytest.raises(FolderError, match="its signature does not verify"):
        OwnedFolder.claim(tmp_path / "proj", ".optimize")
    assert OwnedFolder.claim(tmp_path / "proj", ".optimize", key=theirs)[1]  # theirs, with their key only
    assert (tmp_path / "proj" / "data.csv").read_text() == "a,b\n1,2\n"


def test_a_marker_copied_from_a_real_run_to_another_folder_is_refused(project):
    assert _optimize().exit_code == 0
    mine = project / "mine"
    (mine / ".optimize").mkdir(parents=True)
    shutil.copy(project / "proj" / ".optimize" / OWNER, mine / ".optimize" / OWNER)
    shutil.copy(project / "proj" / "capital.txt", mine / "capital.txt")  # the same bytes as a file it lists
    result = _optimize("--force", out="mine")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "--out mine is a folder that holds something else than an optimised program" in result.stderr
    assert "its signature does not verify" in result.stderr
    assert sorted(p.name for p in mine.iterdir()) == [".optimize", "capital.txt"]
    assert (mine / "capital.txt").read_bytes() == (project / "proj" / "capital.txt").read_bytes()


def test_a_moved_folder_is_no_longer_decomps(tmp_path):
    OwnedFolder.claim(tmp_path / "out", ".w")[0].publish({"a.txt": b"1"})
    (tmp_path / "out").rename(tmp_path / "moved")
    with pytest.raises(FolderError, match="its signature does not verify"):
        OwnedFolder.claim(tmp_path / "moved", ".w")
    assert (tmp_path / "moved" / "a.txt").read_bytes() == b"1"


def test_a_folder_decomp_made_is_resumed_and_what_the_user_added_is_kept(project):
    first = _optimize()
    assert first.exit_code == 0, first.output
    marker = json.loads((project / "proj" / ".optimize" / OWNER).read_text())
    assert sorted(marker["files"]) == ["capital.txt", "capitals.decomp", "optimized/capital.txt", "report.json"]
    assert marker["folders"] == ["optimized"] and "teacher-1" in marker["work"]
    (project / "proj" / "mine.txt").write_text("keep me")
    (project / "proj" / "optimized" / "mine.txt").write_text("keep me too")
    again = _optimize()
    assert again.exit_code == 0 and "resuming the optimisation in proj" in again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["chosen"] == json.loads(first.stdout.splitlines()[-1])["chosen"]
    forced = _optimize("--force", "--seed", "3")
    assert forced.exit_code == 0 and "resuming" not in forced.stderr, forced.output
    assert json.loads((project / "proj" / "report.json").read_text())["seed"] == 3
    assert (project / "proj" / "mine.txt").read_text() == "keep me"
    assert (project / "proj" / "optimized" / "mine.txt").read_text() == "keep me too"


def test_a_file_decomp_wrote_and_the_user_changed_is_never_replaced(project):
    assert _optimize().exit_code == 0
    edited = project / "proj" / "capital.txt"
    edited.write_text(edited.read_text() + "# my edit\n")
    result = _optimize("--force", "--seed", "4")
    assert result.exit_code == 1
    assert "--out proj holds capital.txt, not written by decomp optimize (or changed since)" in result.stderr
    assert edited.read_text().endswith("# my edit\n") and (project / "proj" / "report.json").is_file()
    assert "projected at most" not in result.stderr  # refused before any model call


DAMAGED = {
    "[1]": ("[1]", "a list, not an object"),
    "null": ("null", "null, not an object"),
    "not JSON": ('{"program": 1', "Expecting ',' delimiter"),
    "nested 200,000 deep": ("[" * 200_000 + "]" * 200_000, "nested too deeply to read"),
    "an object nested 40 deep": ('{"a": ' * 40 + "1" + "}" * 40, "nested more than 32 levels deep"),
    "not UTF-8": (b"\xff\xfe{}", "can't decode byte"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_state_file_is_named_and_nothing_is_touched(project, case):
    assert _optimize().exit_code == 0
    (project / "proj" / "mine.txt").write_text("keep me")
    state = project / "proj" / ".optimize" / "state.json"
    text, words = DAMAGED[case]
    state.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = sorted(p.relative_to(project).as_posix() for p in (project / "proj").rglob("*"))
    result = _optimize()
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {os.path.join('proj', '.optimize', 'state.json')} is damaged (") and words in line, line
    assert line.endswith("): give another --out, or --force to start over")
    assert sorted(p.relative_to(project).as_posix() for p in (project / "proj").rglob("*")) == before
    assert _optimize("--force").exit_code == 0 and (project / "proj" / "mine.txt").read_text() == "keep me"


def test_a_state_file_that_is_a_folder_is_named(project):
    assert _optimize().exit_code == 0
    state = project / "proj" / ".optimize" / "state.json"
    state.unlink()
    state.mkdir()
    result = _optimize()
    assert result.exit_code == 1 and "state.json is damaged (not a plain file)" in result.stderr


# ---- OwnedFolder itself
def test_publish_replaces_only_what_it_wrote_and_removes_only_empty_folders_it_made(tmp_path):
    owned, before = OwnedFolder.claim(tmp_path / "out", ".w")
    assert not before and (tmp_path / "out" / ".w" / OWNER).is_file()
    owned.publish({"a.txt": b"1", "sub/b.txt": b"2", "gone/c.txt": b"3"})
    (tmp_path / "out" / "sub" / "user.txt").write_text("mine")
    again, before = OwnedFolder.claim(tmp_path / "out", ".w")
    assert before and again.marker["token"] == owned.marker["token"]
    again.publish({"a.txt": b"one"})
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"one"
    assert not (tmp_path / "out" / "gone").exists() and not (tmp_path / "out" / "sub" / "b.txt").exists()
    assert (tmp_path / "out" / "sub" / "user.txt").read_text() == "mine"  # its folder stays, holding it
    assert again.marker["files"].keys() == {"a.txt"} and again.marker["folders"] == ["sub"]


def test_publish_never_writes_through_a_link_or_over_a_users_file(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    owned, _ = OwnedFolder.claim(tmp_path / "out", ".w")
    (tmp_path / "out" / "sub").symlink_to(elsewhere)
    (tmp_path / "out" / "mine.txt").write_text("mine")
    with pytest.raises(FolderError, match=r"holds mine.txt, sub/x.txt, not written by decomp optimize"):
        owned.publish({"sub/x.txt": b"x", "mine.txt": b"theirs", "new.txt": b"n"})
    assert list(elsewhere.iterdir()) == [] and (tmp_path / "out" / "mine.txt").read_text() == "mine"
    assert not (tmp_path / "out" / "new.txt").exists()


def test_clear_removes_the_listed_work_entries_and_nothing_else(tmp_path):
    owned, _ = OwnedFolder.claim(tmp_path / "out", ".w")
    owned.add_work(["runs", "state.json"])
    (tmp_path / "out" / ".w" / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "out" / ".w" / "state.json").write_text("{}")
    (tmp_path / "out" / ".w" / "other").write_text("not listed")
    owned.publish({"a.txt": b"1"})
    (tmp_path / "out" / "mine.txt").write_text("mine")
    owned.clear()
    assert sorted(p.name for p in (tmp_path / "out" / ".w").iterdir()) == ["other", OWNER]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".w", "mine.txt"]


def test_an_interrupted_publish_leaves_files_decomp_still_owns(tmp_path):
    """Issue 41: the marker was saved with the new sha256 before the files were written, so after
    an interruption the old files matched neither and even --force refused the folder. Here the
    publish's own steps run up to the interruption: the marker saved, one file of two written."""
    owned, _ = OwnedFolder.claim(tmp_path / "out", ".w")
    owned.publish({"a.txt": b"1", "sub/b.txt": b"2"})
    assert owned.marker["replacing"] == {}
    owned.check_free(["a.txt", "sub/b.txt"])
    owned._replacing({"a.txt": b"one", "sub/b.txt": b"two"})
    owned._write({"a.txt": b"one"})  # interrupted here: sub/b.txt still holds the old content
    marker = json.loads((tmp_path / "out" / ".w" / OWNER).read_text())
    assert marker["replacing"] == {name: hashlib.sha256(d).hexdigest() for name, d in (("a.txt", b"1"),
                                                                                        ("sub/b.txt", b"2"))}
    again, before = OwnedFolder.claim(tmp_path / "out", ".w")
    assert before
    again.check_free(["a.txt", "sub/b.txt", "report.json"])  # both contents are decomp's: no refusal
    again.publish({"a.txt": b"uno", "sub/b.txt": b"dos"})
    assert (tmp_path / "out" / "sub" / "b.txt").read_bytes() == b"dos" and again.marker["replacing"] == {}


def test_force_clears_a_folder_left_by_an_interrupted_publish(tmp_path):
    owned, _ = OwnedFolder.claim(tmp_path / "out", ".w")
    owned.publish({"a.txt": b"1", "sub/b.txt": b"2", "c.txt": b"3"})
    (tmp_path / "out" / "mine.txt").write_text("mine")
    owned._replacing({"a.txt": b"one", "sub/b.txt": b"two"})  # c.txt dropped; interrupted before any write
    again, _ = OwnedFolder.claim(tmp_path / "out", ".w")
    again.clear()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".w", "mine.txt"]
    assert again.marker["files"] == {} and again.marker["replacing"] == {}
