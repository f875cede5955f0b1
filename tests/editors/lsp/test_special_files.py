"""`decomp lsp` and files that are not regular: a request on a FIFO that is not open (once it
held the event loop for good), an import of a FIFO (once never diagnosed, and no later edit
checked), a document that is a FIFO. Each is refused unread, saying so, and the server goes on
answering. The server runs as a real subprocess; no writer ever opens the FIFOs."""
from __future__ import annotations

import os
import time

import pytest

from tests.editors.lsp.raw_client import RawServer

pytestmark = pytest.mark.slow

GOOD = 'handler h = regex(pattern="(x)")\nmain h\n'


def _hover(uri: str, line: int = 0, character: int = 2) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def test_a_request_on_a_fifo_that_is_not_open_is_refused_at_once_and_the_loop_goes_on(tmp_path):
    fifo = tmp_path / "pipe.decomp"
    os.mkfifo(fifo)
    with RawServer(cwd=tmp_path) as server:
        server.initialize(tmp_path)
        doc = server.open(tmp_path / "good.decomp", GOOD)
        server.diagnostics(doc)
        started = time.monotonic()
        server.send({"id": 1, "method": "textDocument/hover", "params": _hover(fifo.as_uri())},
                    {"id": 2, "method": "textDocument/hover", "params": _hover(doc, 0, 14)})
        refused = server.answer(1, timeout=20)["error"]
        assert refused["code"] == -32803
        assert "is a FIFO (named pipe), not a regular file: it is not read" in refused["message"]
        assert "regex" in server.answer(2, timeout=20)["result"]["contents"]["value"]
        for ident, method in ((3, "textDocument/definition"), (4, "textDocument/completion"),
                              (5, "textDocument/references")):
            params = _hover(fifo.as_uri())
            if method.endswith("references"):
                params["context"] = {"includeDeclaration": True}
            server.send({"id": ident, "method": method, "params": params})
            assert "FIFO" in server.answer(ident, timeout=20)["error"]["message"]
        assert time.monotonic() - started < 20
        assert server.shutdown() == 0


def test_an_import_of_a_fifo_is_diagnosed_at_the_import_and_later_edits_are_checked(tmp_path):
    os.mkfifo(tmp_path / "pipe.decomp")
    text = 'import "pipe.decomp"\n' + GOOD
    with RawServer(cwd=tmp_path) as server:
        server.initialize(tmp_path)
        doc = server.open(tmp_path / "main.decomp", text)
        found = server.diagnostics(doc, lambda d: len(d) >= 1, timeout=30)
        assert [d["range"]["start"]["line"] for d in found] == [0]
        assert f"imported file {tmp_path / 'pipe.decomp'} is a FIFO (named pipe)" in found[0]["message"]
        assert "not a regular file: it is not read" in found[0]["message"]
        server.send({"method": "textDocument/didChange", "params": {
            "textDocument": {"uri": doc, "version": 2},
            "contentChanges": [{"text": text.replace("(x)", "(x")}]}})
        found = server.diagnostics(doc, lambda d: len(d) == 2, timeout=30)
        assert any("invalid pattern" in d["message"] for d in found)
        server.send({"id": 7, "method": "textDocument/hover", "params": _hover(doc, 1, 14)})
        assert "regex" in server.answer(7, timeout=20)["result"]["contents"]["value"]
        assert server.shutdown() == 0


def test_a_document_that_is_a_fifo_is_not_checked_and_says_so(tmp_path):
    fifo = tmp_path / "pipe.decomp"
    os.mkfifo(fifo)
    with RawServer(cwd=tmp_path) as server:
        server.initialize(tmp_path)
        doc = server.open(fifo, GOOD)
        found = server.diagnostics(doc, lambda d: len(d) == 1, timeout=30)
        assert found[0]["message"] == "this document is a FIFO (named pipe), not a regular file: it is not checked"
        doc = server.open(tmp_path / "good.decomp", GOOD.replace("(x)", "(x"))
        assert "invalid pattern" in server.diagnostics(doc, lambda d: len(d) == 1, timeout=30)[0]["message"]
        assert server.shutdown() == 0


def test_hovering_on_a_folder_leaves_no_descriptor_open(tmp_path):
    """A folder is opened, then found to be one: once its descriptor stayed open, one more for
    each request, until the server could open no file at all."""
    with RawServer(cwd=tmp_path) as server:
        server.initialize(tmp_path)
        server.send({"id": 1, "method": "textDocument/hover", "params": _hover(tmp_path.as_uri())})
        server.answer(1, timeout=20)
        before = len(os.listdir(f"/proc/{server.process.pid}/fd"))
        server.send(*({"id": ident, "method": "textDocument/hover", "params": _hover(tmp_path.as_uri())}
                      for ident in range(2, 102)))
        assert all("error" not in server.answer(ident, timeout=30) for ident in range(2, 102))
        assert len(os.listdir(f"/proc/{server.process.pid}/fd")) <= before + 3
        assert server.shutdown() == 0
