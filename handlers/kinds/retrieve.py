"""The `retrieve` handler kind: BM25 top-k paragraphs for the sub-query.

    handler retrieve = retrieve(index="index")             # a tantivy folder beside this file
    handler retrieve = retrieve(index="#index", k="#K")    # both from named inputs (row fields)
    handler retrieve = retrieve(backend="elasticsearch", url="http://127.0.0.1:9200",
                                index_name="wiki", k=10)

The answer is a JSON list of `{"id", "title", "text", "score"}`, best first (`fields` keeps
some of them; `default=[]` answers an empty retrieval instead of failing). Build a tantivy
index with `decomp index build corpus.jsonl --out DIR`.

Backends:
  tantivy        (default) an on-disk index made by `decomp index build`, searched in-process:
                 in a worker thread (`asyncio.to_thread`; tantivy releases the GIL while it
                 searches), or on the event loop once the index's searches have proved to take
                 under 2 ms (the hand-off would cost as much; see
                 `decomp.handlers.search.services`). The sub-query is reduced to its words first, so quotes, colons,
                 parentheses and query operators in a question are never a syntax error.
  elasticsearch  the official `elasticsearch` client (`AsyncElasticsearch`): a `multi_match`
                 over title and text, `size=k`. `server="opensearch"` sends plain JSON media
                 types, for OpenSearch-API servers that refuse the client's compatibility
                 headers (and Elasticsearch servers older than the client's major version).

Every search is one call of a `Service` of kind "search" through `Call.request`: the
scheduler's slots (one endpoint per index folder or server), the budgets of kind "search",
retries of transient failures (Elasticsearch: timeouts, 429 and 5xx; a refused connection
fails at once), a trace node, and the step cache keyed by the query's words, k and the index's
version. Each build or add gives an index a new version (tantivy: in `decomp-index.json` in the
folder, looked at before every search; Elasticsearch: in the mapping's `_meta`, read once per
run), so a rebuilt or grown index is never answered from the old one's entries; an
Elasticsearch index not built by `decomp index build` has no version and its results are not
cached. The kind itself is not cached (`cacheable = False`).

Errors (each a failure of the row's step, named `[handler] retrieve, file:line:col`; the run
goes on): no index at the folder, an index being built, no words to search for and nothing
matching (both answer `default` when one is written), and the service's own (`cannot reach
http://HOST:PORT (connection refused)`, `not found at ... (404: index_not_found_exception:
...)`). `decomp check` reports a literal `index` folder that holds no ready index.

Tested (tests/handlers/search/, tests/handlers/test_retrieve.py): tantivy end to end in
tmp_path (build, add, search, query escaping with a property test over arbitrary text, cache
invalidation by a rebuild and by an add); the Elasticsearch REST path with the official client
(9.x) against a real HTTP server the tests start: osmem-server (the PyPI package
`osmem-server`, an in-memory server of the OpenSearch 3 REST API, one binary, started on a free
port of 127.0.0.1 with `OsmemServer.start(addr="127.0.0.1:0")`), with `server="opensearch"`:
bulk build, add and force, versions in `_meta`, searches through this kind, results cached by
version and missed after an add, a missing index (404), and the 406 that server answers to the
client's default compatibility headers (the error says to set server="opensearch"); a closed
port (connection refused: one clear error, no retries, the URL's password in no message and no
trace); 429/5xx/4xx mapping on constructed client errors. No real Elasticsearch server was
available: the default `server="elasticsearch"` path (compatibility headers and the client's
product check left as shipped) is untested against one.
"""
from __future__ import annotations

import os
import re
from urllib.parse import urlsplit
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from decomp.dsl.errors import CheckError, HandlerError
from decomp.dsl.text import shorten
from decomp.handlers.base import Call, Handler, Options
from decomp.handlers.search.elastic import DEFAULT_CALL_DEADLINE
from decomp.handlers.sandbox.trust import ROOTS_ENV, inside

FIELDS = ("id", "title", "text", "score")
MAX_K = 1000
_INPUT = re.compile(r"#([A-Za-z_]\w*)")
_ENV = re.compile(r"\$([A-Za-z_]\w*)")


class RetrieveOptions(Options):
    index: str | None = None
    k: int | str = 5
    backend: Literal["tantivy", "elasticsearch"] = "tantivy"
    url: str | None = None
    index_name: str | None = None
    server: Literal["elasticsearch", "opensearch"] = "elasticsearch"
    timeout: float = Field(10.0, gt=0)
    deadline: float = Field(DEFAULT_CALL_DEADLINE, gt=0)
    fields: list[str] = list(FIELDS)
    default: Any = None


def _input_name(value: Any) -> str | None:
    """`name` for an option written `"#name"` (a named input), else None."""
    if isinstance(value, str):
        found = _INPUT.fullmatch(value.strip())
        return found.group(1) if found else None
    return None


