"""`decomp index build --force` rebuilds an index, never a folder of the user's (issue 41): a
`decomp-index.json` anyone can create, or an index folder the user put files into, is refused
before anything is removed; a real index is still rebuilt; a failed new build removes only the
index's own files (and the folder only when decomp made it and nothing else is left)."""
import json
import subprocess
import sys

import pytest

from tests.handlers.search.search_fixtures import corpus, tantivy_folder, write_corpus  # noqa: F401
from decomp.handlers.search.corpus import Record, read_corpus
from decomp.handlers.search.tantivy_index import MANIFEST, SearchIndexError, build_index, read_manifest


@pytest.mark.parametrize("manifest", ["", "{}", '{"backend": "tantivy"}', "[" * 100_000 + "]" * 100_000])
def test_a_forged_manifest_does_not_let_force_delete_the_users_files(tmp_path, corpus, manifest):
    folder = tmp_path / "mine"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "n.txt").write_text("keep me")
    (folder / "meta.json").write_text("my meta")  # a name tantivy writes too
    (folder / MANIFEST).write_text(manifest)
    with pytest.raises(SearchIndexError, match=r"holds files that are not an index's .*nothing there is deleted"):
        build_index(read_corpus(corpus), folder, force=True)
    assert (folder / "notes" / "n.txt").read_text() == "keep me" and (folder / "meta.json").read_text() == "my meta"


def test_a_users_file_in_an_index_folder_stops_force_from_the_command_line(tmp_path, tantivy_folder, corpus):
    (tantivy_folder / "data.csv").write_text("a,b\n")
    proc = subprocess.run([sys.executable, "-m", "decomp", "index", "build", str(corpus), "--out",
                           str(tantivy_folder), "--force"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "holds files that are not an index's (data.csv)" in proc.stderr
    assert (tantivy_folder / "data.csv").read_text() == "a,b\n" and read_manifest(tantivy_folder)["state"] == "ready"
    (tantivy_folder / "data.csv").unlink()
    before = read_manifest(tantivy_folder)["version"]
    assert build_index(read_corpus(corpus), tantivy_folder, force=True)["version"] != before
    assert json.loads((tantivy_folder / MANIFEST).read_text())["state"] == "ready"


def _failing_records(folder, add_mine: bool):
    """Two paragraphs, then (with `add_mine`) the user's files put into `folder` while the build
    runs, then a failure: what a bad corpus line does half-way through a build."""
    yield Record("a", "A", "first paragraph")
    yield Record("b", "B", "second paragraph")
    if add_mine:
        (folder / "notes").mkdir()
        (folder / "notes" / "n.txt").write_text("keep me")
        (folder / "data.csv").write_text("a,b\n")
    raise SearchIndexError("a bad line")


@pytest.mark.parametrize("add_mine", [True, False])
def test_a_failed_build_in_a_folder_the_user_gave_removes_only_the_index_files(tmp_path, add_mine):
    """Issue 41: a failed new build used to remove the whole folder, with what the user had put
    in it meanwhile; the folder the user gave (empty) stays, holding only what they put there."""
    folder = tmp_path / "given"
    folder.mkdir()
    with pytest.raises(SearchIndexError, match="a bad line"):
        build_index(_failing_records(folder, add_mine), folder)
    assert folder.is_dir()
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == (
        ["data.csv", "notes", "notes/n.txt"] if add_mine else [])
    if add_mine:
        assert (folder / "notes" / "n.txt").read_text() == "keep me" and (folder / "data.csv").read_text() == "a,b\n"


def test_a_failed_build_in_a_folder_decomp_made_removes_it_only_when_nothing_else_is_left(tmp_path):
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    with pytest.raises(SearchIndexError):
        build_index(_failing_records(kept, True), kept)
    assert sorted(p.name for p in kept.iterdir()) == ["data.csv", "notes"]
    with pytest.raises(SearchIndexError):
        build_index(_failing_records(gone, False), gone)
    assert not gone.exists()
