"""Training examples for one handler: each row of a JSONL file rendered by the handler.

A row's fields are the handler's inputs; `query` names the field that is the sub-query (None:
an empty query); `target` names the expected output. A prompt handler's example is its rendered
prompt and the target text followed by the handler's first stop string (so the model learns to
end its answer where serving cuts it; not added when the target already ends with it). A score
handler's example is its rendered `prefix` and the target text, the continuation whose
likelihood training raises. A target is a string, or any other JSON scalar as its JSON text
(`3`, `true`); a list or object is the row's error.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from decomp.dsl.errors import DecompError
from decomp.handlers.base import Handler
from decomp.handlers.kinds.prompt import PromptHandler, source_text
from decomp.handlers.kinds.score import ScoreHandler
from decomp.handlers.registry import default_registry
from decomp.handlers.sandbox.offload import DEFAULT_LIMITS, Limits
from decomp.handlers.sandbox.trust import NO_TRUST, Trust
from decomp.handlers.kinds.soft_prompt_option import pending_soft_prompts
from decomp.runtime.engine.loader import load
from decomp.runtime.runs.api import find_program
from decomp.runtime.storage.jsonl import read_lines

__all__ = ["Example", "TuneError", "TUNABLE", "declared_soft_prompt", "find_handler", "prompt_source", "read_examples", "split_examples",
           "template_sha256"]

#: The kinds a soft prompt can be trained for.
TUNABLE = ("prompt", "score")
#: How many bad lines an error names.
SHOWN = 5


class TuneError(DecompError):
    """Why `decomp tune` cannot go on, in words (positioned `file:line` where it can be)."""


@dataclass(frozen=True)
class Example:
    """One training pair: the rendered prompt, the text after it whose likelihood is raised,
    and where the row was (`file:line`)."""

    prompt: str
    target: str
    where: str


@dataclass(frozen=True)
class _RowCall:
    """What `PromptHandler.render` and the score prefix read of a call."""

    query: str
    inputs: Mapping[str, Any]
    values: tuple = ()
    span: Any = None
    stack: tuple = ()
    limits: Limits = DEFAULT_LIMITS  # a render's time limit: the default (`time_limit(call)`)


def declared_soft_prompt(handler: Handler) -> Path | None:
    """Where the handler's `soft_prompt=` option says its soft prompt lies (the default `--out`),
    or None when it has none."""
    written = getattr(handler.options, "soft_prompt", None)
    return handler.ctx.resolve(written) if written else None


def find_handler(program: str | Path, name: str, trust: Trust = NO_TRUST) -> tuple[Path, Handler]:
    """The program file (a path or a bundled program's name) and its handler `name`, loaded
    (trusting `trust`) and checked; a `TuneError` when there is none of that name or its kind
    cannot be tuned."""
    path = find_program(program)
    with pending_soft_prompts():  # the handler's soft_prompt= file may be the one about to be written
        loaded = load(path, default_registry, trust=trust)
    handler = loaded.handlers.get(name)
    if handler is None:
        raise TuneError(f"{path} has no handler named {name!r} (it has: {', '.join(sorted(loaded.handlers))})")
    if handler.kind not in TUNABLE:
        tunable = sorted(n for n, h in loaded.handlers.items() if h.kind in TUNABLE)
        raise TuneError(f"[{name}] is a {handler.kind} handler: only prompt and score handlers can be tuned "
                        f"(this program's: {', '.join(tunable) or 'none'})")
    return path, handler


def prompt_source(handler: Handler) -> str:
    """The handler's prompt source text: a prompt handler's template or few-shot text, a score
    handler's prefix."""
    return handler.options.prefix if isinstance(handler, ScoreHandler) else source_text(handler)


def template_sha256(handler: Handler) -> str:
    """The sha256 of `prompt_source(handler)`."""
    return hashlib.sha256(prompt_source(handler).encode("utf-8", "surrogatepass")).hexdigest()


def read_examples(path: str | Path, handler: Handler, *, query: str | None = None,
                  target: str = "completion") -> list[Example]:
    """Every row of the JSONL file at `path` as an `Example` of `handler`. A `TuneError` names
    the first bad lines (not JSON, no `target` field, a target that is not a scalar, a prompt
    that does not render) and says so when the file has no rows."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise TuneError(f"cannot read {path}: {err.strerror or err}") from None
    examples, bad = [], []
    for line in read_lines(data, objects=True):
        where = f"{path}:{line.number}"
        try:
            if line.error is not None:
                raise TuneError(line.error)
            examples.append(_example(handler, line.value, query, target, where))
        except TuneError as err:
            bad.append(f"{where}: {err}")
    if bad:
        more = f"\n(and {len(bad) - SHOWN} more)" if len(bad) > SHOWN else ""
        raise TuneError(f"{len(bad)} bad row{'s' if len(bad) > 1 else ''} in {path}:\n" + "\n".join(bad[:SHOWN]) + more)
    if not examples:
        raise TuneError(f"{path} has no rows to train on")
    return examples


def _example(handler: Handler, row: dict, query: str | None, target: str, where: str) -> Example:
    if target not in row:
        raise TuneError(f"no {target!r} field (the target; --target names another)")
    if query is not None and query not in row:
        raise TuneError(f"no {query!r} field (the query, --query)")
    text = _target_text(row[target], target)
    call = _RowCall(_target_text(row[query], query) if query is not None else "", row)
    try:
        if isinstance(handler, ScoreHandler):
            return Example(handler._prefix(call), text, where)
        prompt = handler.render(call)
    except DecompError as err:
        raise TuneError(f"[{handler.name}] does not render: {err.message}") from None
    stops = handler.options.stop if isinstance(handler, PromptHandler) else []
    if stops and stops[0] and not text.endswith(stops[0]):
        text += stops[0]
    return Example(prompt, text, where)


def _target_text(value: Any, field: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        raise TuneError(f"the {field!r} field is a {type(value).__name__}, expected text or a JSON scalar")
    return json.dumps(value)


def split_examples(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """(training, validation): a seeded shuffle's first `fraction` (at least one row when the
    fraction is above 0) held out; a `TuneError` when no training row would be left."""
    if not fraction:
        return list(examples), []
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    held = max(1, int(len(examples) * fraction))
    if held >= len(examples):
        raise TuneError(f"--validation-split {fraction} of {len(examples)} row{'s' if len(examples) > 1 else ''} "
                        "leaves no training rows (give more rows, a smaller split, or --validation FILE)")
    validation = sorted(order[:held])
    kept = sorted(order[held:])
    return [examples[i] for i in kept], [examples[i] for i in validation]
