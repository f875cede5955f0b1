"""Fuzz: hostile inputs through the parser's and the checker's entry points; crashes and hangs.

    python benchmarks/fuzz.py [--inputs 100000] [--seed 0] [--workers 2] [--limit 5] [--save DIR]
    python benchmarks/fuzz.py --replay 4711            # input 4711 of seed 0, with its traceback

Input i is made by its own `random.Random(f"{seed}:{i}")`, so any input can be replayed alone:

- grammar-aware mutations (1 to 6 of them) of a seed: the bundled `programs/**/*.decomp` files,
  their few-shot prompt files, the `QS:` lines in them, a few ADaPT plans and every file of
  `tests/dsl/fuzz_corpus/`. Seeds are cut into the grammar's tokens (strings, `QS:` marks,
  references, names, brackets, line ends), then tokens are deleted, repeated, swapped, replaced
  by others of the grammar or of other seeds, lines end in `\\r` or `\\r\\n`, stretches are
  wrapped in brackets or `if` blocks (up to hundreds deep), lines repeated (thousands of steps),
  the text cut short;
- generated extremes: `if` blocks, option lists, `not`, parentheses, comparisons, plan groups
  and JSON answers nested around and far past the nesting limit; programs with thousands of
  steps, few-shot files with thousands of examples, texts over the size limit;
- random bytes and random Unicode (lone surrogates included), and odd file names (bytes that
  are not UTF-8);
- the language server's input (`decomp lsp`, kind "frames"): streams of well-formed frames and
  hostile ones (negative, missing, non-numeric, disagreeing, zero and 999999999999-byte
  `Content-Length`s, `+N` ones whose lost body runs into the next header, more digits than
  `int()` reads, bodies over the size limit, stray bytes,
  header lines over the limit or not `Name: value`, bodies that are not UTF-8 or not JSON),
  some cut short or mutated byte by byte.

Each input goes through what `decomp check --json FILE` does (written to a file:
`check_file`, the JSON description, warnings and errors formatted), through the loader from
text (`Session.load(path, text)`: lone surrogates reach the parser), and through
`parse_module`, `parse_fewshot`, `parse_plan`, `read_plan` and `parse_step_line` as fits its
kind; a "frames" input through the server's reader (`decomp.editors.lsp.stdio.Frames`), which
must pass on every well-formed frame of a stream that was not mutated, in order, never a body
it refused, and answer every refusal with a JSON-RPC error whose id is null. A crash is any
exception that is not the project's own (`DecompError`); a hang is an
input that takes more than `--limit` seconds of CPU, 5 by default (each input goes through
four or five entry points, each reading it again: the largest generated ones, 3,000 broken
steps with 9,000 errors to format, take about 1 s alone and over 2 s on a busy machine; a
quadratic walk over them would take minutes) (one still running after 30 s of wall
time is interrupted and counted as a hang too).

Prints one JSON line: {"benchmark": "fuzz", "inputs", "crashes", "hangs", "seconds",
"slowest_s", "seed", "workers"}; each crash or hang is described on stderr (and its input saved
under --save DIR).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit  # noqa: E402

CORPUS = REPO / "tests" / "dsl" / "fuzz_corpus"
#: Mutated inputs stay under this size (the parser reads about 0.3 MB a second); the generated
#: extremes go a little past it (3,000 steps: 63 KB), and a few pass the size limit on purpose
#: (they must be refused at once).
MAX_INPUT = 48_000
WALL_LIMIT = 30.0

_TOKEN = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''
    r"|QS:|QC:|Q:|A:|# ?METADATA:|Step \d+:?|Execution Order:|\([A-Za-z_]\w*\)|\[[^\]\n]*\]"
    r"|#\w+|[A-Za-z_]\w*|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|==|!=|<=|>=|\r\n|\n|[ \t]+|.", re.S)

VOCABULARY = [
    "import", "model", "handler", "program", "main", "metric", "with", "if", "else", "not", "and", "or",
    "in", "len", "ok", "depth", "true", "false", "null", "max_depth", "file", "text", "examples",
    "(", ")", "[", "]", "{", "}", ",", "=", "==", "!=", "<", "<=", ">", ">=", ":", ".", "\\",
    "QS:", "QC:", "Q:", "A:", "# METADATA:", "Step 1:", "Step 2", "Execution Order:", "AND", "OR",
    "#1", "#2", "#0", "#question", "#x", "#99999999999999999999", "#", "[h]", "[EOQ]", "[]", "[ ]",
    "(foreach)", "(plan)", "(select)", "(project_values)", "(nope)", "(", "[split", "{{", "}}", "{%", "%}",
    '"x"', '""', '"""a\nb"""', '"""', "'''", 'r"\\d+"', '"\\u12"', '"\\ud800"', '"\\udfff x"', "'",
    '"', "1", "-2.5e3", "1e999", "99999999999999999999", "0.5", "-0",
    "\n", "\n\n", "\r", "\r\n", "\r\r", " ", "\t", "  ",
    "\x00", "\ufeff", "\u2028", "\x0c", "\x0b", "\u00a0", "é", "\U0001F600", "\udcff",
    'file="\\ud800.txt"', 'file="a\\u0000b.txt"', 'import "\\udcff.decomp"', 'import "../../../etc/passwd"',
    'handler p = program(file="\\ud800.decomp")\n', 'handler q = prompt(file="prompts/x.txt")\n',
]
# what a generated fragment can be made of (lone surrogates only in texts that never reach a file)
_ALPHABET = "abcXYZ019 _-#()[]{}:;,.=<>\"'\\\t\n\r\x00\ufeff\u2028é\U0001F600\ud800\udcff"
PLANS = [
    "Step 1: find the key\nStep 2: open the door\nExecution Order: (Step 1 AND Step 2)\n",
    "Step 1: a\nStep 2: b\nStep 3: c\nExecution Order: ((Step 1 OR Step 2) AND Step 3).\n",
    "Step 1: only\n",
]


