"""What the editor trusts, from its `initialize` request: the folders whose Python modules the
checker may import, beside those `decomp lsp` was started with (`--trust-folder`, the trust list).

The client says so in its initialization options, in the manner of VS Code's workspace trust:

    {"trustedFolders": ["/home/me/project", "file:///home/me/other"],   # these folders
     "workspaceTrusted": true}                                           # the workspace's folders

Anything else there (another type, a relative path) trusts nothing. A client that says nothing
trusts nothing: opening a folder never runs its code.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

#: The initialization options read here.
TRUSTED_FOLDERS = "trustedFolders"
WORKSPACE_TRUSTED = "workspaceTrusted"


def editor_trusted_folders(params: types.InitializeParams) -> tuple[str, ...]:
    """The folders the client's initialization options trust: those of `trustedFolders` (paths
    or file: URIs), and the workspace folders (or the root) when `workspaceTrusted` is true."""
    options = params.initialization_options
    if not isinstance(options, dict):
        return ()
    named = options.get(TRUSTED_FOLDERS)
    found = [_folder(item) for item in (named if isinstance(named, list) else [])]
    if options.get(WORKSPACE_TRUSTED) is True:
        found += [_folder(folder.uri) for folder in params.workspace_folders or ()]
        found += [_folder(params.root_uri), _folder(params.root_path)]
    return tuple(dict.fromkeys(folder for folder in found if folder is not None))


def _folder(item: Any) -> str | None:
    """An absolute folder from a path or a file: URI; None for anything else."""
    if not isinstance(item, str) or not item or "\x00" in item:
        return None
    path = to_fs_path(item) if item.startswith("file:") else item
    if not path or not Path(path).is_absolute():
        return None
    return path
