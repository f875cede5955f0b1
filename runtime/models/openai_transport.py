"""How `OpenAIModel` sends one request: the two transports behind `transport=`.

- `aiohttp` (the default): one `aiohttp.ClientSession` per model and event loop, its headers
  and URLs built once, the JSON written with the standard library. About a quarter of the
  client CPU per request of the openai client (benchmarks/client_cpu.py: 0.15 against 0.6 ms
  at 64 in flight).
- `openai`: the official client's low-level `post` (its auth, base URL, pool and errors), on its
  own aiohttp transport (`DefaultAioHttpClient`).

Both send the same body and headers that matter (the same JSON, `Authorization: Bearer KEY`,
`OpenAI-Organization`/`OpenAI-Project` from the environment), use the same per-phase timeouts
(connect, pool and read, each `timeout` seconds), honour HTTP(S)_PROXY/NO_PROXY and the
SSL_CERT_FILE/SSL_CERT_DIR trust stores, never retry, and take the scheduler slot just before
the request leaves and give it back as the reply's headers arrive (see `Slot`).

They report failures as the few transport-neutral exceptions below; `OpenAIModel` turns those
into the one set of `ModelError` messages, so both transports fail with the same words.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
from typing import Any, Mapping
from urllib.parse import urlsplit

from decomp.dsl.redact import redact_url
from decomp.runtime.models.base import CURRENT_SLOT

TRANSPORTS = ("auto", "aiohttp", "openai")
DEFAULT_TRANSPORT = "aiohttp"
OPENAI_BASE_URL = "https://api.openai.com/v1"
# the openai client's (and httpx's) JSON: compact, UTF-8, no NaN
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_MAX_CONNECTIONS = 1000  # the openai client's own pool limit; the scheduler bounds what is in flight


class Secret:
    """Holds the API key so that no repr, vars() dump or f-string shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
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
    whether a timeout ended the wait, `reason` the stack's own words for it."""

    def __init__(self, error: BaseException, timed_out: bool):
        super().__init__(type(error).__name__)
        cause = error.__cause__ or error
        self.error, self.timed_out = error, timed_out
        self.reason = str(cause) or type(cause).__name__


class MalformedReply(Exception):
    """A reply the client could not read as HTTP or as the API's shape."""


class ClientFailure(Exception):
    """Any other error of the client library (its type and message)."""


def error_body(raw: bytes | str) -> object:
    """A failed reply's body as the openai client keeps it: the JSON's "error" member (or the
    whole JSON), else the stripped text."""
    text = (raw.decode(errors="replace") if isinstance(raw, bytes) else raw).strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    return data.get("error", data) if isinstance(data, dict) else data