# ---------------------------------------------------------------- seeds
def load_seeds() -> dict[str, list[str]]:
    """Texts by kind: "module", "fewshot", "step" (one line), "plan"."""
    seeds: dict[str, list[str]] = {"module": [], "fewshot": [], "step": [], "plan": list(PLANS)}
    for path in sorted((REPO / "programs").rglob("*.decomp")):
        seeds["module"].append(path.read_text(encoding="utf-8"))
    for path in sorted((REPO / "programs").rglob("*.txt")):
        text = path.read_text(encoding="utf-8")
        if re.search(r"^(QC|QS|Q|A):", text, re.M):
            seeds["fewshot"].append(text[:MAX_INPUT])
    for path in sorted(CORPUS.glob("*")) if CORPUS.is_dir() else ():
        if path.is_file() and path.suffix in (".decomp", ".txt", ".plan", ".step"):
            text = path.read_bytes().decode("utf-8", "surrogateescape")
            kind = {".decomp": "module", ".txt": "fewshot", ".plan": "plan", ".step": "step"}[path.suffix]
            seeds[kind].append(text[:MAX_INPUT])
    seeds["step"] += sorted({line for text in seeds["fewshot"] + seeds["module"]
                             for line in text.splitlines() if line.strip().startswith("QS:")})
    return seeds


# ---------------------------------------------------------------- inputs
def make_input(index: int, seed: int, seeds: dict[str, list[str]]) -> tuple[str, str | bytes, str]:
    """Input `index`: (kind, text or bytes, file name)."""
    rng = random.Random(f"{seed}:{index}")
    roll = rng.random()
    if roll < 0.60:
        kind = rng.choice(["module", "module", "fewshot", "fewshot", "step", "plan"])
        data = mutate(rng, rng.choice(seeds[kind]), seeds)
    elif roll < 0.70:
        kind, data = nested(rng)
    elif roll < 0.75:
        kind, data = wide(rng)
    elif roll < 0.83:
        kind = rng.choice(["module", "fewshot", "step", "plan"])
        data = rng.randbytes(rng.randrange(0, 600))
    elif roll < 0.91:
        kind = rng.choice(["module", "fewshot", "step", "plan"])
        data = "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 300)))
    elif roll < 0.925:
        return "frames", mutate_frames(rng, frames_input(rng)), "frames (mutated)"
    elif roll < 0.96:
        return "frames", frames_input(rng), "frames"
    elif roll < 0.997:
        a, b = rng.choice(["module", "fewshot"]), rng.choice(["module", "fewshot", "step"])
        kind, data = a, splice(rng, rng.choice(seeds[a]), rng.choice(seeds[b]))
    else:
        kind = rng.choice(["module", "fewshot"])
        data = too_long(rng, rng.choice(seeds[kind]))
    return kind, data, file_name(rng, kind)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def mutate(rng: random.Random, text: str, seeds: dict[str, list[str]]) -> str:
    """1 to 6 grammar-aware edits of `text`."""
    parts = tokens(text) or [""]
    for _ in range(rng.randint(1, 6)):
        parts = rng.choice(_EDITS)(rng, parts, seeds)
        if sum(map(len, parts)) > MAX_INPUT:
            break
    return "".join(parts)[:MAX_INPUT]


