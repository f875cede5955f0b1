"""The small interface every handler kind implements, built-in or third-party.

A kind is a subclass of `Handler` with a `kind` name, an `Options` model (pydantic, unknown
keys rejected) and an async `run(call)`. One instance exists per `handler NAME = KIND(...)`
declaration; `run` gets a `Call` (the engine interface, see `decomp.handlers.call`) with the
rendered sub-query and returns a JSON-able answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from decomp.dsl.errors import CheckError
from decomp.dsl.nodes import HandlerDecl, Span
from decomp.handlers.call import Call
from decomp.handlers.trust import PathRefused, inside, refusal

__all__ = ["Call", "Handler", "LoadContext", "NoOptions", "Options", "step_calls"]


class Options(BaseModel):
    """Base of every kind's options: unknown keys and wrong types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NoOptions(Options):
    pass


@dataclass
class LoadContext:
    """What a handler may need: its file's folder, the default model, the loaded module, the registry.

    `module` is the `LoadedModule` whose handlers the handler's own file sees; the loader sets
    it once every declaration is built.
    """

    base_dir: Path
    default_model: str | None = None
    module: Any = None
    registry: Any = None
    #: Every file resolved through `resolve` (shared by the contexts of one load): what a run
    #: directory copies as "the exact program used".
    files: set[Path] = field(default_factory=set)
    #: The folders the program may read files from (its own folder first, see
    #: `decomp.handlers.trust.program_roots`); None: not confined (a context built by hand).
    roots: tuple[Path, ...] | None = None

    def resolve(self, path: str) -> Path:
        """`path` (a `file=` option) from the handler's folder. Raises `PathRefused` (a
        ValueError) when it leads outside the program's allowed folders, symlinks followed: such
        a file is never read, nor recorded among the program's files."""
        p = Path(path)
        found = p if p.is_absolute() else self.base_dir / p
        if self.roots is not None and not inside(found, self.roots):
            raise PathRefused(str(path), refusal(str(path), "the path", self.roots))
        self.files.add(found)
        return found


class Handler:
    """Base class of handler kinds. Subclasses set `kind`, `Options` and implement `run`."""

    kind: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    Options: ClassVar[type[Options]] = NoOptions
    #: True for kinds that run other handlers (programs, decomposers): they count for depth.
    nests: ClassVar[bool] = False
    #: Whether the step cache stores this kind's answers. Model-backed kinds say False: their
    #: model samples are cached instead (by rendered prompt), and so are nesting kinds' steps.
    cacheable: ClassVar[bool] = True
    #: Whether answers depend on the named inputs (`call.inputs`) beyond the query: such a
    #: kind's cache key holds them.
    reads_inputs: ClassVar[bool] = False
    #: True for kinds that act on an environment themselves (`environment`).
    effects: ClassVar[bool] = False
    #: True for kinds that may run any handler of their module, whatever `calls()` lists (a
    #: decomposer runs the handlers its model names): effectful when any handler is.
    calls_any: ClassVar[bool] = False
    #: Whether a call of this handler can reach an environment, directly or through the handlers
    #: it calls: set by the loader from the call graph (`decomp.dsl.checker.effectful`). Such
    #: calls run in text order and are never answered from the step cache.
    effectful: bool = False

    def __init__(self, name: str, options: Options, decl: HandlerDecl | None, ctx: LoadContext):
        self.name = name
        self.options = options
        self.decl = decl
        self.ctx = ctx

    def cache_parts(self, call: Call) -> dict[str, Any]:
        """Everything that decides this call's answer, for its cache key."""
        parts = {"kind": self.kind, "version": self.version, "options": self.options.model_dump(mode="json"),
                 "query": call.query, "values": list(call.values)}
        if self.reads_inputs:
            parts["inputs"] = dict(call.inputs)
        return parts

    def check(self) -> list[CheckError]:
        """Static problems of this declaration (missing files, ...), found before any call."""
        return []

    def check_references(self, handlers: set[str]) -> list[CheckError]:
        """Problems in the steps this handler runs (unknown handlers, bad `#n`), given all names."""
        return []

    def calls(self) -> dict[str, list[Span]]:
        """Handler names this handler may call, with where each is named (for the checker)."""
        return {}

    @property
    def max_depth(self) -> int | None:
        """How many times this handler may be active at once on one call stack, if bounded."""
        return getattr(self.options, "max_depth", None)

    async def run(self, call: Call) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the handler holds (connections, indexes); the session calls it when a
        run ends."""

    def error_span(self, option: str | None = None) -> Span | None:
        if self.decl is None:
            return None
        opt = self.decl.option(option) if option else None
        return opt.value.span if opt else self.decl.span


def step_calls(steps) -> dict[str, list[Span]]:
    """The handlers that `QS:` steps name (`[EOQ]` aside), each with where it is named."""
    found: dict[str, list[Span]] = {}
    for step in steps:
        if step.handler and not step.is_end:
            found.setdefault(step.handler, []).append(step.handler_span or step.span)
    return found
