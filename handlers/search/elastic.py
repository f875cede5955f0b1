"""Elasticsearch (or an OpenSearch-API server) through the official `elasticsearch` client.

Searching: `ElasticService`, an outbound `Service` (kind "search") whose calls the engine
schedules, retries, budgets, traces and caches; BM25 `multi_match` over `title` and `text`,
`size=k`. Building: `build_elastic`, bulk indexing with `elasticsearch.helpers.streaming_bulk`.

`server="elasticsearch"` (the default) uses the client as shipped: its compatibility headers
(`Accept`/`Content-Type: application/vnd.elasticsearch+json; compatible-with=9`) and its check
that the server says it is Elasticsearch. `server="opensearch"` is for servers that speak the
same REST API but refuse those media types (OpenSearch answers 406, as does osmem-server, the
in-memory OpenSearch the tests start): the client's transport is wrapped so that every request
goes out with plain `application/json` (`application/x-ndjson` for bulk) and a reply without
`X-Elastic-Product` is not refused. Everything else (the API calls, bulk helpers, errors) is the
official client's.

Versions: each build and add stamps a new uuid in the index mapping's `_meta.decomp`
(`{"version", "state"}`); the retrieve kind reads it once per run and keys cached results by
it. An index made by other means has no version, and its results are not cached.

Credentials: user-info in the URL (`http://user:password@host:9200`) becomes the client's basic
auth and `$ELASTIC_API_KEY`, when set, its API key. Neither is ever part of a service name, an
endpoint, a trace, a cache key or a message (`ElasticService.secrets`); nor is a value of the
URL's query string (`?api_key=...`): wherever the URL is shown, its user-info is left out and
each query value is `***` (`shown_url`).

Deadlines: `timeout` is the total of one request, connect to the reply's last byte (the client's
`request_timeout`, which its aiohttp node applies to the whole request, held here too with
`asyncio.timeout`), so a server that trickles its reply fails the attempt in time;
`call_deadline` bounds one search's attempts together, retries and backoff included (the
scheduler holds it; the retrieve kind's `deadline=` option, `DEFAULT_CALL_DEADLINE`).
"""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import uuid
from typing import Any, Callable, Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

from decomp.dsl.errors import ServiceError, TransientServiceError
from decomp.dsl.redact import redact_url, url_secrets
from decomp.handlers.search.corpus import Record
from decomp.handlers.search.tantivy_index import SearchIndexError
from decomp.handlers.service import Service

SERVERS = ("elasticsearch", "opensearch")
API_KEY_ENV = "ELASTIC_API_KEY"
MAPPING_PROPERTIES = {"id": {"type": "keyword"}, "title": {"type": "text"}, "text": {"type": "text"}}
#: Seconds one search (or version read) may take in all, its retries included, unless told.
DEFAULT_CALL_DEADLINE = 60.0


# ---- URLs and credentials
def split_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without user-info, and the (user, password) it held, if any."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url.rstrip("/"), None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)).rstrip("/"), (unquote(user), unquote(password))


def shown_url(url: str) -> str:
    """`url` as it may be shown (names, endpoints, messages, summaries): without its user-info
    and with each query value masked (`redact_url`)."""
    return redact_url(split_url(url)[0])


def _secrets(url: str, api_key: str | None) -> tuple[str, ...]:
    parts = urlsplit(url)
    found = [api_key or ""]
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        found += [userinfo, unquote(userinfo.partition(":")[2])]
    found += [secret for secret in url_secrets(split_url(url)[0]) if secret not in found]  # query values
    return tuple(s for s in found if s)


