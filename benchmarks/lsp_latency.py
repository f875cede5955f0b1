"""Benchmark: how long `decomp lsp` takes to answer an editor, driven over stdio by a real LSP client.

Starts `python -m decomp lsp` in a child process with pytest-lsp's `LanguageClient`, initializes
it, and opens a copy of the bundled `decomp/letter_cat_symbolic.decomp` (its folder copied to a
temporary directory). Times are taken when the client has read the server's message.

    initialize_s                the server's process started -> its answer to `initialize`
    first_diagnostics_s         didOpen -> the document's first publishDiagnostics (the checker's
                                worker process is spawned on this first check)
    recheck_s                   didChange -> the diagnostics of that text, median and p90 over EDITS
                                edits that rename `[words]` in a QS line to an unknown handler and
                                back, alternately; recheck_minus_debounce_s: less the server's
                                pause before a check (DEBOUNCE_S)
    hover_ms, completion_ms,    REQUESTS requests each on the idle server, median and p99: hover on
    definition_ms               a `#1`, completion just inside `QS: [`, definition of a handler name
    big_check_s                 didOpen of a valid program of BIG_KB KB (`_big_program` of
                                tests/editors/lsp/test_hostile.py) -> its diagnostics
    hover_ms_during_big_check   hovers on the small document (one every 50 ms) until then: median,
                                p99, max; hover_p99_over_typing_interval = that p99 / 100 ms (a fast
                                typist's ~10 keys a second): above 1, a key waits for the answer;
                                hover_max_over_typing_interval, the same of the slowest hover

    python benchmarks/lsp_latency.py [--edits 20] [--requests 200] [--big-kb 950]   (--big-kb 0: no big file)

The client is pytest-lsp's (the `dev` extra).
"""
from __future__ import annotations

import asyncio
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402

PROGRAM = REPO / "programs" / "decomp" / "letter_cat_symbolic.decomp"
TYPING_INTERVAL_MS = 100
BIG_HOVER_EVERY_S = 0.05
TIMEOUT_S = 300.0


def _big_program(kb: int) -> str:
    """A valid program of at least `kb` KB, without a warning (its regex answers a list, which the
    foreach iterates over): test_hostile.py's `_big_program`, as many programs as it takes."""
    head = 'handler h = regex(pattern="(\\\\d+)", all=true)\n'
    parts, size, i = [head], len(head), 0
    while size < kb * 1000:
        part = f"program p{i}(question) {{\n  QS: [h] #question\n  QS: (foreach) [h] #1\n  QS: [EOQ] #2\n}}\n"
        parts.append(part)
        size += len(part)
        i += 1
    return "".join(parts) + "main p0\n"


def _percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _summary(seconds: list[float], high: float, scale: float = 1000.0, digits: int = 2) -> dict:
    return {"median": round(statistics.median(seconds) * scale, digits),
            f"p{high:g}": round(_percentile(seconds, high) * scale, digits)}


class _Diagnostics:
    """Every publishDiagnostics the client receives, by URI, with the time it was read."""

    def __init__(self) -> None:
        self.arrivals: dict[str, list[tuple[float, list]]] = {}
        self.event = asyncio.Event()

    def received(self, params) -> None:
        self.arrivals.setdefault(params.uri, []).append((time.perf_counter(), list(params.diagnostics)))
        self.event.set()

    def count(self, uri: str) -> int:
        return len(self.arrivals.get(uri, ()))

    def found(self, uri: str, after: int, predicate) -> tuple[float, list] | None:
        for arrival in self.arrivals.get(uri, ())[after:]:
            if predicate(arrival[1]):
                return arrival
        return None

    async def wait(self, uri: str, after: int, predicate=lambda d: True) -> tuple[float, list]:
        """The first diagnostics of `uri` received after its `after`-th that satisfy `predicate`."""
        deadline = time.monotonic() + TIMEOUT_S
        while (arrival := self.found(uri, after, predicate)) is None:
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise RuntimeError(f"no diagnostics of {uri} in {TIMEOUT_S:g} s: {self.arrivals.get(uri)!r}")
        return arrival


def _client_factory(diagnostics: _Diagnostics):
    from lsprotocol import types
    from pygls.protocol import default_converter
    from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, LanguageClient, register_lsp_features

    def make() -> LanguageClient:
        client = LanguageClient(converter_factory=default_converter)
        features = dict(DEFAULT_CLIENT_FEATURES)

        def publish_diagnostics(params) -> None:  # a plain function (pygls sets attributes on it), no `ls`
            diagnostics.received(params)
        features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish_diagnostics
        register_lsp_features(client, features)
        return client
    return make


def _unknown(diagnostics: list) -> bool:
    return any(d.message.startswith("unknown handler [wordz]") for d in diagnostics)


