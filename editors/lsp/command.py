"""`decomp lsp`: the language server on standard input and output, a built-in plugin (the plugin
table's `register_commands`)."""
from __future__ import annotations

import logging
import os
import sys

import click

from decomp.handlers.plugins import hookimpl
from decomp.handlers.sandbox.trust import FolderTrust, Trust
from decomp.runtime.engine.loader import PluginNotTrusted, load_plugin
from decomp.runtime.runs.command_options import folder_trust_option, trust_options


@hookimpl
def register_commands(cli):
    cli.add_command(lsp_command)


@click.command("lsp")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
              help="Import this module first, as `decomp check --plugin` does (not from a folder not trusted), "
                   "so the kinds it registers are known.")
@click.option("--check-timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, metavar="SECONDS",
              help="A document whose check takes longer is said to, and its checker process is stopped.")
@click.option("--log-file", type=click.Path(dir_okay=False), help="Write the server's log here (default: none).")
@trust_options
@folder_trust_option
def lsp_command(plugins: tuple[str, ...], check_timeout: float, log_file: str | None,
                trusted_folders: FolderTrust, trust: tuple[str, ...] = (), allow_roots: tuple[str, ...] = ()) -> None:
    """Run the language server of .decomp files on stdin/stdout (the Language Server Protocol),
    for VS Code (editors/vscode), Neovim or any LSP client.

    As you type, each document is checked as `decomp check` checks it (problems in imported and
    few-shot files show on their own files); hover, go to definition, references, completion
    and the outline answer from the document's structure. See the manual's "Editors" page.

    Opening a folder runs none of its code: a python handler's module (helpers.py) is imported
    by the checker only from folders you trust: --trust-folder, the trust list,
    $DECOMP_TRUSTED_FOLDERS, or the editor's own trust (the initialization options
    {"trustedFolders": [...]} and {"workspaceTrusted": true}, which trusts the workspace folders).
    """
    from decomp.editors.lsp.analysis import Settings
    from decomp.editors.lsp.handlers import make_server
    from decomp.editors.lsp.stdio import Utf8Repair

    if log_file:
        logging.basicConfig(filename=log_file, level=logging.INFO)
    for plugin in plugins:
        try:
            load_plugin(plugin, trusted_folders=trusted_folders)
        except PluginNotTrusted as err:  # said once, in the server's log (the editor's output)
            click.echo(f"warning: {err.message}", err=True)
    os.environ["PYTHONSAFEPATH"] = "1"  # the checker's process (spawned): no working folder on its import path
    policy = Trust.of(trust, allow_roots)  # --trust and --allow-root, for the checker's process too
    folders = tuple(str(folder) for folder in trusted_folders.folders)
    server = make_server(Settings(tuple(plugins), policy.modules, tuple(str(root) for root in policy.roots),
                                  trusted_folders=folders),
                         check_timeout)
    try:
        server.start_io(stdin=Utf8Repair(sys.stdin.buffer), stdout=sys.stdout.buffer)
    finally:
        server.close()
