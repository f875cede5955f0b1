"""Reading and checking a fake model's JSON file, with every problem positioned.

    spec = read_fake_file("answers.json")   # raises FakeFileError listing every problem
    spec.answers, spec.mapping, spec.script, spec.default, spec.patterns

A fake model file is one JSON object with the keys `answers` (a list of replies, used in
order), `mapping` (text -> reply), `script` (question -> the decomposer's lines), `default`
(a reply) and `patterns` (a list of `{"match": REGEX, "answer": TEMPLATE}` or
`{"match": REGEX, "steps": [TEMPLATE, ...]}`; see `decomp.runtime.testing.fake`). A bad regex,
a template naming a group its regex lacks, an unknown key, a duplicated key or a value of the
wrong type is a `FakeFileError` naming the file, line and column of the offending value.

The positions come from the standard library's own JSON parser (`json.scanner.py_make_scanner`
with `json.decoder.JSONObject` and `JSONArray` wrapped), so a file reads as `json.loads` reads it.
Source lines are shown under a message only for a file that is a fake model's (its keys are all
known): the text of any other file (a secret a path points at by mistake) is never echoed.
"""
from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from decomp.dsl.errors import ModelError
from decomp.dsl.nodes import Span

KEYS = ("answers", "mapping", "script", "default", "patterns")
_PATTERN_KEYS = ("match", "answer", "steps")


@dataclass(frozen=True)
class Pattern:
    """A regular expression over the last question and what to reply when it matches: one
    `answer` template, or the decomposer's `steps` (one template per `QS:` line). Templates
    are expanded with `re.Match.expand` (`\\1`, `\\g<name>`)."""

    regex: re.Pattern
    answer: str | None = None
    steps: tuple[str, ...] | None = None

    @classmethod
    def make(cls, match: str, answer: str | None = None, steps: list[str] | tuple[str, ...] | None = None) -> "Pattern":
        """A checked pattern; raises ValueError for a bad regex, a bad template, or not exactly
        one of `answer` and `steps`."""
        if (answer is None) == (steps is None):
            raise ValueError(f"pattern {match!r} needs exactly one of 'answer' and 'steps'")
        regex = compile_regex(match)
        for template in [answer] if answer is not None else steps:
            problem = template_problem(regex, template)
            if problem is not None:
                raise ValueError(f"pattern {match!r}: template {template!r}: {problem[0]}")
        return cls(regex, answer, tuple(steps) if steps is not None else None)

    def identity(self) -> list:
        """What decides this pattern's replies (for a fake model's cache identity)."""
        return [self.regex.pattern, self.regex.flags, self.answer, list(self.steps) if self.steps else None]


def compile_regex(text: str) -> re.Pattern:
    """`re.compile(text)`; re.error for a bad one (RecursionError too, nested too deep)."""
    try:
        return re.compile(text)
    except RecursionError:
        raise re.error("nested too deeply", text, 0) from None


def template_problem(regex: re.Pattern, template: str) -> tuple[str, int | None] | None:
    """Why `template` cannot be expanded on a match of `regex` (a group it lacks, a bad escape)
    and where in the template, or None. Tried on a match of the empty string by the regex with
    an empty alternative added (same groups, all unmatched)."""
    try:
        empty = re.compile(regex.pattern + "\n|", regex.flags).match("")
        empty.expand(template)
    except re.error as err:
        return err.msg, err.pos
    except IndexError as err:  # an unknown \g<name>
        return str(err), None
    return None


