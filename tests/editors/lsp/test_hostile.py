"""`decomp lsp` on hostile input: the fuzz corpus, a file of about 1 MB (requests answered while
it is checked), a check that runs away, bytes that are not UTF-8, a request with malformed
parameters. The server never dies, and answers every request or says why."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.editors.lsp.lsp_helpers import SERVER, at, diagnostics, open_doc, uri, write_program

pytestmark = pytest.mark.slow
on_the_client_loop = pytest.mark.asyncio(loop_scope="module")
CORPUS = Path(__file__).parents[2] / "dsl" / "fuzz_corpus"


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER + ["--check-timeout", "4"]))
async def client(lsp_client: LanguageClient, tmp_path_factory):
    # the runaway check imports a slow helpers module: the checker does that only in a trusted folder
    trusted = {"trustedFolders": [str(tmp_path_factory.getbasetemp())]}
    await lsp_client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                               initialization_options=trusted))
    yield
    await lsp_client.shutdown_session()


async def _every_request(client, doc_uri: str, line: int, character: int) -> None:
    ident = types.TextDocumentIdentifier(uri=doc_uri)
    position = at(line, character)
    await client.text_document_hover_async(types.HoverParams(text_document=ident, position=position))
    await client.text_document_definition_async(types.DefinitionParams(text_document=ident, position=position))
    await client.text_document_completion_async(types.CompletionParams(text_document=ident, position=position))
    await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=ident))
    await client.text_document_references_async(types.ReferenceParams(
        text_document=ident, position=position, context=types.ReferenceContext(include_declaration=True)))


@on_the_client_loop
async def test_the_fuzz_corpus_gets_diagnostics_and_every_request_an_answer(client):
    files = sorted(p for p in CORPUS.iterdir() if p.is_file())
    assert len(files) > 20
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        language = "decomp" if path.suffix == ".decomp" else "decomp-fewshot"
        doc = open_doc(client, path, text, language)
        await diagnostics(client, doc, timeout=30)
        lines = text.splitlines() or [""]
        for line in (0, len(lines) // 2, len(lines) - 1):
            for character in (0, len(lines[line]) // 2, len(lines[line]) + 5):
                await _every_request(client, doc, line, character)
        await _every_request(client, doc, len(lines) + 10, 3)  # past the end
        client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=doc)))
    assert client.error is None


def _big_program(n: int) -> str:
    head = 'handler h = regex(pattern="(\\\\d+)")\n'
    body = "".join(f"program p{i}(question) {{\n  QS: [h] #question\n  QS: (foreach) [h] #1\n  QS: [EOQ] #2\n}}\n"
                   for i in range(n))
    return head + body + "main p0\n"


@on_the_client_loop
async def test_a_file_of_a_megabyte_is_checked_while_requests_are_answered(client, tmp_path):
    text = _big_program(11_400)
    assert 950_000 < len(text) < 1_000_000
    small = open_doc(client, tmp_path / "small.decomp", 'handler h = regex(pattern="x")\nmain h\n')
    await diagnostics(client, small)
    big = open_doc(client, tmp_path / "big.decomp", text.replace("QS: [h] #question\n", "QS: [nope] #question\n", 1))
    time.sleep(0.5)  # the big check has begun
    answered = []
    for _ in range(5):
        started = time.monotonic()
        found = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=small), position=at(0, 14)))
        answered.append(time.monotonic() - started)
        assert "handler kind `regex`" in found.contents.value
    assert max(answered) < 2.0, answered
    found = await diagnostics(client, big, lambda d: len(d) >= 1, timeout=120)
    assert "unknown handler [nope]" in found[0].message or "longer than" in found[0].message
    too_long = open_doc(client, tmp_path / "huge.decomp", text + "# " + "x" * 60_000 + "\n")
    found = await diagnostics(client, too_long, lambda d: len(d) == 1)
    assert "too long to read" in found[0].message


@on_the_client_loop
async def test_a_check_that_runs_away_is_stopped_and_the_next_one_runs(client, tmp_path):
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(60)\n\ndef f(x):\n    return x\n")
    doc = open_doc(client, tmp_path / "slow.decomp", 'handler f = python(function="slow:f")\nmain f\n')
    found = await diagnostics(client, doc, lambda d: len(d) == 1, timeout=60)
    assert found[0].message == "checking this file took longer than 4 s and was stopped"
    fixed = open_doc(client, tmp_path / "fixed.decomp", 'handler g = regex(pattern="(x")\nmain g\n')
    found = await diagnostics(client, fixed, lambda d: len(d) == 1, timeout=60)
    assert "invalid pattern" in found[0].message


# ------------------------------------------------------------------ raw bytes on stdin
def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _message(payload: dict) -> bytes:
    return _frame(json.dumps(payload).encode("utf-8"))


def _read_messages(stream, ids: set, timeout: float = 60.0, published: str | None = None) -> list[dict]:
    """Messages from the server until the responses to `ids`, and diagnostics of `published`
    when given (reads block: the server answers)."""
    found, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        length = 0
        while True:
            header = stream.readline()
            if not header:
                return found
            if header.startswith(b"Content-Length:"):
                length = int(header.split(b":")[1])
            if header == b"\r\n":
                break
        message = json.loads(stream.read(length))
        found.append(message)
        ids.discard(message.get("id"))
        if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == published:
            published = None
        if not ids and published is None:
            return found
    return found


def test_bytes_that_are_not_utf8_and_malformed_requests_are_answered(tmp_path):
    files = write_program(tmp_path)
    doc = uri(files["main"])
    server = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        send = server.stdin
        send.write(_message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}))
        send.write(_message({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        opened = json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": doc, "languageId": "decomp", "version": 1, "text": "XX"}}}).encode()
        text = files["main"].read_bytes().replace(b"# a program", b"# a \xff\xfe program")
        send.write(_frame(opened.replace(b'"XX"', json.dumps(text.decode("latin-1")).encode()
                                         .replace(b"\\u00ff\\u00fe", b"\xff\xfe"))))
        hover = {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {
            "textDocument": {"uri": doc}, "position": {"line": 8, "character": 25}}}
        send.write(_message(hover))
        broken = {"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": {
            "textDocument": {"uri": doc}, "position": {"line": "eight"}}}
        send.write(_message(broken))
        send.write(_message({"jsonrpc": "2.0", "id": 4, "method": "no/suchMethod", "params": {}}))
        send.flush()
        messages = _read_messages(server.stdout, {1, 2, 3, 4}, published=doc)
        send.write(_message({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
        send.flush()
        messages += _read_messages(server.stdout, {5})
        answers = {m["id"]: m for m in messages if "id" in m}
        assert "step 1 (line 8)" in answers[2]["result"]["contents"]["value"]  # the text with U+FFFD was read
        assert answers[3]["error"]["code"] in (-32602, -32603) and answers[3]["error"]["message"]
        assert answers[4]["error"]["code"] == -32601
        assert answers[5]["result"] is None
        published = [m["params"]["diagnostics"] for m in messages if m.get("method") == "textDocument/publishDiagnostics"
                     and m["params"]["uri"] == doc]
        assert [d["message"].split("\n")[0] for d in published[-1]] == [
            "unknown handler [nope]", "#4 refers to a step that has not run at this point"]
        send.write(_message({"jsonrpc": "2.0", "method": "exit"}))
        send.flush()
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