def _span(rng: random.Random, parts: list) -> tuple[int, int]:
    i = rng.randrange(len(parts) + 1)
    return i, min(len(parts), i + rng.choice([1, 1, 2, 3, 8, 40]))


def _delete(rng, parts, seeds):
    i, j = _span(rng, parts)
    return parts[:i] + parts[j:]


def _repeat(rng, parts, seeds):
    i, j = _span(rng, parts)
    return parts[:j] + parts[i:j] * rng.choice([1, 2, 5, 50, 300]) + parts[j:]


def _insert(rng, parts, seeds):
    i = rng.randrange(len(parts) + 1)
    return parts[:i] + [rng.choice(VOCABULARY)] + parts[i:]


def _replace(rng, parts, seeds):
    i = rng.randrange(len(parts)) if parts else 0
    return parts[:i] + [rng.choice(VOCABULARY)] + parts[i + 1:]


def _swap(rng, parts, seeds):
    if len(parts) > 1:
        i, j = rng.randrange(len(parts)), rng.randrange(len(parts))
        parts = list(parts)
        parts[i], parts[j] = parts[j], parts[i]
    return parts


def _graft(rng, parts, seeds):
    other = tokens(rng.choice(seeds[rng.choice(["module", "fewshot", "step", "plan"])]))
    a, b = _span(rng, other)
    i = rng.randrange(len(parts) + 1)
    return parts[:i] + other[a:b] + parts[i:]


def _line_ends(rng, parts, seeds):
    end = rng.choice(["\r", "\r\n", "\n\r", "\r\r\n"])
    share = rng.choice([1.0, 0.5, 0.1])
    return [end if p in ("\n", "\r\n") and rng.random() < share else p for p in parts]


def _wrap(rng, parts, seeds):
    i, j = _span(rng, parts)
    depth = rng.choice([1, 2, 3, 20, 99, 100, 101, 150, 400])
    opener, closer = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ("if #1 == 1 {\n", "\n}\n"),
                                 ("not ", ""), ("(#1 == 1 and ", ")"), ('"""', '"""')])
    return parts[:i] + [opener * depth] + parts[i:j] + [closer * depth] + parts[j:]


def _lines(rng, parts, seeds):
    lines = "".join(parts).split("\n")
    i = rng.randrange(len(lines))
    j = min(len(lines), i + rng.choice([1, 2, 4]))
    lines[i:j] = lines[i:j] * rng.choice([2, 10, 200, 2000])
    return tokens("\n".join(lines)[:MAX_INPUT])


def _cut(rng, parts, seeds):
    return parts[:rng.randrange(len(parts) + 1)]


def _chars(rng, parts, seeds):
    text = "".join(parts)
    if not text:
        return parts
    i = rng.randrange(len(text))
    return tokens(text[:i] + rng.choice(_ALPHABET) * rng.choice([1, 1, 3]) + text[i + 1:])


_EDITS = [_delete, _repeat, _insert, _insert, _replace, _replace, _swap, _graft, _line_ends, _wrap, _lines,
          _cut, _chars]


def splice(rng: random.Random, a: str, b: str) -> str:
    """The head of `a` and the tail of `b`, cut at line starts."""
    la, lb = a.split("\n"), b.split("\n")
    return "\n".join(la[:rng.randrange(len(la) + 1)] + lb[rng.randrange(len(lb) + 1):])[:MAX_INPUT]


