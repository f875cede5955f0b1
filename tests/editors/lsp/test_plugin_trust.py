"""`decomp lsp --plugin NAME` imports no plugin file of a folder the user has not trusted, in the
server nor in its checker's process: one warning on the server's standard error says so.
A real server over stdio; the plugin leaves a marker when imported."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.editors.lsp.lsp_helpers import SERVER
from tests.editors.lsp.raw_client import RawServer

pytestmark = pytest.mark.slow

PLUGIN = "open(__file__ + '.marker', 'w').write('imported')\n"
PROGRAM = 'handler f = nosuchkind()\nmain f\n'


def test_a_plugin_of_the_untrusted_working_folder_is_not_imported_by_the_server_nor_its_checker(tmp_path):
    folder = tmp_path / "opened"
    folder.mkdir()
    (folder / "lsp_plug_untrusted.py").write_text(PLUGIN, encoding="utf-8")
    (folder / "p.decomp").write_text(PROGRAM, encoding="utf-8")
    with RawServer("--plugin", "lsp_plug_untrusted", cwd=folder) as server:
        server.initialize(folder)
        uri = server.open(folder / "p.decomp", PROGRAM)
        found = server.diagnostics(uri, lambda d: bool(d), timeout=120)
        assert server.shutdown() == 0
    assert any("unknown handler kind 'nosuchkind'" in d["message"] for d in found), found
    assert list(folder.glob("*.marker")) == []


def test_the_server_says_once_why_the_plugin_was_not_imported(tmp_path):
    folder = tmp_path / "opened"
    folder.mkdir()
    (folder / "lsp_plug_untrusted.py").write_text(PLUGIN, encoding="utf-8")
    done = subprocess.run([*SERVER, "--plugin", "lsp_plug_untrusted"], cwd=folder, input=b"", capture_output=True,
                          timeout=120)
    said = done.stderr.decode()
    assert said.count("--plugin lsp_plug_untrusted: not imported: the folder") == 1, said
    assert f"--trust-folder {folder.resolve()}" in said
    assert list(folder.glob("*.marker")) == []