@dataclass
class FakeSpec:
    """A fake model file's content, checked."""

    answers: list[str] = field(default_factory=list)
    mapping: dict[str, str] = field(default_factory=dict)
    script: dict[str, list[str]] = field(default_factory=dict)
    default: str | None = None
    patterns: list[Pattern] = field(default_factory=list)

    def summary(self) -> dict[str, int | bool]:
        """How many patterns, scripts, mapping keys and answers, and whether there is a default."""
        return {"patterns": len(self.patterns), "scripts": len(self.script), "mapping": len(self.mapping),
                "answers": len(self.answers), "default": self.default is not None}

    def counts(self) -> str:
        """`2 patterns, 1 script, 3 answers, ...`: what the file holds, for `decomp check`."""
        parts = [(len(self.patterns), "pattern"), (len(self.script), "script"), (len(self.mapping), "mapping key"),
                 (len(self.answers), "answer")]
        text = [f"{n} {word}{'s' if n != 1 else ''}" for n, word in parts]
        return ", ".join(text + (["a default"] if self.default is not None else ["no default"]))


class FakeFileError(ModelError):
    """Every problem of a fake model file (`errors`, each positioned), as one ModelError."""

    def __init__(self, errors: list[ModelError]):
        self.errors = sorted(errors, key=lambda e: (e.span.line, e.span.column) if e.span else (0, 0))
        super().__init__(self.errors[0].message, self.errors[0].span)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def format(self) -> str:
        return "\n".join(e.format() for e in self.errors)


class _Unechoed(ModelError):
    """A positioned problem whose source line is not shown (a file that may not be a fake's)."""

    def format(self) -> str:
        return str(self) + (f"\n    expected {self.expected}" if self.expected else "")


# ---- positions ----------------------------------------------------------------------------------

@dataclass
class Node:
    """A JSON value and where it is in the text (offsets, end exclusive). An object's value is a
    list of (key, key offset, Node), duplicates kept; an array's a list of Nodes."""

    value: Any
    start: int
    end: int


class _Object(list):
    """The (key, key offset, Node) pairs of a JSON object, in order."""


class _Array(list):
    """The Nodes of a JSON array, in order."""


def _located(scan_once: Callable) -> Callable:
    def scan(text: str, idx: int):
        value, end = scan_once(text, idx)
        return Node(value, idx, end), end
    return scan


def _parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None, *rest):
    text, start = s_and_end
    pairs, end = json.decoder.JSONObject(s_and_end, strict, _located(scan_once), object_hook, list, memo, *rest)
    found, at = _Object(), start
    for key, node in pairs:
        at = json.decoder.WHITESPACE.match(text, at).end()
        at = json.decoder.WHITESPACE.match(text, at + 1).end() if text[at] == "," else at
        found.append((key, at, node))
        at = node.end
    return found, end


def _parse_array(s_and_end, scan_once, *rest):
    values, end = json.decoder.JSONArray(s_and_end, _located(scan_once), *rest)
    return _Array(values), end


class _PositionedDecoder(json.JSONDecoder):
    """The standard decoder, its pure-Python scanner recording where every value is."""

    def __init__(self):
        super().__init__()
        self.parse_object = _parse_object
        self.parse_array = _parse_array
        self.scan_once = _located(json.scanner.py_make_scanner(self))


def parse_positioned(text: str) -> Node:
    """The JSON value of `text` as a tree of `Node`s; raises json.JSONDecodeError (or
    RecursionError for nesting too deep to follow)."""
    return _PositionedDecoder().decode(text)


def plain(node: Node) -> Any:
    """The Python value of a Node tree (as `json.loads` gives it; a duplicated key: the last)."""
    if isinstance(node.value, _Object):
        return {key: plain(value) for key, _, value in node.value}
    if isinstance(node.value, _Array):
        return [plain(value) for value in node.value]
    return node.value


# ---- checking ----------------------------------------------------------------------------------

def read_fake_file(path: str | Path) -> tuple[FakeSpec, bytes]:
    """The checked content of a fake model file and its bytes (what its cache identity hashes);
    raises FakeFileError with every problem, positioned."""
    try:
        raw = Path(path).read_bytes()
        text = raw.decode("utf-8")
    except (OSError, ValueError) as err:
        raise FakeFileError([ModelError(f"cannot read the fake model file {path}: "
                                        f"{getattr(err, 'strerror', None) or err}")]) from None
    return _Reader(str(path), text).spec(), raw