# ---- the client
def make_client(url: str, *, server: str = "elasticsearch", timeout: float = 10.0, api_key: str | None = None,
                asynchronous: bool = True):
    """An `AsyncElasticsearch` (or `Elasticsearch`) for `url` that never retries by itself (the
    scheduler does), set up for `server` (see the module's docstring)."""
    from elasticsearch import AsyncElasticsearch, Elasticsearch

    host, auth = split_url(url)
    kind = AsyncElasticsearch if asynchronous else Elasticsearch
    options: dict[str, Any] = {"request_timeout": timeout, "max_retries": 0, "retry_on_timeout": False}
    if auth is not None:
        options["basic_auth"] = auth
    if api_key:
        options["api_key"] = api_key
    client = kind(host, **options)
    if server == "opensearch":
        _plain_json(client.transport, asynchronous)
    return client


def _plain_types(headers: Any) -> Any:
    from elastic_transport import HttpHeaders

    fixed = HttpHeaders(headers or {})
    for name in ("accept", "content-type"):
        value = fixed.get(name)
        if value and "vnd.elasticsearch+" in value:
            fixed[name] = value.replace("vnd.elasticsearch+", "").split(";")[0].strip()
    return fixed


def _accept_product(response: Any) -> Any:
    headers = response.meta.headers
    if "x-elastic-product" not in headers:
        headers["x-elastic-product"] = "Elasticsearch"
    return response


def _plain_json(transport: Any, asynchronous: bool) -> None:
    """Wrap the client's transport (shared by every `client.options(...)` copy, bulk helpers
    included): plain JSON media types out, no product check on the way back."""
    send = transport.perform_request
    if asynchronous:
        async def perform_request(method: str, target: str, *, headers: Any = None, **kwargs: Any) -> Any:
            return _accept_product(await send(method, target, headers=_plain_types(headers), **kwargs))
    else:
        def perform_request(method: str, target: str, *, headers: Any = None, **kwargs: Any) -> Any:
            return _accept_product(send(method, target, headers=_plain_types(headers), **kwargs))
    transport.perform_request = perform_request


# ---- errors
def _unreachable_reason(err: BaseException) -> tuple[str, bool] | None:
    """For a failed connection: a short reason and whether waiting cannot help."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused", True
        if isinstance(cause, socket.gaierror):
            temporary = cause.errno == socket.EAI_AGAIN
            return ("temporary failure in name resolution" if temporary else "no such host name"), not temporary
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed: {cause}", True
        cause = cause.__cause__ or cause.__context__
    return None


def service_error(err: Exception, name: str, endpoint: str, server: str, timeout: str = "") -> ServiceError:
    """The client's exception as a final `ServiceError` or a `TransientServiceError` (retried);
    `timeout` says how long a request may take and how to raise it, for a timeout's message."""
    from elastic_transport import ConnectionError as TransportConnectionError
    from elastic_transport import ConnectionTimeout, TransportError
    from elasticsearch import ApiError, UnsupportedProductError

    hint = '; is it an OpenSearch-API server? then set server="opensearch"'
    if isinstance(err, UnsupportedProductError):
        return ServiceError(f"{name}: the server at {endpoint} does not say it is Elasticsearch{hint}")
    if isinstance(err, ApiError):
        status = err.meta.status
        detail = _api_detail(err)
        if status == 429:
            return TransientServiceError(f"{name}: rate limited by {endpoint} (429: {detail})")
        if status >= 500 or status == 408:
            return TransientServiceError(f"{name}: {endpoint} failed ({status}: {detail})")
        if status == 404:
            return ServiceError(f"{name}: not found at {endpoint} (404: {detail})")
        if status in (401, 403):
            return ServiceError(f"{name}: {endpoint} refused the credentials ({status}: {detail})")
        extra = hint if status in (400, 406, 415) and server == "elasticsearch" else ""
        return ServiceError(f"{name}: {endpoint} rejected the request ({status}: {detail}){extra}")
    if isinstance(err, ConnectionTimeout):
        return TransientServiceError(f"{name}: {endpoint} timed out" + (f" {timeout}" if timeout else ""))
    if isinstance(err, TransportConnectionError):
        found = _unreachable_reason(err)
        if found is not None:
            reason, final = found
            error = ServiceError if final else TransientServiceError
            return error(f"{name}: cannot reach {endpoint} ({reason})")
        return TransientServiceError(f"{name}: connection to {endpoint} failed ({err.message})")
    if isinstance(err, TransportError):
        return TransientServiceError(f"{name}: {endpoint} failed ({err.message})")
    return ServiceError(f"{name}: {type(err).__name__}: {err}")


