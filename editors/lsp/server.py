"""`decomp lsp`: a language server (pygls) for `.decomp` files and few-shot prompt files.

On open, change and save, a document is checked as `decomp check` checks it, on its unsaved
text: after a pause in the typing (`DEBOUNCE_S`), in a worker process, so that requests are
answered while a large file is checked, and a check that runs away (`CHECK_TIMEOUT_S`) is
stopped. A result for a version the editor has moved past is dropped. Problems in other files
(imports, few-shot files a handler reads) are published on their own URIs.

Hover, definition, references, completion and the outline read the document's latest index
(`decomp.editors.lsp.index`); none of them runs the checker. Whatever goes wrong while
answering a request is answered as an error that says why; the server goes on.

The event loop never reads a file: a document that is not open, the files its problems are in,
the files completion lists or references search are read on a thread of its own
(`decomp.editors.lsp.readers`), all of a request's reading within one `READ_TIMEOUT_S`, and a file that is not regular (a FIFO, a device) is refused unread
(`decomp.dsl.parser.read_text`). The input is read as `decomp.editors.lsp.stdio` frames it: a
frame that cannot be read is answered with an error and passed by. The checker's process ends
with the server's, however the server ends (`analysis.start_worker`).
"""
from __future__ import annotations

import asyncio
import gc
import json
import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import from_fs_path, to_fs_path

from decomp.dsl.errors import DecompError
from decomp.dsl.parser import read_text
from decomp.handlers.sandbox.trust import Trust
from decomp.editors.lsp import features, stdio
from decomp.editors.lsp.analysis import Analysis, Problem, Settings, analyse, safe_index, start_worker
from decomp.editors.lsp.index import Index, build_index
from decomp.editors.lsp.readers import Readers
from decomp.runtime.version import decomp_version

log = logging.getLogger(__name__)

#: Seconds of quiet typing before a changed document is checked.
DEBOUNCE_S = 0.3
#: A check that takes longer is stopped (its worker killed) and said so at the first line
#: (`decomp lsp --check-timeout`).
CHECK_TIMEOUT_S = 30.0
#: Below this many characters, a request on a document changed since its last check re-reads
#: the document's structure at once; above it, the last check's index answers (it is on its way),
#: and the index is built in this process, on a thread, rather than pickled back from the worker.
FRESH_INDEX_CHARS = 50_000
#: Seconds a request may spend reading files (off the event loop), all its reads together: a
#: document that is not open, the files completion lists or references search, an index's
#: imports. Past it the request is answered with an error that says so (a read that never ends
#: holds a reader thread, never the loop).
READ_TIMEOUT_S = 10.0
#: When the reading of the request being answered must end (the event loop's clock), set by
#: `DecompServer.reading` in the request's task.
_READ_DEADLINE: ContextVar[float | None] = ContextVar("decomp_lsp_read_deadline", default=None)
#: LSP's error code for a request that was read but could not be answered.
REQUEST_FAILED = -32803
#: How many files not open in the editor keep the lines last read of them (`DecompServer.disk`).
DISK_FILES_KEPT = 256
LANGUAGES_FEWSHOT = ("decomp-fewshot",)
_SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning}
_SYMBOL_KIND = {"model": types.SymbolKind.Constant, "handler": types.SymbolKind.Function,
                "program": types.SymbolKind.Class, "step": types.SymbolKind.Event, "main": types.SymbolKind.Key,
                "metric": types.SymbolKind.Property, "example": types.SymbolKind.Namespace}
_ITEM_KIND = {"handler": types.CompletionItemKind.Function, "operator": types.CompletionItemKind.Operator,
              "kind": types.CompletionItemKind.Class, "option": types.CompletionItemKind.Property,
              "ref": types.CompletionItemKind.Reference, "file": types.CompletionItemKind.File,
              "program": types.CompletionItemKind.Module}