def default_headers(key: str) -> dict[str, str]:
    """Authorization and the openai client's optional organization and project headers."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
               "Accept": "application/json"}
    for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
        if os.environ.get(variable):
            headers[header] = os.environ[variable]
    return headers


# ---- the lean transport
class AiohttpTransport:
    """POSTs with one pooled `aiohttp.ClientSession` (made on first use, again on a new event
    loop: a pooled connection cannot outlive its loop)."""

    name = "aiohttp"

    def __init__(self, base_url: str | None, key: Secret, timeout: float):
        self._base = (base_url or OPENAI_BASE_URL).rstrip("/")
        self._key = key
        self._timeout = timeout
        self._proxy, proxy_auth = _env_proxy(self._base)
        # a plain-HTTP request goes to the proxy as it is; an https one through a CONNECT request
        self._proxy_auth = proxy_auth if self._base.startswith("http:") else None
        self._proxy_headers = proxy_auth if self._base.startswith("https:") else None
        self.client: Any = None  # the aiohttp.ClientSession
        self._loop: asyncio.AbstractEventLoop | None = None
        self._urls: dict[str, Any] = {}
        self._request_headers: Any = None

    def __repr__(self) -> str:
        return f"AiohttpTransport({redact_url(self._base)!r})"

    def _session_now(self) -> Any:
        loop = asyncio.get_running_loop()
        if self.client is None or self._loop is not loop:
            import aiohttp

            timeout = aiohttp.ClientTimeout(total=None, connect=self._timeout, sock_connect=self._timeout,
                                            sock_read=self._timeout)
            connector = aiohttp.TCPConnector(limit=_MAX_CONNECTIONS, ssl=_ssl_context())
            # no session-wide headers: aiohttp would send those to a proxy too (the key as its
            # Proxy-Authorization); each request carries its own
            self.client = aiohttp.ClientSession(connector=connector, timeout=timeout)
            self._loop = loop
        return self.client

    def _headers(self) -> Any:
        """The request headers, made once (a CIMultiDict, which aiohttp takes without copying
        it into a new one)."""
        if self._request_headers is None:
            import aiohttp
            from multidict import CIMultiDict

            headers = default_headers(self._key.reveal())
            headers["User-Agent"] = f"decomp-lang aiohttp/{aiohttp.__version__}"
            self._request_headers = CIMultiDict({**headers, **(self._proxy_auth or {})})
        return self._request_headers

    def _url(self, path: str) -> Any:
        url = self._urls.get(path)
        if url is None:
            from yarl import URL

            url = self._urls[path] = URL(self._base + path)
        return url

    async def post(self, path: str, body: dict) -> bytes:
        """One attempt: the 2xx reply's body, or one of this module's failures."""
        import aiohttp

        session, payload = self._session_now(), _ENCODE(body).encode()
        slot = CURRENT_SLOT.get()
        if slot is not None:
            await slot.acquire()
        try:
            response = await session.post(self._url(path), data=payload, headers=self._headers(),
                                          proxy=self._proxy, proxy_headers=self._proxy_headers)
            try:
                if slot is not None:
                    slot.release()  # the reply's headers are here: the server is done
                raw = await response.read()
            finally:
                response.release()
        except TimeoutError as exc:  # aiohttp's connect and read timeouts are TimeoutErrors
            raise ConnectionFailure(exc, True) from None
        except aiohttp.ClientError as exc:  # no connection, a dropped one, a reply that is not HTTP
            raise _client_error(exc) from None
        if not 200 <= response.status < 300:
            raise StatusFailure(response.status, response.headers, error_body(raw))
        return raw

    async def aclose(self) -> None:
        client, self.client, self._loop = self.client, None, None
        if client is not None:
            await client.close()


# ---- the openai client
class OpenAIClientTransport:
    """POSTs with the official client (`openai.AsyncOpenAI`, no retries, its aiohttp transport),
    whose event hooks take and give back the slot."""

    name = "openai"

    def __init__(self, base_url: str | None, key: Secret, timeout: float):
        self._base_url, self._key, self._timeout = base_url, key, timeout
        self.client: Any = None  # the openai.AsyncOpenAI
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAIClientTransport({redact_url(self._base_url or OPENAI_BASE_URL)!r})"

    def _client_now(self) -> Any:
        loop = asyncio.get_running_loop()
        if self.client is None or self._loop is not loop:
            import openai

            hooks = {"request": [_take_slot], "response": [_give_back_slot]}
            http = openai.DefaultAioHttpClient(timeout=self._timeout, event_hooks=hooks)
            self.client = openai.AsyncOpenAI(api_key=self._key.reveal(), base_url=self._base_url,
                                             timeout=self._timeout, max_retries=0, http_client=http)
            self._loop = loop
        return self.client

    async def post(self, path: str, body: dict) -> str:
        import openai

        client = self._client_now()
        try:
            # the client's low-level post: its auth, base URL, pool and errors, without building
            # typed request and response models (20% less CPU per call than the typed calls)
            return await client.post(path, body=body, cast_to=str)
        except openai.APIStatusError as exc:
            raise StatusFailure(exc.status_code, exc.response.headers, exc.body) from None
        except openai.APITimeoutError as exc:
            # aiohttp's connection errors (refused, DNS, TLS, a dropped connection) reach the
            # client as timeouts too: only a real timeout underneath counts as one
            raise ConnectionFailure(exc, _timed_out(exc)) from None
        except openai.APIConnectionError as exc:
            raise ConnectionFailure(exc, False) from None
        except openai.APIResponseValidationError:
            raise MalformedReply("the reply does not match the API") from None
        except openai.OpenAIError as exc:
            raise ClientFailure(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # the client lets some of aiohttp's errors through unwrapped
            if type(exc).__module__.startswith("aiohttp"):
                raise _client_error(exc) from None
            raise

    async def aclose(self) -> None:
        client, self.client, self._loop = self.client, None, None
        if client is not None:
            await client.close()


def _client_error(exc: Exception) -> Exception:
    """An aiohttp error as this module's failure: a reply that is not HTTP is malformed; the
    rest (no connection, a dropped one, a refusing proxy, redirects without end) is no reply."""
    import aiohttp

    if type(exc) is aiohttp.ClientResponseError:  # its subclasses are proxy, redirect, ... errors
        return MalformedReply(exc.message)
    return ConnectionFailure(exc, False)


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


def make_transport(name: str, base_url: str | None, key: Secret, timeout: float):
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