async def _measure(folder: Path, args) -> dict:
    from lsprotocol import types
    from pygls.uris import from_fs_path
    from pytest_lsp import ClientServerConfig

    from decomp.editors.lsp.server import DEBOUNCE_S

    path = folder / "decomp" / PROGRAM.name
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    words_line = next(i for i, line in enumerate(lines) if "QS: [words] #1" in line)
    assert "[words]" in lines[words_line]
    ref = (words_line, lines[words_line].index("#1") + 1)  # on `#1`
    inside = (words_line, lines[words_line].index("[") + 1)  # just after `QS: [`
    join_line = next(i for i, line in enumerate(lines) if "QS: [join]" in line)
    handler = (join_line, lines[join_line].index("[join]") + 2)  # on `join`
    broken = text.replace("QS: [words] #1", "QS: [wordz] #1", 1)

    received = _Diagnostics()
    config = ClientServerConfig(server_command=[sys.executable, "-m", "decomp", "lsp"],
                                client_factory=_client_factory(received))
    started = time.perf_counter()
    client = await config.start()
    record: dict = {}
    try:
        await client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities()))
        record["initialize_s"] = round(time.perf_counter() - started, 3)
        uri = from_fs_path(str(path.resolve()))
        ident = types.TextDocumentIdentifier(uri=uri)

        # 1. the first check (spawns the worker)
        started = time.perf_counter()
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id="decomp", version=1, text=text)))
        arrived, found = await received.wait(uri, 0)
        if found:
            raise RuntimeError(f"{PROGRAM.name} has problems: {[d.message for d in found]}")
        record["first_diagnostics_s"] = round(arrived - started, 3)

        # 2. rechecks after an edit: a mistake in, then out
        rechecks, version = [], 1
        for edit in range(args.edits):
            version += 1
            mistake = edit % 2 == 0
            after = received.count(uri)
            started = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=broken if mistake else text)]))
            arrived, _ = await received.wait(uri, after, _unknown if mistake else (lambda d: not _unknown(d)))
            rechecks.append(arrived - started)
        if args.edits % 2:  # leave the document as it was
            version += 1
            after = received.count(uri)
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
            await received.wait(uri, after, lambda d: not _unknown(d))
        record["recheck_s"] = _summary(rechecks, 90, scale=1.0, digits=3)
        record["recheck_minus_debounce_s"] = _summary([r - DEBOUNCE_S for r in rechecks], 90, scale=1.0, digits=3)

        # 3. requests on the idle server
        def at(place):
            return types.Position(line=place[0], character=place[1])

        async def hover():
            found = await client.text_document_hover_async(types.HoverParams(text_document=ident, position=at(ref)))
            if found is None:
                raise RuntimeError(f"no hover at {ref}")

        async def complete():
            found = await client.text_document_completion_async(types.CompletionParams(
                text_document=ident, position=at(inside)))
            if not found.items:
                raise RuntimeError(f"no completion at {inside}")

        async def define():
            found = await client.text_document_definition_async(types.DefinitionParams(
                text_document=ident, position=at(handler)))
            if not found:
                raise RuntimeError(f"no definition at {handler}")

        for name, request in (("hover_ms", hover), ("completion_ms", complete), ("definition_ms", define)):
            await request()  # one first, not timed
            times = []
            for _ in range(args.requests):
                started = time.perf_counter()
                await request()
                times.append(time.perf_counter() - started)
            record[name] = _summary(times, 99)

        # 4. hovers on the small document while a big one is checked
        record.update(big_kb=args.big_kb, big_chars=None, big_check_s=None, big_diagnostics=None,
                      hovers_during_big_check=None, hover_ms_during_big_check=None,
                      hover_p99_over_typing_interval=None, hover_max_over_typing_interval=None)
        if args.big_kb > 0:
            big_text = _big_program(args.big_kb)
            big_uri = from_fs_path(str((folder / "big.decomp").resolve()))
            started = time.perf_counter()
            client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
                uri=big_uri, language_id="decomp", version=1, text=big_text)))
            times = []
            while received.count(big_uri) == 0:
                sent = time.perf_counter()
                await hover()
                times.append(time.perf_counter() - sent)
                await asyncio.sleep(BIG_HOVER_EVERY_S)
            arrived, found = await received.wait(big_uri, 0)
            p99 = _percentile(times, 99) * 1000
            record.update(big_chars=len(big_text), big_check_s=round(arrived - started, 3),
                          big_diagnostics=len(found), hovers_during_big_check=len(times),
                          hover_ms_during_big_check={"median": round(statistics.median(times) * 1000, 2),
                                                     "p99": round(p99, 2), "max": round(max(times) * 1000, 2)},
                          hover_p99_over_typing_interval=round(p99 / TYPING_INTERVAL_MS, 3),
                          hover_max_over_typing_interval=round(max(times) * 1000 / TYPING_INTERVAL_MS, 3))
        record["debounce_s"] = DEBOUNCE_S
        await client.shutdown_session()
    finally:
        await client.stop()
    return record


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--edits", type=int, default=20, help="didChange edits timed (a mistake in, then out)")
    p.add_argument("--requests", type=int, default=200, help="hover, completion and definition requests each")
    p.add_argument("--big-kb", type=int, default=950, help="KB of the big program checked meanwhile (0: none)")
    args = p.parse_args(argv)
    if args.edits < 1 or args.requests < 1:
        p.error("--edits and --requests must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copytree(PROGRAM.parent, folder / "decomp", ignore=shutil.ignore_patterns("__pycache__"))
        measured = asyncio.run(_measure(folder, args))
    record = {"benchmark": "lsp_latency", "program": f"decomp/{PROGRAM.stem}", "edits": args.edits,
              "requests": args.requests, **measured, "typing_interval_ms": TYPING_INTERVAL_MS,
              "python": sys.version.split()[0], "load_1m": round(os.getloadavg()[0], 2)}
    return emit(record)


if __name__ == "__main__":
    main()