def is_fake_file(path: str | Path, text: str) -> bool:
    """Whether `decomp check` reads the file `path` (its content `text`) as a fake model file: a
    JSON object with one of its keys, or a `.json` file that is not JSON data at all (read as one
    to say where it breaks)."""
    return looks_like_fake_file(text) or (Path(path).suffix == ".json" and bool(text.strip())
                                          and not _json_data(text.strip()))


def _json_data(stripped: str) -> bool:
    """Whether `stripped` is a JSON array or object, or JSON Lines."""
    if stripped[0] not in "[{":
        return False
    return _parses(stripped) or all(_parses(line) for line in stripped.splitlines() if line.strip())


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # (nested past Python's stack: not JSON here)
        return False
    return True


def looks_like_fake_file(text: str) -> bool:
    """Whether `text` is a JSON object with at least one of a fake model file's keys."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and any(key in data for key in KEYS)


class _Reader:
    def __init__(self, file: str, text: str):
        self.file, self.text = file, text
        self.errors: list[ModelError] = []
        self.echo = False

    def spec(self) -> FakeSpec:
        try:
            root = parse_positioned(self.text)
        except json.JSONDecodeError as err:
            raise FakeFileError([_Unechoed(f"not JSON: {err.msg}", self._span(err.pos, err.pos + 1))]) from None
        except RecursionError:
            raise FakeFileError([_Unechoed("not a fake model file: nested too deeply", self._span(0, 1))]) from None
        if not isinstance(root.value, _Object):
            raise FakeFileError([_Unechoed("a fake model file holds one JSON object", self._span(root.start, root.end))])
        self.echo = all(key in KEYS for key, _, _ in root.value)
        spec = FakeSpec()
        for key, at, node in self._pairs(root, KEYS, "a fake model file"):
            getattr(self, f"_{key}")(spec, node)
        if self.errors:
            raise FakeFileError(self.errors)
        return spec

    # ---- the keys
    def _answers(self, spec: FakeSpec, node: Node) -> None:
        spec.answers = [n.value for n in self._items(node, "answers") if self._string(n, "an answer")]

    def _mapping(self, spec: FakeSpec, node: Node) -> None:
        spec.mapping = {key: n.value for key, _, n in self._pairs(node, None, "mapping")
                        if self._string(n, f"the mapping of {key!r}")}

    def _script(self, spec: FakeSpec, node: Node) -> None:
        for key, _, lines in self._pairs(node, None, "script"):
            items = self._items(lines, f"the script of {key!r}")
            if all([self._string(n, "a script line") for n in items]) and isinstance(lines.value, _Array):
                spec.script[key] = [n.value for n in items]

    def _default(self, spec: FakeSpec, node: Node) -> None:
        if node.value is None or self._string(node, "default"):
            spec.default = node.value

    def _patterns(self, spec: FakeSpec, node: Node) -> None:
        for item in self._items(node, "patterns"):
            pattern = self._pattern(item)
            if pattern is not None:
                spec.patterns.append(pattern)

    def _pattern(self, node: Node) -> Pattern | None:
        if not isinstance(node.value, _Object):
            return self._error("a pattern is an object {\"match\": REGEX, \"answer\": TEMPLATE} "
                               "or {\"match\": REGEX, \"steps\": [TEMPLATE, ...]}", node)
        fields = {key: value for key, _, value in self._pairs(node, _PATTERN_KEYS, "a pattern")}
        if "match" not in fields:
            return self._error("a pattern needs \"match\": a regular expression", node)
        if ("answer" in fields) == ("steps" in fields):
            return self._error("a pattern needs exactly one of \"answer\" (a template) and \"steps\" "
                               "(a list of templates)", node)
        regex = self._regex(fields["match"])
        if "answer" in fields:
            templates = [fields["answer"]] if self._string(fields["answer"], "\"answer\"") else []
        else:
            templates = [n for n in self._items(fields["steps"], "\"steps\"") if self._string(n, "a step")]
        if regex is None or not all([self._template(regex, t) for t in templates]):
            return None
        if "answer" in fields:
            return Pattern(regex, answer=fields["answer"].value) if templates else None
        steps = fields["steps"]
        if not isinstance(steps.value, _Array) or len(templates) != len(steps.value):
            return None
        return Pattern(regex, steps=tuple(t.value for t in templates))

    def _regex(self, node: Node) -> re.Pattern | None:
        if not self._string(node, "\"match\""):
            return None
        try:
            return compile_regex(node.value)
        except re.error as err:
            return self._error(f"bad regular expression: {err.msg}", node, err.pos)

    def _template(self, regex: re.Pattern, node: Node) -> bool:
        problem = template_problem(regex, node.value)
        if problem is None:
            return True
        self._error(f"bad template for the pattern {regex.pattern!r}: {problem[0]}", node, problem[1],
                    expected=_groups(regex))
        return False

    # ---- shapes
    def _pairs(self, node: Node, known: tuple[str, ...] | None, what: str) -> list[tuple[str, int, Node]]:
        if not isinstance(node.value, _Object):
            self._error(f"{what} must be a JSON object, not {_json_type(node.value)}", node)
            return []
        found, seen = [], set()
        for key, at, value in node.value:
            keyed = Node(key, at, json.decoder.scanstring(self.text, at + 1)[1])
            if key in seen:
                self._error(f"{what}: the key {key!r} is given twice", keyed)
            elif known is not None and key not in known:
                self._error(f"unknown key {key!r} in {what}", keyed, expected="one of: " + ", ".join(known))
            else:
                found.append((key, at, value))
            seen.add(key)
        return found

    def _items(self, node: Node, what: str) -> list[Node]:
        if not isinstance(node.value, _Array):
            self._error(f"{what} must be a JSON list, not {_json_type(node.value)}", node)
            return []
        return list(node.value)

    def _string(self, node: Node, what: str) -> bool:
        if isinstance(node.value, str):
            return True
        self._error(f"{what} must be a string, not {_json_type(node.value)}", node)
        return False

    def _error(self, message: str, node: Node, index: int | None = None, expected: str | None = None) -> None:
        start, end = node.start, node.end
        if index is not None and isinstance(node.value, str):
            start = _source_offset(self.text, node.start, index)
            end = start + 1
        cls = ModelError if self.echo else _Unechoed
        line = self.text.count("\n", 0, start)
        first = self.text.split("\n")[line] if self.echo else None
        self.errors.append(cls(message, self._span(start, end), expected=expected, line_text=first))
        return None

    def _span(self, start: int, end: int) -> Span:
        line, column = _line_column(self.text, start)
        end_line, end_column = _line_column(self.text, max(end, start + 1))
        return Span(self.file, line, column, end_line, end_column)


def _groups(regex: re.Pattern) -> str:
    """What a template of `regex` may name."""
    if not regex.groups:
        return "no group reference (the regular expression has no groups)"
    names = "".join(f", \\g<{name}>" for name in regex.groupindex)
    numbers = "\\1" if regex.groups == 1 else f"\\1 to \\{regex.groups}"
    return f"a group of the regular expression: {numbers}{names}"


def _line_column(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _source_offset(text: str, start: int, index: int) -> int:
    """The offset in `text` of character `index` of the JSON string literal at `start`."""
    at = start + 1
    for _ in range(index):
        if text[at] != "\\":
            at += 1
        elif text[at + 1] != "u":
            at += 2
        else:
            pair = 0xD800 <= int(text[at + 2:at + 6], 16) < 0xDC00 and text[at + 6:at + 8] == "\\u"
            at += 12 if pair else 6
    return at


def _json_type(value: Any) -> str:
    if isinstance(value, str):
        return "a string"
    if isinstance(value, _Object):
        return "an object"
    if isinstance(value, _Array):
        return "a list"
    if isinstance(value, bool):
        return "true or false"
    if value is None:
        return "null"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__