def nested(rng: random.Random) -> tuple[str, str]:
    """A program, few-shot file or plan nested `depth` deep in one of the ways the grammar allows."""
    depth = rng.choice([1, 50, 99, 100, 101, 102, 200, 400, 1000, 3000])
    head = 'model default = "fake:none.json"\nhandler h = prompt(text="Q: x\\nA: y")\n'
    way = rng.choice(["if", "list", "not", "paren", "compare", "andor", "plan", "json", "meta", "module_json",
                      "raw_json", "template", "pattern", "query"])
    if way in _DEEP_OPTIONS:
        return "module", _DEEP_OPTIONS[way].replace("OPEN", "(" * depth).replace("CLOSE", ")" * depth)
    if way == "raw_json":
        return rng.choice(["module", "fewshot"]), "[" * depth + "1" + "]" * rng.choice([0, depth])
    if way == "if":
        body = "".join("  " * i + "if #1 == 1 {\n" for i in range(depth)) + "QS: [h] x\n" + "}\n" * depth
        return "module", head + "program p(q) {\n  QS: [h] #q\n" + body + "}\nmain p\n"
    if way == "list":
        return "module", head + "handler r = regex(pattern=\"a\", default=" + "[" * depth + "1" + "]" * depth + ")\n"
    condition = {"not": "not " * depth + "#1 == 1", "paren": "(" * depth + "#1 == 1" + ")" * depth,
                 "compare": "(" * depth + "#1" + " == 1)" * depth,
                 "andor": "(#1 == 1 and " * depth + "ok(#1)" + ")" * depth}.get(way)
    if condition is not None:
        return "module", head + "program p(q) {\n  QS: [h] #q\n  if " + condition + " {\n    QS: [h] y\n  }\n}\n"
    if way == "plan":
        order = "(Step 1 AND " * depth + "Step 2" + ")" * depth
        return "plan", f"Step 1: a\nStep 2: b\nExecution Order: {order}\n"
    value = "[" * depth + "1" + "]" * depth
    if way == "json":
        return "fewshot", f"QC: q\nQS: [h] x\nA: {value}\nQS: [EOQ]\n\nQ: a\nA: {value}\n"
    if way == "meta":
        return "fewshot", f"# METADATA: {{\"a\": {value}}}\nQ: a\nA: b\n"
    return "module", head.replace('text="Q: x\\nA: y"', f'text="Q: x\\nA: {value}"') + "program p(q) {\n  QS: [h] #q\n}\n"


#: options whose values other libraries parse (Jinja, regular expressions) and a step's query
_DEEP_OPTIONS = {
    "template": 'handler h = prompt(text="{{ OPEN1CLOSE }}")\nhandler x = executor(environment="e", text="{{ OPEN1CLOSE }}")\n',
    "pattern": 'handler r = regex(pattern="OPENaCLOSE")\nhandler p = prompt(text="Q: a", answer_regex="OPENaCLOSE")\n',
    "query": 'handler c = calculator()\nprogram p(q) {\n  QS: [c] OPEN1CLOSE\n}\nmain p\n',
}


def wide(rng: random.Random) -> tuple[str, str]:
    """Many steps, examples, handlers or errors in one text (linear work expected)."""
    n = rng.choice([100, 1000, 3000])
    way = rng.choice(["steps", "examples", "handlers", "errors", "refs"])
    if way == "steps":
        return "module", "handler h = calculator()\nprogram p(q) {\n" + "  QS: [h] #1\n" * n + "}\n"
    if way == "examples":
        return "fewshot", "Q: a\nA: b\n\n" * n
    if way == "handlers":
        return "module", "".join(f'handler h{i} = prompt(text="Q: {i}\\nA: b")\n' for i in range(min(n, 1000)))
    if way == "errors":
        return "module", "handler h = prompt(\n" * n
    return "module", "program p(q) {\n" + "  QS: [nope] #99 #q2\n" * n + "}\n"


def too_long(rng: random.Random, text: str) -> str:
    """A text just or far over the size limit (which must be refused at once)."""
    try:
        from decomp.dsl.limits import MAX_SOURCE_CHARS as size
    except ImportError:  # a version of the package before the limit: 1 MB
        size = 1_000_000
    text = text or "x\n"
    return (text * (size // len(text) + 2))[:size + rng.choice([1, 1000, 200_000])]


def file_name(rng: random.Random, kind: str) -> str:
    suffix = {"module": ".decomp", "fewshot": ".txt"}.get(kind, rng.choice([".decomp", ".txt"]))
    stem = rng.choice(["prog", "prog", "prog", "a b", "é", "x\udcff", "\udcfe\udcfd", "q\udc80", "\ud800", "nul\x00"])
    return stem + suffix


# ---------------------------------------------------------------- LSP framing
#: The body limit the "frames" inputs are read with (the server's is 64 MiB): past it is cheap here.
FRAME_LIMIT = 2048
_GOOD = re.compile(rb'"id": (\d+), "method": "fuzz/good"')
_STRAY = b"abc {}[]\"\t\x00\xff"  # no ':', so never a header
_INSERTS = [b"\r\n", b":", b"-", b"9" * 12, b"\xff", b"Content-Length: "]


def _body(ident: int, good: bool, rng: random.Random) -> bytes:
    method = "fuzz/good" if good else "fuzz/lost"
    params = "x" * rng.choice([0, 5, 300])
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}).encode()


