"""`decomp index build --force` rebuilds an index, never a folder of the user's (issue 41): a
`decomp-index.json` anyone can create, or an index folder the user put files into, is refused
before anything is removed; a real index is still rebuilt."""
import json
import subprocess
import sys

import pytest

from search_fixtures import corpus, tantivy_folder, write_corpus  # noqa: F401
from decomp.handlers.search.corpus import read_corpus
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
