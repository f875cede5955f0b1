"""`decomp lsp` runs none of an untrusted folder's code: opening a `.decomp` file whose folder
holds the `helpers.py` its handler names imports nothing (a warning at the handler says so),
unless the folder is trusted: by the editor's initialization options (`workspaceTrusted`,
`trustedFolders`) or by `--trust-folder`. A real server over stdio, a real client."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.editors.lsp.lsp_helpers import SERVER, diagnostics, open_doc, span

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

#: The user's own trust list and environment stay out of these servers.
ISOLATED = ["env", "-u", "DECOMP_TRUSTED_FOLDERS", f"XDG_CONFIG_HOME={Path(__file__).parent / 'no-such-config'}"]
#: One folder for `--trust-folder`, made before the server's command is written (removed by its test).
FLAGGED = Path(tempfile.mkdtemp(prefix="decomp-lsp-trusted-"))
HELPERS = '''\
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("helpers.py ran", encoding="utf-8")


def f(query):
    return query
'''
PROGRAM = '''\
handler words = regex(pattern="(\\\\w+)", all=true)
handler f = python(function="helpers:f")
program p(question) {
  QS: [words] #question
  QS: [f] #1
}
main p
'''
NOTICE = "was not imported, so it is not checked"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=ISOLATED + SERVER))
async def client(lsp_client: LanguageClient):
    yield  # each test initializes the session with the options it is about
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=ISOLATED + SERVER + ["--trust-folder", str(FLAGGED)]))
async def flagged_client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def cloned(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (folder / "p.decomp").write_text(PROGRAM, encoding="utf-8")
    (folder / "imported.marker").unlink(missing_ok=True)
    return folder / "p.decomp"


async def initialize(client, options=None, workspace: Path | None = None) -> None:
    folders = [types.WorkspaceFolder(uri=from_fs_path(str(workspace)), name="w")] if workspace else None
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), initialization_options=options, workspace_folders=folders))


async def test_opening_an_untrusted_folder_imports_nothing_and_warns_once_at_the_handler(client, tmp_path):
    await initialize(client, workspace=tmp_path)  # a workspace the editor does not say it trusts
    path = cloned(tmp_path / "repo")
    found = await diagnostics(client, open_doc(client, path), lambda d: len(d) > 0)
    assert [d.message for d in found if NOTICE in d.message] == [found[0].message] and len(found) == 1
    assert found[0].severity == types.DiagnosticSeverity.Warning
    assert span(found[0])[:2] == (1, 0) and "--trust-folder" in found[0].message  # on `handler f = python(...)`
    assert not (tmp_path / "repo" / "imported.marker").exists()


async def test_a_trusted_workspace_is_checked_with_its_helpers(client, tmp_path):
    await initialize(client, {"workspaceTrusted": True}, workspace=tmp_path)
    path = cloned(tmp_path / "repo")
    found = await diagnostics(client, open_doc(client, path))
    assert found == []
    assert (tmp_path / "repo" / "imported.marker").read_text(encoding="utf-8") == "helpers.py ran"


async def test_trusted_folders_of_the_initialization_options(client, tmp_path):
    await initialize(client, {"trustedFolders": [from_fs_path(str(tmp_path / "mine")), "relative", 3],
                              "workspaceTrusted": "yes"}, workspace=tmp_path)
    mine, other = cloned(tmp_path / "mine"), cloned(tmp_path / "other")
    assert await diagnostics(client, open_doc(client, mine)) == []
    assert (tmp_path / "mine" / "imported.marker").exists()
    found = await diagnostics(client, open_doc(client, other), lambda d: len(d) > 0)
    assert len(found) == 1 and NOTICE in found[0].message  # "yes" is not true: the workspace is not trusted
    assert not (tmp_path / "other" / "imported.marker").exists()


async def test_trust_folder_on_the_command_line(flagged_client):
    await initialize(flagged_client)
    try:
        path = cloned(FLAGGED / "repo")
        assert await diagnostics(flagged_client, open_doc(flagged_client, path)) == []
        assert (FLAGGED / "repo" / "imported.marker").exists()
    finally:
        shutil.rmtree(FLAGGED, ignore_errors=True)
