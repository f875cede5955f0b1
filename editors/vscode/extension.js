// The decomp extension. Highlighting is declarative (package.json, syntaxes/); this file starts
// the language server, `decomp lsp` by default (the setting decomp.server.command), over stdio.
// It tells the server whether VS Code trusts the workspace: only then does the server's checker
// import the Python helpers (helpers.py) of the workspace's programs; it restarts the server
// when you grant trust.
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

const SETTING = 'decomp.server.command';
let client;

// What the server may trust: the workspace's folders, only when VS Code trusts the workspace.
function initializationOptions() {
  const trusted = vscode.workspace.isTrusted === true;
  const folders = trusted ? (vscode.workspace.workspaceFolders || []).map((folder) => folder.uri.fsPath) : [];
  return { workspaceTrusted: trusted, trustedFolders: folders };
}

async function start() {
  const [command, ...args] = vscode.workspace.getConfiguration().get(SETTING) || [];
  if (!command) {
    vscode.window.showErrorMessage(`decomp: the setting ${SETTING} is empty; the language server is not started.`);
    return;
  }
  client = new LanguageClient(
    'decomp',
    'decomp language server',
    { command, args, transport: TransportKind.stdio },
    {
      documentSelector: ['decomp', 'decomp-fewshot'].flatMap((language) => [
        { scheme: 'file', language },
        { scheme: 'untitled', language },
      ]),
      initializationOptions: initializationOptions(),
    },
  );
  try {
    await client.start();
  } catch (err) {
    vscode.window.showErrorMessage(
      `decomp: cannot start the language server (${[command, ...args].join(' ')}): ${(err && err.message) || err}. ` +
      `Install it with "pip install decomp-lang", or set ${SETTING}.`);
  }
}

async function stop() {
  const running = client;
  client = undefined;
  if (running) {
    try {
      await running.dispose();
    } catch {
      // a client that never started has nothing to stop
    }
  }
}

async function activate(context) {
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (event) => {
    if (event.affectsConfiguration(SETTING)) {
      await stop();
      await start();
    }
  }));
  context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(async () => {
    await stop();
    await start();   // now trusted: the checker may import the workspace's helpers
  }));
  context.subscriptions.push(vscode.workspace.onDidChangeWorkspaceFolders(async () => {
    if (vscode.workspace.isTrusted === true) {
      await stop();
      await start();   // the new folders are trusted with the workspace
    }
  }));
  await start();
}

function deactivate() {
  return stop();
}

module.exports = { activate, deactivate };