class _Protocol(LanguageServerProtocol):
    """pygls's protocol, except that a request whose parameters cannot be read is answered with
    the error (pygls drops it unanswered, and the client waits for ever)."""

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as err:
            if not (isinstance(data, dict) and "id" in data and "method" in data):
                raise
            self._send_response(data["id"], error=types.ResponseError(
                code=err.code, message=f"{err.message}: cannot read the parameters of {data['method']!r}"))
            return _ANSWERED

    def handle_message(self, message):
        """pygls's, except that JSON which is no JSON-RPC message (an array, a number, an object
        without "jsonrpc") is answered as an invalid request (pygls fails on it unanswered)."""
        if hasattr(message, "jsonrpc"):
            return super().handle_message(message)
        ident = message.get("id") if isinstance(message, dict) else None
        ident = ident if isinstance(ident, (int, str)) and not isinstance(ident, bool) else None
        self._send_response(ident, error=types.ResponseError(
            code=JsonRpcInvalidRequest.CODE, message="decomp lsp: not a JSON-RPC message (an object with \"jsonrpc\")"))


class _Answered:
    """A message already answered: `handle_message` passes it by (its jsonrpc is no version)."""

    jsonrpc = "answered"


_ANSWERED = _Answered()


class DecompServer(LanguageServer):
    """The language server: documents' checks, their published problems, their indexes."""

    def __init__(self, settings: Settings = Settings(), check_timeout: float = CHECK_TIMEOUT_S,
                 read_timeout: float = READ_TIMEOUT_S):
        super().__init__("decomp-lsp", decomp_version(), protocol_cls=_Protocol)
        self.settings = settings
        self.check_timeout = check_timeout
        self.read_timeout = read_timeout
        self.readers = Readers()
        self.pool: ProcessPoolExecutor | None = None
        self.analyses: dict[str, Analysis] = {}
        self.fresh: dict[str, tuple[int | None, Index]] = {}
        self.reports: dict[str, dict[str, list[types.Diagnostic]]] = {}
        self.waiting: dict[str, asyncio.Task] = {}
        self.running: set[str] = set()
        self.dirty: set[str] = set()
        #: The lines of files not open in the editor, as last read (off the loop) for `lines_of`.
        self.disk: dict[str, list[str]] = {}

    # ---------------------------------------------------------------- input and output
    def start_io(self, stdin=None, stdout=None) -> None:
        """Serve on standard input and output (or `stdin`, `stdout`), the input read by
        `stdio.Frames`: whatever its framing, the server goes on, answering what it cannot read."""
        out = stdio.Output(stdout or sys.stdout.buffer)
        frames = stdin if isinstance(stdin, stdio.Frames) else stdio.Frames(stdin or sys.stdin.buffer)
        frames.out = out
        super().start_io(frames, out)

    def report_server_error(self, error: Exception, source) -> None:
        """pygls's report (a message the editor shows), and a body that is not JSON answered as
        JSON-RPC answers one: a parse error whose id is null."""
        if isinstance(error, (json.JSONDecodeError, RecursionError)):
            why = "nested too deeply" if isinstance(error, RecursionError) else f"not JSON ({error})"
            self.protocol._send_response(None, error=types.ResponseError(
                code=stdio.PARSE_ERROR, message=f"decomp lsp: a message that cannot be read: {why}"))
        super().report_server_error(error, source)

    # ---------------------------------------------------------------- checking
    def schedule(self, uri: str, delay: float = DEBOUNCE_S) -> None:
        """Check `uri` after `delay` seconds, unless it changes again first."""
        pending = self.waiting.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self.waiting[uri] = asyncio.get_running_loop().create_task(self._after(uri, delay))

    async def _after(self, uri: str, delay: float) -> None:
        await asyncio.sleep(delay)
        self.waiting.pop(uri, None)
        if uri in self.running:  # one check of a document at a time: the newest text goes next
            self.dirty.add(uri)
            return
        self.running.add(uri)
        try:
            await self._check(uri)
        finally:
            self.running.discard(uri)
        if uri in self.dirty:
            self.dirty.discard(uri)
            self.schedule(uri, 0)

    async def _check(self, uri: str) -> None:
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return
        version, text, path = doc.version, doc.source, document_path(uri, doc.language_id)
        fewshot = True if doc.language_id in LANGUAGES_FEWSHOT else None
        try:
            analysis = await asyncio.wait_for(self._in_worker(str(path), text, version, fewshot), self.check_timeout)
        except asyncio.TimeoutError:
            self._stop_worker()
            analysis = Analysis(path, version, {str(path): [Problem(
                None, f"checking this file took longer than {self.check_timeout:g} s and was stopped", "error",
                "error")]}, self.analyses.get(uri, Analysis(path, None)).index)
        if analysis.index is None and self._is_current(uri, version):  # a large document's, built here
            analysis.index = await self._large_index(path, text, fewshot)
        if not self._is_current(uri, version):
            return  # stale: a newer text is on its way
        await self.load_lines(*self.targets(uri, analysis))
        if not self._is_current(uri, version):
            return
        self.analyses[uri] = analysis
        self.publish(uri, analysis)

    async def _large_index(self, path: Path, text: str, fewshot: bool | None) -> Index | None:
        try:
            return await asyncio.wait_for(asyncio.to_thread(_index_unpaused, path, text, fewshot, self.settings.policy()), self.check_timeout)
        except asyncio.TimeoutError:
            return None

    def _is_current(self, uri: str, version) -> bool:
        current = self.workspace.text_documents.get(uri)
        return current is not None and current.version == version

    async def _in_worker(self, path: str, text: str, version, fewshot) -> Analysis:
        """`analyse` in the worker process; a worker that died (killed, out of memory) is
        replaced once, then the death is the document's problem."""
        loop = asyncio.get_running_loop()
        for _ in range(2):
            if self.pool is None:  # started from the loop's thread, which lives as long as the server
                self.pool = ProcessPoolExecutor(1, multiprocessing.get_context("spawn"), start_worker,
                                                (self.settings, os.getpid()))
            try:
                return await loop.run_in_executor(self.pool, analyse, path, text, version, fewshot, self.settings,
                                                  len(text) <= FRESH_INDEX_CHARS)
            except BrokenProcessPool:
                self.pool = None
        return Analysis(Path(path), version, {path: [Problem(
            None, "the checker's process died while checking this file", "error", "error")]})

    def _stop_worker(self) -> None:
        pool, self.pool = self.pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the worker (at shutdown)."""
        self._stop_worker()

    # ---------------------------------------------------------------- publishing
    def targets(self, uri: str, analysis: Analysis) -> dict[str, list[Problem]]:
        """The document's problems by the URI they are shown on."""
        own = str(analysis.path)
        found: dict[str, list[Problem]] = {}
        for file, problems in analysis.problems.items():
            target = uri if file == own else from_fs_path(str(Path(file).resolve())) or file
            found.setdefault(target, []).extend(problems)
        return found

    def publish(self, uri: str, analysis: Analysis) -> None:
        """Publish the document's problems on every URI they are in, clearing those it no
        longer has; each URI shows the problems every open document found there, once."""
        new: dict[str, list[types.Diagnostic]] = {uri: []}
        for target, problems in self.targets(uri, analysis).items():
            new.setdefault(target, []).extend(self.diagnostic(target, p, uri) for p in problems)
        old = self.reports.get(uri, {})
        self.reports[uri] = new
        for target in {*old, *new}:
            self._publish_merged(target)

    def retract(self, uri: str) -> None:
        """A closed document's problems are no longer shown (those of other open documents stay)."""
        old = self.reports.pop(uri, {})
        self.analyses.pop(uri, None)
        self.fresh.pop(uri, None)
        for target in old:
            self._publish_merged(target)

    def _publish_merged(self, target: str) -> None:
        merged, seen = [], set()
        for report in self.reports.values():
            for diagnostic in report.get(target, ()):
                key = (diagnostic.range.start.line, diagnostic.range.start.character, diagnostic.message)
                if key not in seen:
                    seen.add(key)
                    merged.append(diagnostic)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=target, diagnostics=merged))

    def diagnostic(self, target: str, problem: Problem, root: str) -> types.Diagnostic:
        place = features.Place.of(problem.span) if problem.span is not None else features.Place(Path(), 0, 0, 0, 1)
        related = [types.DiagnosticRelatedInformation(self.location(span_place, root), message)
                   for span, message in problem.related for span_place in [features.Place.of(span)]]
        return types.Diagnostic(range=self.to_range(target, place), message=problem.message, source="decomp",
                                severity=_SEVERITY[problem.severity], code=problem.code,
                                related_information=related or None)

    # ---------------------------------------------------------------- files
    @contextmanager
    def reading(self):
        """Every read inside (`off_loop`, in this task) ends within one `read_timeout` from now,
        all of them together; inside another `reading`, that one's deadline holds."""
        if _READ_DEADLINE.get() is not None:
            yield
            return
        token = _READ_DEADLINE.set(asyncio.get_running_loop().time() + self.read_timeout)
        try:
            yield
        finally:
            _READ_DEADLINE.reset(token)

    async def off_loop(self, call: Callable, *args):
        """`call(*args)` on a reader thread, within what is left of the request's reading time
        (`reading`; outside one, `read_timeout`), else a `TimeoutError` that says so."""
        deadline = _READ_DEADLINE.get()
        left = self.read_timeout if deadline is None else deadline - asyncio.get_running_loop().time()
        try:
            if left <= 0:
                raise asyncio.TimeoutError
            return await asyncio.wait_for(asyncio.wrap_future(self.readers.submit(call, *args)), left)
        except asyncio.TimeoutError:
            raise TimeoutError(f"reading files took longer than {self.read_timeout:g} s") from None

    async def file_lines(self, uri: str) -> list[str]:
        """The lines of the file `uri` names, read off the loop; a file that is not regular (a
        FIFO, a device) is refused unread (`DecompError`), as is one too long or not UTF-8."""
        return (await self.off_loop(read_text, to_fs_path(uri) or uri)).split("\n")

    async def load_lines(self, *uris: str, strict: bool = False) -> None:
        """Read the files `uris` name that are not open in the editor, for `lines_of`: one that
        cannot be read has no lines (`strict`: a file refused raises its `DecompError`); all of
        them within one reading time (`reading`)."""
        with self.reading():
            await self._load_lines(uris, strict)
        while len(self.disk) > DISK_FILES_KEPT:
            self.disk.pop(next(iter(self.disk)))

    async def _load_lines(self, uris: tuple[str, ...], strict: bool) -> None:
        for uri in dict.fromkeys(uris):
            if uri in self.workspace.text_documents:
                continue
            self.disk.pop(uri, None)
            try:
                self.disk[uri] = await self.file_lines(uri)
            except OSError:  # missing, unreadable, or too slow
                self.disk[uri] = []
            except DecompError:
                self.disk[uri] = []
                if strict:
                    raise

    # ---------------------------------------------------------------- positions
    def lines_of(self, uri: str) -> list[str]:
        """The lines of a document as the editor has it, else as last read from disk by
        `load_lines` (without line ends). Never reads a file: this runs on the loop."""
        doc = self.workspace.text_documents.get(uri)
        if doc is not None:
            return [line.rstrip("\r\n") for line in doc.lines]
        return self.disk.get(uri, [])

    def to_range(self, uri: str, place: features.Place) -> types.Range:
        lines = self.lines_of(uri)
        codec = self.workspace.position_codec
        return codec.range_to_client_units(lines, types.Range(types.Position(place.line, place.column),
                                                              types.Position(place.end_line, place.end_column)))

    def location(self, place: features.Place, root: str) -> types.Location:
        uri = self.uri_for(place.path, root)
        return types.Location(uri=uri, range=self.to_range(uri, place))

    async def locations(self, places: list[features.Place], root: str) -> list[types.Location]:
        """`location` of each place, the files they are in read first (off the loop)."""
        await self.load_lines(*(self.uri_for(place.path, root) for place in places))
        return [self.location(place, root) for place in places]

    def uri_for(self, path: Path, root: str) -> str:
        """The URI of `path`: the document `root` itself when it is its path (an untitled
        document's too)."""
        analysis = self.analyses.get(root)
        own = analysis.path if analysis is not None else document_path(root, "")
        if str(path) == str(own):
            return root
        return from_fs_path(str(path.resolve())) or str(path)

    async def position(self, uri: str, position: types.Position) -> tuple[list[str], int, int]:
        """The document's lines and the position in code points (a document not open is read
        from disk; one refused, such as a FIFO, raises its `DecompError`)."""
        await self.load_lines(uri, strict=True)
        lines = self.lines_of(uri)
        server = self.workspace.position_codec.position_from_client_units(lines, position)
        return lines, server.line, server.character

    async def index(self, uri: str) -> Index | None:
        """The document's index: its latest check's; or, for a small document changed since,
        read again now from its current text."""
        doc = self.workspace.text_documents.get(uri)
        analysis = self.analyses.get(uri)
        if doc is None:
            return analysis.index if analysis is not None else None
        if analysis is not None and analysis.version == doc.version or len(doc.source) > FRESH_INDEX_CHARS:
            return analysis.index if analysis is not None else None
        cached = self.fresh.get(uri)
        if cached is not None and cached[0] == doc.version:
            return cached[1]
        fewshot = True if doc.language_id in LANGUAGES_FEWSHOT else None
        try:
            index = await self.off_loop(build_index, document_path(uri, doc.language_id), doc.source, fewshot,
                                        self.settings.policy())
        except TimeoutError:  # its imports did not come in time: the last check's index answers
            return analysis.index if analysis is not None else None
        self.fresh[uri] = (doc.version, index)
        return index


