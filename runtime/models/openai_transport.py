"""How `OpenAIModel` sends one request: the two transports behind `transport=`.

- `aiohttp` (the default): one `aiohttp.ClientSession` per model and event loop, its headers
  and URLs built once, the JSON written with the standard library. About a quarter of the
  client CPU per request of the openai client (benchmarks/client_cpu.py: 0.15 against 0.6 ms
  at 64 in flight).
- `openai`: the official client's low-level `post` (its auth, base URL, pool and errors), on its
  own aiohttp transport (`DefaultAioHttpClient`).

Both send the same body and headers that matter (the same JSON, `Authorization: Bearer KEY`,
`OpenAI-Organization`/`OpenAI-Project` from the environment), use the same per-phase timeouts
(connect, pool and read, each `timeout` seconds; `OpenAIModel` bounds each request in all with
its `attempt_deadline`), honour HTTP(S)_PROXY/NO_PROXY and the
SSL_CERT_FILE/SSL_CERT_DIR trust stores, never retry, and take the scheduler slot just before
the request leaves and give it back as the reply's headers arrive (see `Slot`).

The base URL is read once, the same way by both (`parse_base_url`): requests go to its path
plus the API's (`/v1` + `/completions`), its query string, if any, after that
(`http://host/v1?api-key=K` -> `POST /v1/completions?api-key=K`), and any fragment is dropped.
Credentials in it (`http://user:password@host/v1`) never go in the request URL: with no
OPENAI_API_KEY set they are sent as HTTP Basic auth (`Authorization: Basic ...`); with a key
set, its `Bearer` header wins and the user-info is dropped (a request carries one Authorization
header). A base URL that cannot be requested (no http:// or https://, no host, a port outside
1-65535, one the HTTP stack rejects) fails every request with `InvalidEndpoint`, never retried.

Each transport keeps one client per event loop (`_PerLoopClient`): made on the loop's first
request, closed when that loop shuts down (`asyncio.run`'s end), on `aclose`, or, at the latest,
when the transport is next used on another loop.

They report failures as the few transport-neutral exceptions below; `OpenAIModel` turns those
into the one set of `ModelError` messages, so both transports fail with the same words.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
from typing import Any, Generic, Mapping, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from decomp.dsl.redact import redact_url
from decomp.runtime.models.base import CURRENT_SLOT

TRANSPORTS = ("auto", "aiohttp", "openai")
DEFAULT_TRANSPORT = "aiohttp"
OPENAI_BASE_URL = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "unused"  # local servers need no key, but the client insists on one
# the openai client's (and httpx's) JSON: compact, UTF-8, no NaN
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_MAX_CONNECTIONS = 1000  # the openai client's own pool limit; the scheduler bounds what is in flight


T = TypeVar("T")


class Secret(Generic[T]):
    """Holds the API key, or what carries it (an Authorization header, the headers of every
    request), so that no repr, vars() dump or f-string shows it: keep it in a Secret, never in a
    plain attribute, and reveal() it only where it is sent."""

    __slots__ = ("_value",)

    def __init__(self, value: T):
        self._value = value

    def reveal(self) -> T:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


# ---- what a transport raises
class StatusFailure(Exception):
    """The server answered with a status outside 2xx. `body` is the reply's JSON error object
    (its "error" member when there is one), else the reply's text."""

    def __init__(self, status: int, headers: Mapping[str, str], body: object):
        super().__init__(status)
        self.status, self.headers, self.body = status, headers, body

    @property
    def code(self) -> str | None:
        code = self.body.get("code") if isinstance(self.body, dict) else None
        return None if code is None else str(code)


class ConnectionFailure(Exception):
    """No reply: `error` is what the HTTP stack raised (its cause chain says why), `timed_out`
    whether a timeout ended the wait, `reason` the stack's own words for it, `cut_short` (when
    not None) what was missing of a reply whose connection closed before its end."""

    def __init__(self, error: BaseException, timed_out: bool):
        super().__init__(type(error).__name__)
        cause = error.__cause__ or error
        self.error, self.timed_out = error, timed_out
        self.reason = str(cause) or type(cause).__name__
        self.cut_short = _cut_short(error)


