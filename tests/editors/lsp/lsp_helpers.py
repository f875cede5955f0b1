"""Shared by the `decomp lsp` tests: a program folder with mistakes in it, and waiting for the
diagnostics a real client receives."""
from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

SERVER = [sys.executable, "-m", "decomp", "lsp"]

MAIN = '''\
# a program with two mistakes
import "helpers.decomp"
handler split = regex(pattern="(\\\\w)", all=true)
handler qa    = prompt(file="qa.txt", max_tokens=8)
handler plan  = decomposer(file="plan.txt", max_steps=4)

program letters(question, sep) {
  QS: [split] #question
  QS: (foreach) [upper] #1
  QS: [nope] #2
  QS: [qa] #4 and #sep
  QS: [EOQ] #2
}

main letters
'''

HELPERS = '''\
handler upper = regex(pattern="(\\w+)")
handler broken = regex(pattern="(unclosed")
'''

QA = '''\
Q: What is the capital of France?
A: Paris
'''

PLAN = '''\
QC: Reverse the letters of "ab".
QS: [split] "ab"
A: ["a", "b"]
QS: (frobnicate) [qa] #1
A: ["b", "a"]
QS: [EOQ]
'''


def write_program(folder: Path) -> dict[str, Path]:
    """The program folder: main.decomp (an unknown handler, a reference to a step not run yet),
    helpers.decomp (a regex that does not compile), qa.txt, plan.txt (an unknown operator)."""
    files = {"main": folder / "main.decomp", "helpers": folder / "helpers.decomp",
             "qa": folder / "qa.txt", "plan": folder / "plan.txt"}
    for name, text in (("main", MAIN), ("helpers", HELPERS), ("qa", QA), ("plan", PLAN)):
        files[name].write_text(text, encoding="utf-8")
    return files


def uri(path: Path) -> str:
    return from_fs_path(str(path.resolve()))


async def wait_for(check, timeout: float = 60.0, what: str = "the condition"):
    """Poll `check()` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def diagnostics(client, path_or_uri, predicate=lambda d: True, timeout: float = 60.0):
    """The diagnostics the client holds for a file, once `predicate(them)` holds."""
    target = path_or_uri if isinstance(path_or_uri, str) else uri(path_or_uri)

    def ready():
        held = client.diagnostics.get(target)
        return [list(held)] if held is not None and predicate(held) else None
    try:
        return (await wait_for(ready, timeout, f"diagnostics of {target}"))[0]
    except AssertionError:
        raise AssertionError(f"diagnostics of {target}: {client.diagnostics.get(target)!r}") from None


def open_doc(client, path: Path, text: str | None = None, language: str = "decomp", version: int = 1,
             doc_uri: str | None = None) -> str:
    doc_uri = doc_uri or uri(path)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=doc_uri, language_id=language, version=version,
        text=text if text is not None else path.read_text(encoding="utf-8"))))
    return doc_uri


def change_doc(client, doc_uri: str, text: str, version: int) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=doc_uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def at(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def span(d: types.Diagnostic) -> tuple[int, int, int, int]:
    r = d.range
    return (r.start.line, r.start.character, r.end.line, r.end.character)