def _index_unpaused(path: Path, text: str, fewshot: bool | None, trust: Trust) -> Index | None:
    """`safe_index` of a large document, the cyclic garbage collector held off while it runs and
    its objects frozen after: its full collections, each walking every object of a growing
    syntax tree, would stop the server's loop for a third of a second at a time (the tree has
    no cycles to collect)."""
    gc.disable()
    try:
        index = safe_index(path, text, fewshot, trust)
    finally:
        gc.enable()
    gc.freeze()
    return index


def document_path(uri: str, language_id: str | None) -> Path:
    """The file a document is (an untitled one: a file of the working folder named by its language)."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path:
        return Path(path).resolve()
    return Path.cwd() / ("untitled.txt" if language_id in LANGUAGES_FEWSHOT else "untitled.decomp")


def answering(handler: Callable) -> Callable:
    """A request handler whose unexpected failure is answered as an internal error that says
    what happened (the server goes on). All the files it reads are read within one
    `read_timeout` (`DecompServer.reading`)."""
    async def answer(server: DecompServer, params):
        try:
            with server.reading():
                return await handler(server, params)
        except (DecompError, TimeoutError) as err:  # a file refused (a FIFO) or too slow to read
            said = err.message if isinstance(err, DecompError) else str(err)
            raise JsonRpcException(f"decomp lsp: {said}", code=REQUEST_FAILED) from err
        except Exception as err:
            log.exception("request failed")
            raise JsonRpcInternalError(f"decomp lsp: {type(err).__name__}: {err}") from err
    answer.__name__ = handler.__name__
    answer.__doc__ = handler.__doc__
    return answer