class MalformedReply(Exception):
    """A reply the client could not read as HTTP or as the API's shape."""


class ClientFailure(Exception):
    """Any other error of the client library (its type and message)."""


class InvalidEndpoint(Exception):
    """The base URL cannot be requested; the message says why, in the same words on both
    transports, and quotes nothing of the URL."""


def parse_base_url(base_url: str | None, key: Secret[str]) -> tuple[str, str, Secret[str]]:
    """Where the requests of `base_url` go and how they authenticate: (its scheme, host, port
    and path, without user-info, query, fragment or a trailing slash; its query string, '' when
    none; the Authorization header). The header is `Bearer KEY`, or `Basic` with the URL's
    user-info when it has one and no key is set (`key` is `PLACEHOLDER_KEY`): a key set wins
    and the user-info is dropped. Raises `InvalidEndpoint` for a URL that cannot be requested."""
    url = (base_url or OPENAI_BASE_URL).strip()
    if any(ord(char) < 32 or ord(char) == 127 for char in url):  # which the HTTP stacks drop, or refuse
        raise InvalidEndpoint("it holds a control character")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise InvalidEndpoint("it cannot be parsed") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidEndpoint("it must begin with http:// or https://")
    if not parts.hostname:
        raise InvalidEndpoint("it names no host")
    try:
        port = parts.port
    except ValueError:  # out of range, or not a number
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise InvalidEndpoint("its port must be a number from 1 to 65535")
    userinfo, at, host = parts.netloc.rpartition("@")
    authorization = f"Bearer {key.reveal()}"
    if at and key.reveal() == PLACEHOLDER_KEY:
        user, _, password = userinfo.partition(":")
        credentials = f"{unquote(user)}:{unquote(password)}".encode()
        authorization = "Basic " + base64.b64encode(credentials).decode()
    bare = urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
    return bare, parts.query, Secret(authorization)


def _endpoint(base_url: str | None, key: Secret[str]) -> tuple[str, str, Secret[str] | None, str | None]:
    """`parse_base_url`'s answer and None, or (the URL as given, '', None, why it is invalid)."""
    try:
        return (*parse_base_url(base_url, key), None)
    except InvalidEndpoint as exc:
        return base_url or OPENAI_BASE_URL, "", None, str(exc)


def _rejected_url(exc: BaseException) -> bool:
    """Whether the HTTP stack refused the request's own URL (not a redirect's): aiohttp's or
    httpx's InvalidURL anywhere in `exc`'s chain."""
    import aiohttp

    redirect = getattr(aiohttp, "RedirectClientError", ())
    for err in _chain(exc):
        if isinstance(err, aiohttp.InvalidURL) and not isinstance(err, redirect):
            return True
        if type(err).__name__ == "InvalidURL" and type(err).__module__.startswith("httpx"):
            return True
    return False


def error_body(raw: bytes | str) -> object:
    """A failed reply's body as the openai client keeps it: the JSON's "error" member (or the
    whole JSON), else the stripped text."""
    text = (raw.decode(errors="replace") if isinstance(raw, bytes) else raw).strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read: its text
        return text
    return data.get("error", data) if isinstance(data, dict) else data


def default_headers(authorization: str) -> dict[str, str]:
    """Authorization and the openai client's optional organization and project headers."""
    headers = {"Authorization": authorization, "Content-Type": "application/json",
               "Accept": "application/json"}
    for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
        if os.environ.get(variable):
            headers[header] = os.environ[variable]
    return headers