def _api_detail(err: Any) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            kind, reason = error.get("type"), error.get("reason")
            return ": ".join(str(p) for p in (kind, reason) if p) or str(error)[:200]
        if error:
            return str(error)[:200]
    return str(getattr(err, "message", "") or err)[:200]


def _catches():
    from elastic_transport import TransportError
    from elasticsearch import ApiError

    return (ApiError, TransportError)


# ---- searching
def _query(query: str, k: int) -> dict[str, Any]:
    return {"query": {"multi_match": {"query": query, "fields": ["title", "text"]}}, "size": k}


def hits(body: Any) -> list[dict[str, Any]]:
    """The hits of a search reply as `{"id", "title", "text", "score"}`, best first."""
    found = []
    for hit in (body.get("hits") or {}).get("hits") or []:
        source = hit.get("_source") or {}
        found.append({"id": str(source.get("id", hit.get("_id", ""))), "title": str(source.get("title") or ""),
                      "text": str(source.get("text") or ""), "score": round(float(hit.get("_score") or 0.0), 4)})
    return found


class ElasticService(Service):
    """Searches of one index on one server (kind "search"); the async client is made on first
    use in each event loop."""

    kind = "search"

    def __init__(self, url: str, index_name: str, *, server: str = "elasticsearch", timeout: float = 10.0,
                 api_key: str | None = None, call_deadline: float | None = DEFAULT_CALL_DEADLINE):
        self._url = url
        self.index_name = index_name
        self.server = server
        self.timeout = timeout
        self.call_deadline = call_deadline
        # None: $ELASTIC_API_KEY when set; "": no API key
        self._api_key = (api_key or None) if api_key is not None else (os.environ.get(API_KEY_ENV) or None)
        self.endpoint = shown_url(url)
        self.name = f"elasticsearch:{self.endpoint}/{index_name}"
        self._client: Any = None
        self._loop: Any = None
        #: What `version()` found, kept until `aclose` (so it is read once per run).
        self.version_known = False
        self.known_version: str | None = None

    def secrets(self) -> tuple[str, ...]:
        return _secrets(self._url, self._api_key)

    def __repr__(self) -> str:
        return f"ElasticService(name={self.name!r}, server={self.server!r})"

    def _client_now(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = make_client(self._url, server=self.server, timeout=self.timeout, api_key=self._api_key)
            self._loop = loop
        return self._client

    def deadline_hint(self, deadline: str) -> str:
        option = "deadline" if deadline == "call" else "timeout"
        return f"raise it with the retrieve handler's {option}=SECONDS option"

    def _error(self, err: Exception) -> ServiceError:
        return service_error(err, self.name, self.endpoint, self.server, self._within())

    def _within(self) -> str:
        return f"after {self.timeout:g}s, with no complete reply ({self.deadline_hint('attempt')})"

    async def _request(self, api: Callable[..., Any], **kwargs: Any) -> Any:
        """One request of the client, within `timeout` in all; its errors as `ServiceError`s."""
        try:
            async with asyncio.timeout(self.timeout):
                return await api(**kwargs)
        except TimeoutError:
            raise TransientServiceError(f"{self.name}: {self.endpoint} timed out {self._within()}") from None
        except RecursionError:  # the client re-raises its JSON reader's
            raise self._malformed("nested too deep to read") from None
        except _catches() as err:
            raise self._error(err) from None

    def _malformed(self, what: str) -> TransientServiceError:
        return TransientServiceError(f"{self.name}: {self.endpoint} sent a malformed reply ({what})")

    async def version(self) -> str | None:
        """The version `decomp index build` stamped on the index, or None (not built by it).
        A build in progress is a `ServiceError`."""
        reply = await self._request(self._client_now().indices.get_mapping, index=self.index_name)
        stamp = None
        for mapping in reply.body.values():
            meta = ((mapping or {}).get("mappings") or {}).get("_meta") or {}
            stamp = meta.get("decomp") if isinstance(meta, dict) else None
            break
        version = None
        if isinstance(stamp, dict) and stamp.get("version"):
            if stamp.get("state") != "ready":
                raise ServiceError(f"{self.name}: the index is being built, or its build was interrupted")
            version = str(stamp["version"])
        self.version_known, self.known_version = True, version
        return version

    async def search(self, query: str, k: int) -> list[dict[str, Any]]:
        reply = await self._request(self._client_now().search, index=self.index_name, **_query(query, k))
        try:
            return hits(reply.body)
        except (AttributeError, TypeError, ValueError, OverflowError):
            raise self._malformed("its hits are not a search engine's") from None

    async def aclose(self) -> None:
        self.version_known, self.known_version = False, None
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.close()


# ---- building
def build_elastic(records: Iterable[Record], url: str, index_name: str, *, add: bool = False, force: bool = False,
                  server: str = "elasticsearch", timeout: float = 60.0, api_key: str | None = None,
                  chunk_size: int = 500, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Bulk-index `records` into `index_name` (created with title/text as text fields, or grown
    with `add`); a new version is stamped on the index when it is ready. Returns a summary."""
    from elasticsearch import helpers

    api_key = api_key if api_key is not None else (os.environ.get(API_KEY_ENV) or None)
    endpoint = shown_url(url)
    name = f"elasticsearch:{endpoint}/{index_name}"
    client = make_client(url, server=server, timeout=timeout, api_key=api_key, asynchronous=False)
    secrets = _secrets(url, api_key)

    def fail(err: Exception) -> SearchIndexError:
        message = str(service_error(err, name, endpoint, server))
        for secret in secrets:
            message = message.replace(secret, "***")
        return SearchIndexError(message)

    def stamp(state: str) -> str:
        version = uuid.uuid4().hex
        client.indices.put_mapping(index=index_name, meta={"decomp": {"version": version, "state": state}})
        return version

    count = failed = 0
    try:
        exists = bool(client.indices.exists(index=index_name))
        if add and not exists:
            raise SearchIndexError(f"{name}: there is no such index to add to")
        if not add and exists and not force:
            raise SearchIndexError(f"{name}: the index already exists: --add adds to it, --force rebuilds it")
        if not add:
            if exists:
                client.indices.delete(index=index_name)
            client.indices.create(index=index_name, mappings={
                "_meta": {"decomp": {"version": uuid.uuid4().hex, "state": "building"}},
                "properties": MAPPING_PROPERTIES})
        else:
            stamp("building")
        actions = ({"_index": index_name, "_source": record.as_dict()} for record in records)
        try:
            for ok, _item in helpers.streaming_bulk(client, actions, chunk_size=chunk_size, raise_on_error=False,
                                                    raise_on_exception=True, max_retries=3):
                count += 1
                failed += not ok
                if progress is not None and count % chunk_size == 0:
                    progress(count)
        except BaseException:
            # a bad corpus line: an add leaves the index ready (its added part stays, under a
            # new version); a new index is removed
            if add:
                stamp("ready")
            else:
                client.options(ignore_status=404).indices.delete(index=index_name)
            raise
        client.indices.refresh(index=index_name)
        documents = int(client.count(index=index_name)["count"])
        version = stamp("ready")
    except _catches() as err:
        raise fail(err) from None
    finally:
        client.close()
    if progress is not None:
        progress(count)
    return {"backend": "elasticsearch", "url": endpoint, "index_name": index_name, "version": version,
            "state": "ready", "documents": documents, "added": count - failed, "failed": failed}
