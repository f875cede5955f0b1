"""A corpus to index: JSON lines `{"id": ..., "title": ..., "text": ...}`, one paragraph a line.

`text` is required (a non-empty string); `title` is optional (a string, or null); `id` is
optional (a string or an integer): without one a paragraph is known by its title, or, without a
title, by `FILE:LINE`. Blank lines are skipped. A bad line is a `CorpusError` naming the file
and the line, unless the reader skips bad lines, counting them (`--skip-bad`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from decomp.dsl.errors import DecompError


class CorpusError(DecompError, ValueError):
    """A corpus line that cannot be indexed (or a corpus that cannot be read)."""


@dataclass(frozen=True)
class Record:
    id: str
    title: str
    text: str

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "text": self.text}


@dataclass
class ReadStats:
    """What reading a corpus found: records read, bad lines skipped (the first few with their
    messages), and bytes read so far (for a progress bar)."""

    records: int = 0
    skipped: int = 0
    bytes_read: int = 0
    problems: list[str] = field(default_factory=list)

    KEEP = 5

    def skip(self, message: str) -> None:
        self.skipped += 1
        if len(self.problems) < self.KEEP:
            self.problems.append(message)


def read_corpus(path: str | Path, *, skip_bad: bool = False, stats: ReadStats | None = None) -> Iterator[Record]:
    """The records of a JSON-lines corpus, in file order. A bad line raises `CorpusError`
    (`FILE:LINE: ...`), or with `skip_bad` is counted in `stats` and left out."""
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    try:
        handle = path.open("rb")
    except OSError as err:
        raise CorpusError(f"cannot read the corpus {path}: {err.strerror or err}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            stats.bytes_read += len(raw)
            if not raw.strip():
                continue
            try:
                record = parse_line(raw, path, number)
            except CorpusError as err:
                if not skip_bad:
                    raise
                stats.skip(str(err))
                continue
            stats.records += 1
            yield record


def parse_line(raw: bytes | str, path: Path, number: int) -> Record:
    """One corpus line as a `Record`, or a `CorpusError` saying what is wrong with it."""
    where = f"{path}:{number}"
    try:
        row = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise CorpusError(f"{where}: not a JSON line ({err})") from None
    except RecursionError:  # Python's reader stops about a thousand levels down: no paragraph nests so
        raise CorpusError(f"{where}: not a corpus line: lists or objects nested too deeply to read "
                          "(about a thousand levels)") from None
    if not isinstance(row, dict):
        raise CorpusError(f"{where}: a corpus line is a JSON object with \"text\" (and \"id\", \"title\"), "
                          f"not {type(row).__name__}")
    text = row.get("text")
    if not isinstance(text, str) or not text.strip():
        found = "no \"text\"" if text is None else "an empty \"text\"" if isinstance(text, str) else \
            f"a \"text\" that is {type(text).__name__}, not a string"
        raise CorpusError(f"{where}: the paragraph has {found}")
    title = row.get("title")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise CorpusError(f"{where}: \"title\" is {type(title).__name__}, not a string")
    ident = row.get("id")
    if isinstance(ident, bool) or not isinstance(ident, (str, int, type(None))):
        raise CorpusError(f"{where}: \"id\" is {type(ident).__name__}, not a string or an integer")
    for name, value in (("id", ident), ("title", title), ("text", text)):
        found = _SURROGATE.search(value) if isinstance(value, str) else None
        if found:
            raise CorpusError(f"{where}: \"{name}\" holds text no encoding can write (the lone surrogate "
                              f"\\u{ord(found.group()):04x} at character {found.start() + 1}); an index stores "
                              "UTF-8 text")
    if ident is None or ident == "":
        ident = title.strip() or f"{path.name}:{number}"
    return Record(str(ident), title.strip(), text.strip())


_SURROGATE = re.compile("[\ud800-\udfff]")