# ---- one client per event loop
class _PerLoopClient:
    """What both transports share: one client per event loop (a pooled connection cannot
    outlive its loop), made on the loop's first request and closed

    - when that loop shuts down: `asyncio.run` (and `asyncio.Runner`) close the loop's async
      generators before closing it, and each client has one (`_closes_with_its_loop`) whose
      `finally` closes it there, on its own loop;
    - by `aclose`, whichever loop it is awaited on;
    - when the transport is used on another loop and the client is still open: a loop closed
      by hand (without `shutdown_asyncgens`) cannot run the close, so the client's pooled
      sockets are closed at once, without it (`_close_without_its_loop`), and the client then
      closed here (it has nothing left to wait for); an idle loop is run to close it, in a
      worker thread; a loop running in another thread is asked to close it itself.

    Subclasses make the client (`_make_client`; its `close()` is a coroutine) and name the
    aiohttp sessions under it (`_aiohttp_sessions`)."""

    def __init__(self) -> None:
        self.client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: Any = None  # the async generator that closes `client` at its loop's end

    def _make_client(self) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def _aiohttp_sessions(self, client: Any) -> list:  # pragma: no cover - interface
        raise NotImplementedError

    async def _open(self, loop: asyncio.AbstractEventLoop) -> Any:
        """A new client for `loop` (the running one), the old one retired."""
        old = self.client, self._loop, self._closer
        client = self._make_client()
        closer = _closes_with_its_loop(client)
        # the state changes before the first await: a request of this loop that comes in
        # meanwhile takes the new client rather than making one more
        self.client, self._loop, self._closer = client, loop, closer
        await closer.__anext__()  # registers it with the loop (its first step does not wait)
        try:
            await self._retire(*old)
        except Exception:  # noqa: BLE001 - an old client that fails to close fails no request
            pass
        return client

    async def _retire(self, client: Any, loop: asyncio.AbstractEventLoop | None, closer: Any) -> None:
        """Close `client`, made on `loop`, from the running loop (see the class docstring)."""
        if client is None:
            return
        if loop is asyncio.get_running_loop():
            await closer.aclose()  # its `finally` closes the client
        elif loop is None or loop.is_closed():
            for session in self._aiohttp_sessions(client):
                _close_without_its_loop(session)
            await client.close()  # nothing left that needs the old loop
        elif loop.is_running():  # in another thread: that loop closes its own client
            asyncio.run_coroutine_threadsafe(closer.aclose(), loop)
        else:  # idle: run it a moment, in a worker thread, to close the client on it
            try:
                await asyncio.to_thread(loop.run_until_complete, closer.aclose())
            except RuntimeError:  # it started running meanwhile (or was closed): ask it
                if loop.is_running():
                    asyncio.run_coroutine_threadsafe(closer.aclose(), loop)

    async def aclose(self) -> None:
        """Close the client (rebuilt on next use)."""
        old = self.client, self._loop, self._closer
        self.client = self._loop = self._closer = None
        await self._retire(*old)


async def _closes_with_its_loop(client: Any):
    """Waits at its `yield` until closed: by the loop's `shutdown_asyncgens` (the end of
    `asyncio.run`), by `_retire`, or by the loop's finalizer hook when the transport is dropped;
    then closes `client` on that loop (a client already closed closes again as a no-op). It
    holds the client only (no reference back to the transport, which would make a cycle that
    the garbage collector breaks by finalizing the client before it is closed)."""
    try:
        yield
    finally:
        await client.close()


def _close_without_its_loop(session: Any) -> None:
    """Close an aiohttp session whose event loop is closed: its connector marked closed (so
    neither warns as unclosed) and each pooled connection's socket closed directly (its
    transport's own close would need the loop). Best effort: aiohttp's and asyncio's internals,
    each step guarded."""
    connector = getattr(session, "connector", None)
    if connector is None or connector.closed:
        return
    try:
        protocols = [proto for conns in connector._conns.values() for proto, _ in conns]
        protocols += list(connector._acquired)
    except Exception:  # noqa: BLE001 - another aiohttp: the sockets are left to the GC
        protocols = []
    try:
        connector._close()  # its loop closed: marks it closed and drops the pool, touching nothing
    except Exception:  # noqa: BLE001
        session.detach()  # at least no "Unclosed client session"
        return
    for proto in protocols:
        transport = getattr(proto, "transport", None)
        sock = getattr(transport, "_sock", None)
        if sock is not None:
            sock.close()
            transport._sock = None  # its __del__ would warn "unclosed transport" and close it again