class RetrieveHandler(Handler):
    """BM25 top-k paragraphs for the sub-query from a tantivy folder or an Elasticsearch index.

    Options:
      index       the tantivy index folder (relative to this .decomp file), or "#name": the
                  folder a named input holds (relative to the working folder). Such a folder
                  must lie inside the working folder, the program's folder, the bundled
                  programs or a folder the session allows: --allow-root / $DECOMP_ALLOW_ROOTS /
                  `load(allow_roots=...)`, and a folder given with --field (`fields=`), which
                  `decomp run` and `run_dataset` allow for their run (`Session.trusting`). A row of a dataset is not
                  trusted to name any folder: `/etc` from a data file is refused
      k           how many paragraphs (default 5, at most 1000), or "#name": a named input
      backend     "tantivy" (default) or "elasticsearch"
      url, index_name, server, timeout
                  for elasticsearch: the server, or "$NAME": the environment variable holding
                  it (it must hold an http(s) URL; user-info in it is sent as basic auth, and
                  `$ELASTIC_API_KEY`, when set, as the API key, but only to a server the
                  environment names: never to a url written in the file; neither is ever
                  written in a name, trace, cache key or message:
                  keep them out of the .decomp file, which run directories copy); the index;
                  "elasticsearch" or "opensearch" (plain JSON media types); seconds one
                  request may take in all, connect to the reply's last byte (default 10)
      deadline    for elasticsearch: seconds one search may take in all, its retries and the
                  waits between them included (default 60)
      fields      the keys each paragraph keeps (default id, title, text, score)
      default     the answer when nothing matches (`default=[]`); only a default that is
                  written counts: without one, an empty retrieval is a `HandlerError`
    """

    kind = "retrieve"

    Options = RetrieveOptions
    cacheable = False  # each search is cached by the index's version instead (Call.request)
    reads_inputs = True

    def __init__(self, name, options, decl, ctx):
        super().__init__(name, options, decl, ctx)
        self._services: dict[Any, Any] = {}
        self._literal: Path | None = None

    # ---- static checks
    def check(self) -> list[CheckError]:
        opts, errors = self.options, []
        k = opts.k
        if isinstance(k, str) and _input_name(k) is None:
            errors.append(CheckError(f"k must be a number or \"#name\" (a named input), not {k!r}",
                                     self.error_span("k")))
        if isinstance(k, int) and not 1 <= k <= MAX_K:
            errors.append(CheckError(f"k must be between 1 and {MAX_K}, got {k}", self.error_span("k")))
        bad = [f for f in opts.fields if f not in FIELDS]
        if bad or not opts.fields:
            errors.append(CheckError(f"fields must be among {', '.join(FIELDS)}"
                                     + (f" (unknown: {', '.join(bad)})" if bad else " (none given)"),
                                     self.error_span("fields")))
        if opts.backend == "tantivy":
            errors += self._check_tantivy()
        else:
            errors += self._check_elastic()
        return errors

    def _check_tantivy(self) -> list[CheckError]:
        opts, errors = self.options, []
        for option in ("url", "index_name"):
            if getattr(opts, option) is not None:
                errors.append(CheckError(f"{option} is for backend=\"elasticsearch\"; a tantivy index is a "
                                         f"folder: index=\"DIR\"", self.error_span(option)))
        if opts.index is None:
            errors.append(CheckError("needs index=\"DIR\" (a folder made by `decomp index build`) or "
                                     "index=\"#name\"", self.error_span()))
        elif _input_name(opts.index) is None:
            from decomp.handlers.search.tantivy_index import MANIFEST, SearchIndexError, read_manifest

            folder = self.ctx.resolve(opts.index)
            self.ctx.files.add(folder / MANIFEST)  # a run records the index version it used
            try:
                read_manifest(folder)
            except SearchIndexError as err:
                errors.append(CheckError(str(err), self.error_span("index")))
        return errors

    def _check_elastic(self) -> list[CheckError]:
        opts, errors = self.options, []
        if opts.index is not None:
            errors.append(CheckError("index is the folder of a tantivy index; name an Elasticsearch index "
                                     "with index_name=\"...\"", self.error_span("index")))
        if not opts.url:
            errors.append(CheckError("backend=\"elasticsearch\" needs url=\"http://HOST:PORT\"", self.error_span()))
        elif not re.match(r"https?://[^/\s]+", opts.url) and not _ENV.fullmatch(opts.url):
            errors.append(CheckError("url must start with http:// or https:// and name a host, or be \"$NAME\" "
                                     "(an environment variable holding the URL)",
                                     self.error_span("url")))
        if not opts.index_name:
            errors.append(CheckError("backend=\"elasticsearch\" needs index_name=\"...\"", self.error_span()))
        return errors

    # ---- running
    async def run(self, call: Call) -> Any:
        query = call.query.strip()
        k = self._k(call)
        if self.options.backend == "tantivy":
            found, where = await self._tantivy(call, query, k)
        else:
            found, where = await self._elastic(call, query, k)
        if not found:
            if self._has_default:
                return self.options.default
            raise HandlerError(f"no paragraph of {where} matches {shorten(query, 80)!r}", call.span)
        fields = self.options.fields
        if list(fields) == list(FIELDS):
            return found
        return [{f: hit[f] for f in fields} for hit in found]

    @property
    def _has_default(self) -> bool:
        return "default" in self.options.model_fields_set

    def _k(self, call: Call) -> int:
        k = self.options.k
        name = _input_name(k)
        if name is not None:
            if name not in call.inputs:
                raise HandlerError(f"k={k!r}: there is no input named '{name}' here "
                                   f"(give it as a row field or `--field {name}=5`)", call.span)
            k = call.inputs[name]
            if isinstance(k, str) and k.strip().isdigit():
                k = int(k.strip())
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise HandlerError(f"k must be a whole number from 1 to {MAX_K}, got {k!r}", call.span)
        return k

    def _folder(self, call: Call) -> Path:
        index = self.options.index or ""
        name = _input_name(index)
        if name is None:
            if self._literal is None:
                self._literal = self.ctx.resolve(index)
            return self._literal
        value = call.inputs.get(name)
        if not isinstance(value, str) or not value.strip():
            raise HandlerError(f"index={index!r}: there is no input named '{name}' holding a folder here "
                               f"(give it as a row field or `--field {name}=DIR`)", call.span)
        folder = Path(value).expanduser().resolve()
        roots = self.ctx.roots
        if roots is not None and not inside(folder, (*roots, Path.cwd().resolve(), *call.trust.extra_roots())):
            # a data row may name any folder: never one outside where the user works (nor echoed)
            raise HandlerError(f"index={index!r}: the folder in the input '{name}' is outside the working "
                               "folder, the program's folder and the bundled programs; an index named by an "
                               "input must lie inside one of them. To allow another folder on purpose, pass "
                               f"--allow-root DIR (decomp run) or set {ROOTS_ENV}=DIR", call.span)
        return folder

    async def _tantivy(self, call: Call, query: str, k: int) -> tuple[list, str]:
        from decomp.handlers.search.services import TantivyService
        from decomp.handlers.search.tantivy_index import SearchIndexError, safe_query

        folder = self._folder(call)
        service = self._services.get(folder)
        if service is None:
            service = self._services[folder] = TantivyService(folder)
        try:
            index = await service.current()
        except SearchIndexError as err:
            raise HandlerError(str(err), call.span) from None
        terms = safe_query(query)
        if not terms and self._has_default:
            return [], ""
        if not terms:
            raise HandlerError(f"nothing to search for: {shorten(query, 80)!r} has no words", call.span)
        found = await call.request(service, service.search, index, terms, k, what=query,
                                   cache={"backend": "tantivy", "index": index.version, "query": terms, "k": k})
        return found, f"the index {folder}"

    async def _elastic(self, call: Call, query: str, k: int) -> tuple[list, str]:
        from decomp.handlers.search.elastic import ElasticService

        if not query and self._has_default:
            return [], ""
        if not query:
            raise HandlerError("nothing to search for: the sub-query is empty", call.span)
        opts = self.options
        url = self._url(call)
        service = self._services.get(url)
        if service is None:
            # $ELASTIC_API_KEY goes only to a server the user named in the environment too, never
            # to a host that the .decomp file wrote (it could be anyone's)
            key = None if _ENV.fullmatch(opts.url or "") else ""
            service = self._services[url] = ElasticService(url, opts.index_name, server=opts.server,
                                                           timeout=opts.timeout, api_key=key,
                                                           call_deadline=opts.deadline)
        version = await self._elastic_version(call, service)
        cache = {"backend": "elasticsearch", "index": version, "query": query, "k": k} if version else None
        found = await call.request(service, service.search, query, k, what=query, cache=cache)
        return found, f"{service.endpoint}/{opts.index_name}"

    def _url(self, call: Call) -> str:
        """The server's URL: as written, or from the environment variable `$NAME` names (so that
        credentials in it stay out of the .decomp file, which a run directory copies)."""
        url = self.options.url or ""
        found = _ENV.fullmatch(url)
        if found is None:
            return url
        value = os.environ.get(found.group(1), "").strip()
        if not value:
            raise HandlerError(f"url={url!r}: the environment variable {found.group(1)} is not set", call.span)
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:  # never echo it: it may be any secret
            raise HandlerError(f"url={url!r}: the environment variable {found.group(1)} does not hold an "
                               "http(s) URL", call.span)
        return value

    async def _elastic_version(self, call: Call, service) -> str | None:
        """The index's version, read once per run (the service forgets it when it is closed)."""
        if not service.version_known:
            await call.request(service, service.version, what=f"version of the index {service.index_name}")
        return service.known_version

    async def aclose(self) -> None:
        services, self._services = list(self._services.values()), {}
        for service in services:
            await service.aclose()
