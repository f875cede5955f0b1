"""Which handlers of a program `decomp optimize` can give demonstrations to, and in what form.

A handler is a target when its examples are a file (`file=`) inside the program's folder that
the optimised program can point elsewhere, and its kind has a few-shot format:

* a few-shot `prompt` of Q:/A: examples (form "qa") or QC:/QS: examples (form "qc");
* a `decomposer` (form "decomposer": QC: question, QS: and A: lines, QS: [EOQ]).

Everything else is named with the reason it is left as it is: a template, inline
`examples=`/`text=`, `n > 1` samples, a file outside the program's folder.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from decomp.dsl.nodes import Span
from decomp.handlers.base import Handler
from decomp.runtime.engine.loader import LoadedModule


@dataclass(frozen=True)
class Target:
    """A handler demonstrations can be added to."""

    name: str
    form: str            # "qa" | "qc" | "decomposer"
    examples: Path       # its examples file, resolved
    declared_in: Path    # the .decomp file declaring it
    option: Span         # the value of its file= option there
    head: str = ""       # a prompt's few-shot text before every query ("" for a decomposer)
    raw: bool = False    # a demo shows the model's own text (answer_regex reads the answer out of it)
    context: bool = False  # the prompt shows an input (`context=`) before each query

    @property
    def original_text(self) -> str:
        return self.examples.read_text(encoding="utf-8")


def find_targets(loaded: LoadedModule, folder: Path) -> tuple[dict[str, Target], dict[str, str]]:
    """The targets among `loaded`'s handlers, by name, and the reason each other model-prompting
    handler is skipped. `folder`: the program's folder (files outside it are not rewritten)."""
    found: dict[str, Target] = {}
    skipped: dict[str, str] = {}
    for name, handler in sorted(loaded.handlers.items()):
        if handler.kind not in ("prompt", "decomposer"):
            continue
        target = _target(name, handler, folder.resolve())
        if isinstance(target, str):
            skipped[name] = target
        else:
            found[name] = target
    return found, skipped


def _target(name: str, handler: Handler, folder: Path) -> Target | str:
    opts = handler.options
    if handler.decl is None or handler.decl.option("file") is None:
        return "its examples are written inline (examples= or text=): only a file= option is rewritten"
    option = handler.decl.option("file").value.span
    try:
        examples = handler.ctx.resolve(opts.file).resolve()
        declared_in = Path(option.file).resolve()
    except Exception as err:  # refused by the trust rules, or unreadable: `decomp check` says more
        return f"its examples file cannot be read ({err})"
    for path in (examples, declared_in):
        if not path.is_relative_to(folder):
            return f"{path} is outside the program's folder {folder}"
    if handler.kind == "decomposer":
        return Target(name, "decomposer", examples, declared_in, option)
    head = handler.fewshot_head()
    if head is None:
        return "a template, not few-shot examples"
    if opts.n > 1:
        return f"it draws n={opts.n} samples per call: a demonstration shows one"
    text, qc_style = head
    return Target(name, "qc" if qc_style else "qa", examples, declared_in, option, head=text,
                  raw=bool(opts.answer_regex) or qc_style, context=bool(opts.context))