# ---- the lean transport
class AiohttpTransport(_PerLoopClient):
    """POSTs with one pooled `aiohttp.ClientSession` per event loop."""

    name = "aiohttp"

    def __init__(self, base_url: str | None, key: Secret[str], timeout: float):
        super().__init__()
        self._shown = redact_url(base_url or OPENAI_BASE_URL)
        self._base, self._query, self._authorization, self._invalid = _endpoint(base_url, key)
        self._timeout = timeout
        self._proxy, proxy_auth = _env_proxy(self._base) if self._invalid is None else (None, None)
        # a plain-HTTP request goes to the proxy as it is; an https one through a CONNECT request
        self._proxy_auth = proxy_auth if self._base.startswith("http:") else None
        self._proxy_headers = proxy_auth if self._base.startswith("https:") else None
        self._urls: dict[str, Any] = {}
        self._headers: Secret[Any] | None = None  # the request headers: they carry the key

    def __repr__(self) -> str:
        return f"AiohttpTransport({self._shown!r})"

    def _make_client(self) -> Any:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, connect=self._timeout, sock_connect=self._timeout,
                                        sock_read=self._timeout)
        connector = aiohttp.TCPConnector(limit=_MAX_CONNECTIONS, ssl=_ssl_context())
        # no session-wide headers: aiohttp would send those to a proxy too (the key as its
        # Proxy-Authorization); each request carries its own
        return aiohttp.ClientSession(connector=connector, timeout=timeout)

    def _aiohttp_sessions(self, client: Any) -> list:
        return [client]

    def _request_headers(self) -> Any:
        """The request headers, made once (a CIMultiDict, which aiohttp takes without copying
        it into a new one) and kept in a `Secret`."""
        if self._headers is None:
            import aiohttp
            from multidict import CIMultiDict

            headers = default_headers(self._authorization.reveal())
            headers["User-Agent"] = f"decomp-lang aiohttp/{aiohttp.__version__}"
            self._headers = Secret(CIMultiDict({**headers, **(self._proxy_auth or {})}))
        return self._headers.reveal()

    def _url(self, path: str) -> Any:
        url = self._urls.get(path)
        if url is None:
            from yarl import URL

            url = self._urls[path] = URL(self._base + path + (f"?{self._query}" if self._query else ""))
        return url

    async def post(self, path: str, body: dict) -> bytes:
        """One attempt: the 2xx reply's body, or one of this module's failures."""
        import aiohttp

        if self._invalid is not None:
            raise InvalidEndpoint(self._invalid)
        loop = asyncio.get_running_loop()
        session = self.client if self._loop is loop else await self._open(loop)
        payload = _ENCODE(body).encode()
        slot = CURRENT_SLOT.get()
        if slot is not None:
            await slot.acquire()
        try:
            response = await session.post(self._url(path), data=payload, headers=self._request_headers(),
                                          proxy=self._proxy, proxy_headers=self._proxy_headers)
            try:
                if slot is not None:
                    slot.release()  # the reply's headers are here: the server is done
                raw = await response.read()
            finally:
                response.release()
        except TimeoutError as exc:  # aiohttp's connect and read timeouts are TimeoutErrors
            raise ConnectionFailure(exc, True) from None
        except (aiohttp.ClientError, ValueError) as exc:
            if _rejected_url(exc):
                raise InvalidEndpoint("the HTTP client rejects it") from None
            if not isinstance(exc, aiohttp.ClientError):  # a request aiohttp will not make
                raise ClientFailure(f"{type(exc).__name__}: {exc}") from None
            raise _client_error(exc) from None  # no connection, a dropped one, a reply that is not HTTP
        if not 200 <= response.status < 300:
            raise StatusFailure(response.status, response.headers, error_body(raw))
        return raw


