"""Credentials taken out of URLs before they are written or printed.

An endpoint given as `--base-url https://KEY@host/v1` or `https://host/v1?api-key=KEY` carries
its secret in the URL itself. The real URL is still what requests go to; everywhere a URL is
recorded (run.json, results, traces, messages) it goes through `redact_url` first:

    redact_url("https://user:pw@host:8000/v1?api-key=s3cret&x=1#frag")
    -> "https://***@host:8000/v1?api-key=***&x=***"

The user-info part (user and password) becomes `***`, each query value `***` (its name is
kept: it says which parameter was given; a bare `?KEY` is masked whole), a fragment is
dropped. A URL that cannot be parsed comes back as `<a URL that cannot be parsed>`: never the
text itself.

`url_secrets(url)` lists the secret pieces of a URL (user, password, query values; each as
written and percent-decoded) for code that scrubs secrets out of free text, such as an HTTP
library's error message that quotes the URL it called.

`SecretMask` masks known secrets in free text that may quote them, such as a model's reply: each
secret of `MIN_MASKED` characters or more is replaced by `[redacted: LABEL]`, the label saying
what it was (`OPENAI_API_KEY`), never what it held:

    mask = SecretMask({"sk-live-0123456789": "OPENAI_API_KEY"})
    mask("my key is sk-live-0123456789.")  ->  "my key is [redacted: OPENAI_API_KEY]."
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

__all__ = ["MASK", "MIN_MASKED", "SecretMask", "redact_url", "url_secrets"]

MASK = "***"
#: Query values shorter than this are not treated as secrets by `url_secrets` (scrubbing "1" or
#: "v1" out of every message would garble them; a credential is longer).
MIN_SECRET = 4
_UNPARSEABLE = "<a URL that cannot be parsed>"


def redact_url(url: str | None) -> str | None:
    """`url` without its credentials: user-info and query values masked, fragment dropped (see
    the module's docstring). None stays None; a URL with nothing to hide is returned as it is."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return _UNPARSEABLE
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = _masked_query(parts.query)
    if (netloc, query, parts.fragment) == (parts.netloc, parts.query, ""):
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query, fragment=""))


def _masked_query(query: str) -> str:
    if not query:
        return ""
    masked = []
    for piece in query.split("&"):
        name, sep, value = piece.partition("=")
        if sep:
            masked.append(f"{name}={MASK}" if value else piece)
        else:  # a bare piece (`?KEY`) may be the secret itself
            masked.append(MASK if piece else piece)
    return "&".join(masked)


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The pieces of `url` that `redact_url` hides and that may be secrets, as written and
    percent-decoded: the user, the password, each query value of `MIN_SECRET` characters or
    more, the fragment. Empty for None or a URL that cannot be parsed."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    found: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo:
        user, _, password = userinfo.partition(":")
        found += [user, password, userinfo]
    for piece in parts.query.split("&") if parts.query else ():
        name, sep, value = piece.partition("=")
        found.append(value if sep else name)
    found.append(parts.fragment)
    pieces = []
    for secret in found:
        pieces += [secret, unquote(secret), quote(unquote(secret), safe="")]
    for _, value in parse_qsl(parts.query, keep_blank_values=False):
        pieces.append(value)
    return tuple(dict.fromkeys(p for p in pieces if len(p) >= MIN_SECRET))


#: Secrets shorter than this are never masked in free text by `SecretMask`: a short one ("unused",
#: "x", a 4-digit query value) is an ordinary word, and masking it would garble every text that
#: has it; a real credential is longer.
MIN_MASKED = 8


class SecretMask:
    """Known secrets, each with a label, masked in free text as `[redacted: LABEL]` (see the
    module's docstring). Secrets shorter than `MIN_MASKED` are ignored; overlapping ones are
    masked longest first, in one pass (a marker is never masked again). Neither its repr nor its
    str shows a secret."""

    __slots__ = ("_labels", "_pattern")

    def __init__(self, secrets: Mapping[str, str] | None = None):
        self._labels: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None
        self.add(secrets or {})

    def add(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        """Learn more secrets (`{secret: label}`); a secret known already keeps its first label."""
        pairs = secrets.items() if isinstance(secrets, Mapping) else secrets
        fresh = {s: label for s, label in pairs if isinstance(s, str) and len(s) >= MIN_MASKED
                 and s not in self._labels}
        if fresh:
            self._labels.update(fresh)
            longest_first = sorted(self._labels, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, longest_first)))

    def __call__(self, text: str) -> str:
        """`text` with every known secret in it replaced by `[redacted: LABEL]`."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda found: f"[redacted: {self._labels[found.group()]}]", text)

    def __len__(self) -> int:
        return len(self._labels)

    def __repr__(self) -> str:
        return f"SecretMask({len(self._labels)} secrets)"
