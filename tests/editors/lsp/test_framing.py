"""`decomp lsp` on frames a client library would never send: a `Content-Length` of 999999999999
(once a MemoryError that ended the server), negative or missing ones (once the stream lost its
frames), a body over the limit, stray bytes, bodies that are not JSON-RPC. Each is answered
with an error whose id is null, the stream resynchronises, and the next request is answered.
The server runs as a real subprocess; `Frames` is also read here on byte strings."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from decomp.editors.lsp.stdio import CHUNK, MAX_BODY_BYTES, MAX_HEADER_LINE, PARSE_ERROR, Frames, Output
from tests.editors.lsp.raw_client import RawServer, frame, message

slow = pytest.mark.slow
BODY = json.dumps({"jsonrpc": "2.0", "id": 500, "method": "textDocument/documentSymbol", "params": {
    "textDocument": {"uri": "file:///nowhere/lost.decomp"}}}).encode()


def _probe(server: RawServer, ident: int) -> bytes:
    """A request any server answers at once (the outline of a document that is not open: [])."""
    return server.request(ident, "textDocument/documentSymbol", {"textDocument": {"uri": "file:///nowhere/x.decomp"}})


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


# ------------------------------------------------------------------ a real server
@slow
def test_a_content_length_of_999999999999_is_refused_and_the_server_lives():
    with RawServer() as server:
        server.initialize()
        server.write(b"Content-Length: 999999999999\r\n\r\n" + BODY)
        refused = server.refusal(timeout=30)
        assert refused["code"] == PARSE_ERROR
        assert "a message of 999,999,999,999 bytes is over the limit" in refused["message"]
        assert "skipped" in refused["message"]
        server.write(b"x" * (3 * CHUNK))  # the body it skips: read and dropped, never held
        time.sleep(1.0)
        assert server.process.poll() is None
        assert _rss_mb(server.process.pid) < 400
        server.process.stdin.close()  # the input ends inside the skipped body: a clean end
        assert server.process.wait(timeout=30) == 0


@slow
def test_a_body_over_the_limit_is_skipped_and_the_next_request_answered():
    with RawServer() as server:
        server.initialize()
        body = b'{"jsonrpc": "2.0", "id": 7, "method": "x", "params": "' + b"a" * MAX_BODY_BYTES + b'"}'
        server.write(frame(body) + _probe(server, 8))
        refused = server.refusal()
        assert f"a message of {len(body):,} bytes is over the limit of {MAX_BODY_BYTES:,} bytes" in refused["message"]
        assert server.answer(8)["result"] == []
        assert not [m for m in server._backlog if m.get("id") == 7]  # the skipped request was never read
        assert server.shutdown() == 0


@slow
@pytest.mark.parametrize("header, said", [
    (b"Content-Length: -5\r\n\r\n", "a Content-Length that is not a number of bytes: '-5'"),
    (b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n", "a message without a Content-Length header"),
    (b"Content-Length: many\r\n\r\n", "a Content-Length that is not a number of bytes: 'many'"),
    (b"Content-Length: 12\r\nContent-Length: 13\r\n\r\n", "a message whose Content-Length headers disagree"),
])
def test_a_frame_of_unknown_length_is_answered_and_the_stream_resynchronises(header, said):
    with RawServer() as server:
        server.initialize()
        server.write(header + BODY + _probe(server, 2))  # the lost body ends where the next header begins
        refused = server.refusal()
        assert refused == {"code": PARSE_ERROR, "message": "decomp lsp: " + said}
        assert server.answer(2)["result"] == []
        server.write(_probe(server, 3))
        assert server.answer(3)["result"] == []
        assert not [m for m in server._backlog if m.get("id") in (None, 500)]  # answered once, the lost one never
        assert server.shutdown() == 0


@slow
def test_a_lost_body_that_ends_in_letters_runs_into_the_next_header_and_the_request_is_answered():
    """`abcde`, the body of a refused `+5`, runs into the next `Content-Length`, which reads as a
    header named `abcdeContent-Length` (once the request after it was lost, unanswered)."""
    with RawServer() as server:
        server.initialize()
        server.write(b"Content-Length: +5\r\n\r\nabcde" + _probe(server, 2))
        assert server.refusal() == {"code": PARSE_ERROR,
                                    "message": "decomp lsp: a Content-Length that is not a number of bytes: '+5'"}
        assert server.answer(2)["result"] == []
        shouted = _probe(server, 3).replace(b"Content-Length", b"content-LENGTH")
        server.write(b"Content-Length: -5\r\n\r\n12345" + shouted)
        server.refusal()
        assert server.answer(3)["result"] == []
        assert server.shutdown() == 0


@slow
def test_every_kind_of_bad_frame_in_one_stream_is_answered_once_and_each_request_after_it():
    bad = [
        b"hello, server\r\n",                                  # stray bytes
        b"Content-Length: 0\r\n\r\n",                          # an empty body
        b"X-Long: " + b"a" * (3 * MAX_HEADER_LINE) + b"\r\n\r\n",  # a header line too long (then no length)
        b"Content-Length: 5\r\nthis is no header\r\n\r\nhello",  # a line that is not `Name: value`: 5 bytes skipped
        b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n",       # more digits than int() reads: skips the rest
    ]
    with RawServer() as server:
        server.initialize()
        for ident, data in enumerate(bad[:-1], start=10):
            server.write(data + _probe(server, ident))
            server.refusal()
            assert server.answer(ident)["result"] == []
        server.write(bad[-1] + _probe(server, 20))
        assert "over the limit" in server.refusal()["message"]
        time.sleep(0.5)
        assert server.process.poll() is None
        assert not [m for m in server._backlog if "error" in m]


@slow
def test_bodies_that_are_not_json_rpc_are_answered_with_id_null():
    with RawServer() as server:
        server.initialize()
        server.write(frame(b"{not json") + _probe(server, 2))
        refused = server.refusal()
        assert refused["code"] == PARSE_ERROR and "not JSON" in refused["message"]
        assert server.answer(2)["result"] == []
        server.write(frame(b"[1, 2, 3]") + frame(b'{"id": 3, "method": "x"}') + _probe(server, 4))
        assert server.refusal()["code"] == -32600
        invalid = server.answer(3)
        assert invalid["error"]["code"] == -32600 and "not a JSON-RPC message" in invalid["error"]["message"]
        assert server.answer(4)["result"] == []
        server.write(frame(b"[" * 100_000 + b"]" * 100_000) + _probe(server, 5))
        assert "nested too deeply" in server.refusal()["message"]
        assert server.answer(5)["result"] == []
        assert server.shutdown() == 0


# ------------------------------------------------------------------ the reader alone
def _read_all(data: bytes, limit: int = 1000) -> tuple[list[bytes], list[dict], Frames]:
    """The bodies `Frames` passes on from `data`, and the errors it answered."""
    out = io.BytesIO()
    frames = Frames(io.BytesIO(data), Output(out), limit)
    bodies = []
    while True:
        header = frames.readline()
        if not header:
            break
        assert header.startswith(b"Content-Length: ")
        length = int(header.split(b":")[1])
        assert frames.readline() == b"\r\n"
        body = frames.read(length)
        assert len(body) == length
        bodies.append(body)
    answers, raw = [], io.BytesIO(out.getvalue())
    while raw.tell() < len(out.getvalue()):
        length = int(raw.readline().split(b":")[1])
        raw.readline()
        answers.append(json.loads(raw.read(length)))
    return bodies, answers, frames


def test_a_lost_body_of_a_megabyte_without_line_ends_resynchronises_at_a_header_cut_across_reads():
    for pad in range(0, 40, 7):  # the next header falls across the reader's 8 KiB pieces at each offset
        lost = b'{"text": "' + b"x" * (1_000_000 + pad) + b'"}'
        good = message({"jsonrpc": "2.0", "id": 1, "method": "m"})
        bodies, answers, frames = _read_all(b"Content-Length: -1\r\n\r\n" + lost + good)
        assert bodies == [good.split(b"\r\n\r\n", 1)[1]]
        assert [a["error"]["code"] for a in answers] == [PARSE_ERROR] and answers[0]["id"] is None
        assert frames.refused == 1


@pytest.mark.parametrize("tail", [b"abcde", b"12345", b"x-", b"abc\r\nX-Other: 1\r\n", b"ab\r\n\r\nZZ"])
@pytest.mark.parametrize("name", [b"Content-Length", b"content-length", b"CONTENT-LENGTH"])
def test_a_lost_body_is_searched_for_the_next_content_length_whatever_it_ends_in(tail, name):
    good = message({"jsonrpc": "2.0", "id": 1, "method": "m"})
    bodies, answers, frames = _read_all(b"Content-Length: +5\r\n\r\n" + tail + good.replace(b"Content-Length", name))
    assert bodies == [good.split(b"\r\n\r\n", 1)[1]]
    said = "decomp lsp: a Content-Length that is not a number of bytes: '+5'"
    assert [a["error"]["message"] for a in answers] == [said]
    assert frames.refused == 1


def test_the_reader_repairs_utf8_and_keeps_headers_in_any_order():
    bodies, answers, frames = _read_all(b"Content-Type: x\r\ncontent-length:3\r\n\r\n\"\xff\"" + frame(b"{}"))
    assert bodies == ['"\ufffd"'.encode(), b"{}"]
    assert answers == [] and frames.repaired == 1


def test_input_that_ends_anywhere_ends_the_reader_cleanly():
    data = b"Content-Type: x\r\nContent-Length: 40\r\n\r\n" + BODY[:40] + b"Content-Length: -3\r\n\r\nxyz"
    for cut in range(len(data) + 1):
        bodies, answers, _ = _read_all(data[:cut])
        assert len(bodies) <= 1 and len(answers) <= 1