def _framed(body: bytes, *headers: bytes) -> bytes:
    return b"".join(headers or [b"Content-Length: %d\r\n" % len(body)]) + b"\r\n" + body


def _segment(rng: random.Random, ident: int) -> bytes:
    """One frame, well-formed (its body names "fuzz/good") or hostile (its body "fuzz/lost")."""
    lost = _body(ident, False, rng)
    way = rng.choice(["good", "good", "good", "not utf-8", "not json", "negative", "missing", "words", "disagree",
                      "zero", "over", "stray", "long header", "bad header", "plus"])
    good = {"good": _body(ident, True, rng), "not utf-8": _body(ident, True, rng)[:-2] + b'\xff\xfe"}',
            "not json": _body(ident, True, rng)[:-1]}
    if way in good:
        return _framed(good[way])
    return {"negative": lambda: _framed(lost, b"Content-Length: -%d\r\n" % len(lost)),
            "missing": lambda: _framed(lost, b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"),
            "words": lambda: _framed(lost, b"Content-Length: many\r\n"),
            "plus": lambda: _framed(lost + b"abc42", b"Content-Length: +%d\r\n" % (len(lost) + 5)),  # abc42Content-
            "disagree": lambda: _framed(lost, b"Content-Length: %d\r\n" % len(lost), b"Content-Length: 3\r\n"),
            "zero": lambda: _framed(b"", b"Content-Length: 0\r\n"),
            "over": lambda: _framed(lost + b" " * (FRAME_LIMIT + rng.choice([1, 100, 5000]))),
            "stray": lambda: bytes(rng.choice(_STRAY) for _ in range(rng.randrange(1, 200))) + b"\r\n",
            "long header": lambda: _framed(lost, b"Content-Length: %d\r\n" % len(lost),
                                           b"X-Pad: " + b"a" * rng.choice([8192, 9000, 30_000]) + b"\r\n"),
            "bad header": lambda: _framed(lost, b"Content-Length: %d\r\n" % len(lost), b"no header here\r\n"),
            }[way]()


def frames_input(rng: random.Random) -> bytes:
    """A stream for the server's reader: 1 to 12 frames, then perhaps one whose length no input
    holds (999999999999 bytes, or 5,000 digits), which swallows the rest."""
    data = b"".join(_segment(rng, ident) for ident in range(rng.randint(1, 12)))
    if rng.random() < 0.1:
        data += rng.choice([b"Content-Length: 999999999999\r\n\r\n", b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n"])
        data += _body(99, True, rng)  # never passed on: part of the body skipped
    return data


def mutate_frames(rng: random.Random, data: bytes) -> bytes:
    """1 to 4 byte edits of a stream: cut, deleted, repeated or inserted bytes."""
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(data) + 1)
        j = min(len(data), i + rng.choice([1, 2, 10, 100]))
        data = rng.choice([lambda: data[:i], lambda: data[:i] + data[j:], lambda: data[:j] + data[i:j] + data[j:],
                           lambda: data[:i] + rng.choice(_INSERTS) + data[i:]])()
    return data


def read_frames(data: bytes, exact: bool) -> None:
    """`data` through the server's reader; raises when it answers other than with a parse error
    whose id is null, passes on a body whose frame it refused, or loses a well-formed frame
    (`exact`: a stream not mutated)."""
    import io
    import logging

    from decomp.editors.lsp import stdio
    from decomp.editors.lsp.stdio import PARSE_ERROR, Frames, Output

    logging.getLogger(stdio.__name__).setLevel(logging.ERROR)  # a refusal is logged: thousands here
    out = io.BytesIO()
    frames = Frames(io.BytesIO(data), Output(out), FRAME_LIMIT)
    passed = []
    while header := frames.readline():
        length = int(header.split(b":")[1])
        if frames.readline() != b"\r\n" or len(body := frames.read(length)) != length:
            raise AssertionError(f"a frame passed on is not `Content-Length: N`, a blank line, N bytes: {header!r}")
        passed.append(body)
    answers = _answers(out.getvalue())
    if any(a["id"] is not None or a["error"]["code"] != PARSE_ERROR for a in answers):
        raise AssertionError(f"an answer that is not a parse error with id null: {answers[:3]}")
    sent = [m.group(1) for m in _GOOD.finditer(data) if m.group(1) != b"99"]
    got = [m.group(1) for body in passed for m in [_GOOD.search(body)] if m]
    if exact and (got != sent or any(b'"fuzz/lost"' in body for body in passed)):
        raise AssertionError(f"well-formed frames passed on: {got}, sent: {sent} (or a refused one passed on)")


def _answers(raw: bytes) -> list[dict]:
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        length = int(head.split(b":")[1])
        found.append(json.loads(rest[:length]))
        raw = rest[length:]
    return found


# ---------------------------------------------------------------- entry points
class Hang(BaseException):
    """Raised by the wall-clock alarm inside an input that runs far too long."""


def run_input(kind: str, data: str | bytes, name: str, folder: Path) -> None:
    """Everything `kind` goes through; raises whatever escapes (DecompError is fine)."""
    if kind == "frames":
        read_frames(data, exact=name == "frames")
        return
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    text = data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")
    path = folder / name
    try:
        path.write_bytes(raw)
    except ValueError:  # a name no file can have (a NUL, a lone surrogate): refused, cleanly
        check_json(path)
        return
    try:
        if kind in ("module", "fewshot"):
            check_json(path)
            load_text(folder / ("text" + path.suffix), text)
        if kind in ("fewshot", "plan", "step"):
            text_entry_points(kind, text)
    finally:
        path.unlink()


def _clean(call, *args):
    """`call(*args)`, a `DecompError` formatted as the CLI prints it (a crash if that fails)."""
    from decomp.dsl.errors import DecompError

    try:
        return call(*args)
    except DecompError as err:
        err.format()
        str(err)
        return None


def check_json(path: Path) -> None:
    """What `decomp check --json PATH` computes and prints, without a process."""
    from decomp.dsl.errors import DecompError, DecompSyntaxError, Diagnostics
    from decomp.dsl.values import storable_json
    from decomp.runtime.engine.checking import check_file, looks_like
    from decomp.runtime.views.describe import describe

    try:
        checked = check_file(path)
    except DecompError as err:
        err.format()
        if isinstance(err, (DecompSyntaxError, Diagnostics)) and path.suffix == ".decomp":
            looks_like(path)
        return
    result = describe(checked.fewshot) if checked.fewshot is not None else describe(checked.module.module,
                                                                                   checked.warnings)
    if checked.module is not None:
        result["python_functions"] = checked.python_functions
    for warning in checked.warnings:
        warning.format()
    storable_json(result, indent=2)


def load_text(path: Path, text: str) -> None:
    """The loader on a text (never on disk: lone surrogates reach the parser), then its JSON."""
    from decomp.dsl.checker import module_warnings
    from decomp.dsl.values import storable_json
    from decomp.runtime.engine.session import Session
    from decomp.runtime.views.describe import describe

    loaded = _clean(Session().load, path, text) if path.suffix == ".decomp" else None
    if loaded is not None:
        storable_json(describe(loaded.module, module_warnings(loaded.module)), indent=2)
    fewshot = _clean(_fewshot, text, str(path))
    if fewshot is not None:
        storable_json(describe(fewshot), indent=2)


def _fewshot(text: str, path: str):
    from decomp.dsl.checker import check_fewshot
    from decomp.dsl.parser import parse_fewshot

    fewshot = parse_fewshot(text, path)
    check_fewshot(fewshot, ["h", "split"])
    return fewshot


def text_entry_points(kind: str, text: str) -> None:
    from decomp.dsl.parser import parse_plan, parse_step_line
    from decomp.dsl.plans import order_text, read_plan

    if kind == "plan":
        plan = _clean(parse_plan, text)
        if plan is not None:
            order_text(plan.execution_order())
        read = _clean(read_plan, text)
        if read is not None:
            order_text(read[0].execution_order())
    lines = text.splitlines() if kind != "step" else [text]
    for line in lines[:8]:
        step = _clean(parse_step_line, line)
        if step is not None:
            step.text


# ---------------------------------------------------------------- running
def _alarm(signum, frame):
    raise Hang()


def run_range(args: tuple[int, int, int, float, str | None]) -> dict:
    """Inputs [start, stop) in this process: counts, slowest time, and what went wrong."""
    start, stop, seed, limit, save = args
    seeds = load_seeds()
    found = {"inputs": 0, "crashes": [], "hangs": [], "slowest_s": 0.0}
    signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory(prefix="decomp-fuzz-") as folder:
        for index in range(start, stop):
            kind, data, name = make_input(index, seed, seeds)
            cpu = time.process_time()
            signal.setitimer(signal.ITIMER_REAL, WALL_LIMIT)
            problem = None
            try:
                run_input(kind, data, name, Path(folder))
            except Hang:
                problem = "hangs", "interrupted after 30 s"
            except Exception as err:  # the point: anything that is not a DecompError
                problem = "crashes", _describe_crash(err)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            spent = time.process_time() - cpu
            found["inputs"] += 1
            found["slowest_s"] = max(found["slowest_s"], spent)
            if problem is None and spent > limit:
                problem = "hangs", f"{spent:.2f} s of CPU"
            if problem is not None:
                found[problem[0]].append({"index": index, "kind": kind, "name": name, "what": problem[1]})
                _save(save, index, kind, data)
    return found


def _describe_crash(err: BaseException) -> str:
    frame = traceback.extract_tb(err.__traceback__)[-1]
    return f"{type(err).__name__}: {str(err)[:160]} ({Path(frame.filename).name}:{frame.lineno})"


def _save(folder: str | None, index: int, kind: str, data: str | bytes) -> None:
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
        (Path(folder) / f"{index}-{kind}.bin").write_bytes(raw)


def fuzz(inputs: int, seed: int = 0, workers: int = 1, limit: float = 5.0, save: str | None = None) -> dict:
    """Run `inputs` inputs over `workers` processes; the totals and every crash and hang."""
    chunk = 250
    tasks = [(i, min(inputs, i + chunk), seed, limit, save) for i in range(0, inputs, chunk)]
    totals = {"inputs": 0, "crashes": [], "hangs": [], "slowest_s": 0.0}
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = list(pool.imap_unordered(run_range, tasks))
    else:
        results = [run_range(task) for task in tasks]
    for found in results:
        totals["inputs"] += found["inputs"]
        totals["crashes"] += found["crashes"]
        totals["hangs"] += found["hangs"]
        totals["slowest_s"] = max(totals["slowest_s"], found["slowest_s"])
    return totals


def replay(index: int, seed: int) -> None:
    """Run one input in the foreground and show its traceback, if any."""
    kind, data, name = make_input(index, seed, load_seeds())
    print(f"input {index}: {kind}, {name!r}, {len(data)} {'bytes' if isinstance(data, bytes) else 'chars'}",
          file=sys.stderr)
    print(repr(data[:2000]), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="decomp-fuzz-") as folder:
        start = time.process_time()
        try:
            run_input(kind, data, name, Path(folder))
        except Exception:
            traceback.print_exc()
        print(f"{time.process_time() - start:.3f} s of CPU", file=sys.stderr)


def main(argv: list[str] | None = None) -> dict | None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", type=int, default=100_000, help="how many inputs (100,000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (one per CPU)")
    p.add_argument("--limit", type=float, default=5.0, help="CPU seconds an input may take (5)")
    p.add_argument("--save", metavar="DIR", help="write each crashing or hanging input to DIR")
    p.add_argument("--replay", type=int, metavar="INDEX", help="run input INDEX alone, with its traceback")
    args = p.parse_args(argv)
    if args.replay is not None:
        replay(args.replay, args.seed)
        return None
    started = time.perf_counter()
    totals = fuzz(args.inputs, args.seed, max(1, args.workers), args.limit, args.save)
    for problem in totals["crashes"] + totals["hangs"]:
        print(json.dumps(problem, ensure_ascii=True), file=sys.stderr)
    record = {"benchmark": "fuzz", "inputs": totals["inputs"], "crashes": len(totals["crashes"]),
              "hangs": len(totals["hangs"]), "seconds": round(time.perf_counter() - started, 1),
              "slowest_s": round(totals["slowest_s"], 3), "seed": args.seed, "workers": max(1, args.workers)}
    emit(record)
    return record


if __name__ == "__main__":
    main()