# ---- the openai client
class OpenAIClientTransport(_PerLoopClient):
    """POSTs with the official client (`openai.AsyncOpenAI`, no retries, its aiohttp transport),
    whose event hooks take and give back the slot."""

    name = "openai"

    def __init__(self, base_url: str | None, key: Secret[str], timeout: float):
        super().__init__()
        self._shown = redact_url(base_url or OPENAI_BASE_URL)
        self._given = base_url is not None  # else the client's own default
        self._base, query, self._authorization, self._invalid = _endpoint(base_url, key)
        self._query = f"?{query}" if query else ""
        self._key, self._timeout = key, timeout
        # user-info as Basic auth goes with each request, over the client's `Bearer unused`
        self._basic = self._authorization is not None and self._authorization.reveal().startswith("Basic ")

    def __repr__(self) -> str:
        return f"OpenAIClientTransport({self._shown!r})"

    def _make_client(self) -> Any:
        import openai

        hooks = {"request": [_take_slot], "response": [_give_back_slot]}
        http = openai.DefaultAioHttpClient(timeout=self._timeout, event_hooks=hooks)
        try:
            return openai.AsyncOpenAI(api_key=self._key.reveal(), base_url=self._base if self._given else None,
                                      timeout=self._timeout, max_retries=0, http_client=http)
        except Exception as exc:  # the client parses the base URL as it is made
            if _rejected_url(exc):
                raise InvalidEndpoint("the HTTP client rejects it") from None
            raise

    def _aiohttp_sessions(self, client: Any) -> list:
        """The aiohttp sessions under the openai client (its httpx client's transports)."""
        import aiohttp

        http = getattr(client, "_client", None)
        transports = [getattr(http, "_transport", None), *(getattr(http, "_mounts", None) or {}).values()]
        sessions = [getattr(transport, "client", None) for transport in transports]
        return [session for session in sessions if isinstance(session, aiohttp.ClientSession)]

    async def post(self, path: str, body: dict) -> str:
        import openai

        if self._invalid is not None:
            raise InvalidEndpoint(self._invalid)
        loop = asyncio.get_running_loop()
        client = self.client if self._loop is loop else await self._open(loop)
        options = {"headers": {"Authorization": self._authorization.reveal()}} if self._basic else {}
        try:
            # the client's low-level post: its auth, base URL, pool and errors, without building
            # typed request and response models (20% less CPU per call than the typed calls);
            # the query string after the path, where the client keeps it
            return await client.post(path + self._query, body=body, cast_to=str, options=options)
        except openai.APIStatusError as exc:
            raise StatusFailure(exc.status_code, exc.response.headers, exc.body) from None
        except openai.APITimeoutError as exc:
            # aiohttp's connection errors (refused, DNS, TLS, a dropped connection) reach the
            # client as timeouts too: only a real timeout underneath counts as one
            raise ConnectionFailure(exc, _timed_out(exc)) from None
        except openai.APIConnectionError as exc:
            if _rejected_url(exc):
                raise InvalidEndpoint("the HTTP client rejects it") from None
            raise ConnectionFailure(exc, False) from None
        except openai.APIResponseValidationError:
            raise MalformedReply("the reply does not match the API") from None
        except openai.OpenAIError as exc:
            raise ClientFailure(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # the client lets some of aiohttp's errors through unwrapped
            if _rejected_url(exc):
                raise InvalidEndpoint("the HTTP client rejects it") from None
            if type(exc).__module__.startswith("aiohttp"):
                raise _client_error(exc) from None
            if isinstance(exc, ValueError):  # a request the client will not make
                raise ClientFailure(f"{type(exc).__name__}: {exc}") from None
            raise


def _client_error(exc: Exception) -> Exception:
    """An aiohttp error as this module's failure: a reply that is not HTTP is malformed; the
    rest (no connection, a dropped one, a refusing proxy, redirects without end) is no reply."""
    import aiohttp

    if type(exc) is aiohttp.ClientResponseError:  # its subclasses are proxy, redirect, ... errors
        return MalformedReply(exc.message)
    return ConnectionFailure(exc, False)


def _cut_short(exc: BaseException) -> str | None:
    """What was missing of a reply that ended early (aiohttp's payload errors: fewer bytes than
    its Content-Length, a chunked body without its last chunk), in aiohttp's words; None when
    `exc` is no such error."""
    import aiohttp
    from aiohttp.http_exceptions import HttpProcessingError

    chain = _chain(exc)
    for err in chain:
        if isinstance(err, HttpProcessingError) and err.message:
            return " ".join(str(err.message).split()).rstrip(".")
    if any(isinstance(err, aiohttp.ClientPayloadError) for err in chain):
        return "the reply's body ended early"
    return None


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout is what ended the wait, below the client's APITimeoutError."""
    for err in _chain(exc):
        if isinstance(err, TimeoutError):
            return True
        if isinstance(err, OSError) or type(err).__module__.startswith("aiohttp"):
            return False
    return True


async def _take_slot(request) -> None:
    slot = CURRENT_SLOT.get()
    if slot is not None:
        await slot.acquire()


async def _give_back_slot(response) -> None:
    slot = CURRENT_SLOT.get()
    if slot is not None:
        slot.release()


def make_transport(name: str, base_url: str | None, key: Secret[str], timeout: float):
    """The transport called `name` ("auto" is `DEFAULT_TRANSPORT`)."""
    cls = OpenAIClientTransport if (DEFAULT_TRANSPORT if name == "auto" else name) == "openai" else AiohttpTransport
    return cls(base_url, key, timeout)


# ---- environment: proxies and trust store, as httpx reads them (trust_env)
def _env_proxy(base_url: str) -> tuple[str | None, dict | None]:
    """The proxy HTTP(S)_PROXY / ALL_PROXY names for `base_url`, unless NO_PROXY exempts its
    host, and its Proxy-Authorization header when its URL carries a user and password."""
    import base64
    import urllib.request
    from urllib.parse import unquote

    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None, None
    if "://" not in proxy:
        proxy = f"http://{proxy}"
    found = urlsplit(proxy)
    if found.username is None:
        return proxy, None
    user_pass = f"{unquote(found.username)}:{unquote(found.password or '')}".encode()
    bare = found._replace(netloc=found.netloc.rpartition("@")[2]).geturl()
    return bare, {"Proxy-Authorization": "Basic " + base64.b64encode(user_pass).decode()}


_SSL: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    """One verifying context for every session: the system's CA store, or SSL_CERT_FILE /
    SSL_CERT_DIR when set (OpenSSL reads them)."""
    global _SSL
    if _SSL is None:
        _SSL = ssl.create_default_context()
    return _SSL


# ---- why no connection was made
def connect_failure(exc: BaseException, host: str) -> tuple[str, bool] | None:
    """Why no connection was made, from the OS or TLS error in `exc`'s chain, and whether the
    failure is final: ('connection refused', True). None when there is no such error (a
    timeout). Final: a host name that does not exist, a refused connection, a TLS handshake or
    certificate error; a temporary DNS failure, a reset or an unreachable network is retried."""
    chain = _chain(exc)
    for err in reversed(chain):  # the innermost error says most
        if isinstance(err, ssl.SSLCertVerificationError):
            return f"TLS certificate rejected: {getattr(err, 'verify_message', None) or err.strerror or err}", True
        if isinstance(err, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return f"TLS connection closed: {err.strerror or err}", False
        if isinstance(err, ssl.SSLError):
            reason = getattr(err, "reason", None)
            hint = "; is it an http:// endpoint?" if reason == "WRONG_VERSION_NUMBER" else ""
            return f"TLS handshake failed: {reason or err.strerror or err}{hint}", True
        if isinstance(err, socket.gaierror):
            if err.errno == socket.EAI_AGAIN:
                return f"name lookup of {host} failed: {err.strerror or err}", False
            return f"no such host name: {host}", True
        if isinstance(err, ConnectionRefusedError):
            return "connection refused", True
    for err in chain:
        if isinstance(err, OSError) and not isinstance(err, TimeoutError):
            return str(err) or type(err).__name__, False
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what lies beneath it: causes, contexts and aiohttp's `os_error`s (16 at most)."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 16:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__ or getattr(seen, "os_error", None)
    return chain
