"""The small interface every handler kind implements, built-in or third-party.

A kind is a subclass of `Handler` with a `kind` name, an `Options` model (pydantic, unknown
keys rejected) and an async `run(call)`. One instance exists per `handler NAME = KIND(...)`
declaration; `run` gets a `Call` (the engine interface, see `decomp.handlers.call`) with the
rendered sub-query and returns a JSON-able answer. `run` runs on the event loop, beside every
other row: a kind hands any blocking or CPU-heavy work to `Handler.offload` (a worker thread,
under the handler's time limit) and awaits it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Mapping

from pydantic import BaseModel, ConfigDict

from decomp.dsl.errors import CheckError, CheckWarning
from decomp.dsl.answer_types import ANY, SchemaFile, Type, TypeProblem, parse_type
from decomp.dsl.nodes import HandlerDecl, Span
from decomp.dsl.repair import fit
from decomp.handlers.call import Call
from decomp.handlers.sandbox.offload import bounded, bounded_await
from decomp.handlers.sandbox.trust import NO_TRUST, FolderTrust, PathRefused, Trust, inside, refusal

__all__ = ["Call", "Handler", "LoadContext", "NoOptions", "Options", "step_calls"]


class Options(BaseModel):
    """Base of every kind's options: unknown keys and wrong types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    #: The type of the handler's answers (`returns=list[str]`, see `decomp.dsl.answer_types`): every
    #: answer is fitted to it (`decomp.dsl.repair.fit`) and models are constrained to it.
    #: None: the type its examples show, for the checker only, else `any`.
    returns: str | None = None

    @classmethod
    def written_options(cls) -> dict[str, Any]:
        """Each option as a .decomp file writes it (a field's alias, such as regex's `json`,
        else its name) -> its pydantic field: the names to list, complete and look up."""
        return {field.alias or name: field for name, field in cls.model_fields.items()}


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
    #: `decomp.handlers.sandbox.trust.Trust.program_roots`); None: not confined (a context built by hand).
    roots: tuple[Path, ...] | None = None
    #: The folders whose Python a check may import (`decomp check`, `decomp lsp`); None: a run,
    #: which imports the program's own modules (running a program is consent to run its code).
    trusted_folders: FolderTrust | None = None
    #: What the session loading the program trusts beyond its folder (`--trust`, `--allow-root`):
    #: the modules whose functions its python handlers may import.
    trust: Trust = NO_TRUST

    def resolve(self, path: str) -> Path:
        """`path` (a `file=` option) from the handler's folder, as the real path it leads to
        (symlinks resolved). Raises `PathRefused` (a ValueError) when it leads outside the
        program's allowed folders: such a file is never read, nor recorded among the program's
        files.

        The path returned is the one that was checked: callers read it, never `path` again, so a
        link swapped after the check (pointing elsewhere by then) is not followed. What is left
        is the file, or a folder on its real path, replaced by a link between the check and the
        read, by someone who can already write inside the program's folder."""
        p = Path(path)
        found = p if p.is_absolute() else self.base_dir / p
        try:
            real = found.resolve()
        except (OSError, RuntimeError, ValueError):  # a symlink loop: reading it fails later, plainly
            real = found.absolute()
        if self.roots is not None and not inside(real, self.roots):
            raise PathRefused(str(path), refusal(str(path), "the path", self.roots))
        self.files.add(real)
        return real


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
    #: The time limit of one call's synchronous work when the handler's options set none (a kind
    #: whose work is always quick may set a tighter one); None: the run's (see `time_limit`).
    default_timeout: ClassVar[float | None] = None
    #: Whether `run` runs contained: on an event loop in a thread of its own, its own time
    #: bounded by `time_limit()` (`decomp.runtime.engine.containment`). None: decided by where
    #: the kind comes from (this package's kinds run on the run's loop, any other kind is
    #: contained). A kind whose author vouches it never blocks, and that shares asyncio objects
    #: (locks, events, sessions) between its calls, may say False to run on the run's loop.
    contained: ClassVar[bool | None] = None

    def __init__(self, name: str, options: Options, decl: HandlerDecl | None, ctx: LoadContext):
        self.name = name
        self.options = options
        self.decl = decl
        self.ctx = ctx

    def cache_parts(self, call: Call) -> dict[str, Any]:
        """Everything that decides this call's answer, for its cache key (a `timeout=` option,
        a time limit that never decides an answer, left out)."""
        unset = {"returns"} if self.options.returns is None else set()  # keys stay as they were untyped
        options = self.options.model_dump(mode="json", exclude={"timeout"} | unset)
        if self.declared_type is not None and isinstance(self.declared_type, SchemaFile):
            options["returns"] = self.declared_type.content  # the file's content, not only its name
        parts = {"kind": self.kind, "version": self.version, "options": options,
                 "query": call.query, "values": list(call.values)}
        if self.reads_inputs:
            parts["inputs"] = dict(call.inputs)
        return parts

    def check(self) -> list[CheckError]:
        """Static problems of this declaration (missing files, ...), found before any call."""
        return []

    def warnings(self) -> list[CheckWarning]:
        """What this declaration accepts but probably does not mean (a prompt template whose
        output can grow without bound, ...), for `decomp check`; called after a clean `check`."""
        return []

    # ---- types (decomp.dsl.answer_types)
    @cached_property
    def declared_type(self) -> Type | None:
        """The type written for this handler's answers (`returns=`), or None; one that cannot
        be read is None here and a check error (`type_problems`)."""
        try:
            return self._read_declared_type()
        except (TypeProblem, PathRefused):
            return None

    def _read_declared_type(self) -> Type | None:
        written = self.options.returns
        return None if written is None else parse_type(written, self.ctx.resolve)

    def inferred_type(self) -> Type:
        """The type this kind's answers have without a declaration: what its examples show, or
        what the kind always answers (a regex with all=true: list[str]); `any` by default."""
        return ANY

    def answer_type(self) -> Type:
        """The type the checker gives this handler's answers: declared, else inferred."""
        declared = self.declared_type
        return declared if declared is not None else self.inferred_type()

    def type_problems(self) -> list[CheckError]:
        """A declared type that cannot be read, and examples that contradict it (`example_values`)."""
        try:
            declared = self._read_declared_type()
        except PathRefused as err:
            return [CheckError(err.message, self.error_span("returns"))]
        except TypeProblem as err:
            return [CheckError(str(err), self._type_span())]
        if declared is None:
            return []
        return [CheckError(f"this example's answer does not fit the declared type: {why}", span,
                           expected=f"an answer of type {declared.text}, or another returns=")
                for span, value in self.example_values() for _, why in [fit(declared, value)] if why]

    def _type_span(self) -> Span | None:
        return self.error_span("returns")

    def example_values(self) -> list[tuple[Span, Any]]:
        """The answers this handler's examples show, each with where it is written (few-shot
        `A:` answers): what inference reads and a declared type must fit."""
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

    # ---- running as a module's entry, and programs of other files
    #: Whether, as the entry of a run (`main`), this handler takes the row's fields itself
    #: (`run_main`) instead of its `question` as the query (a program with parameters).
    reads_row: bool = False

    async def run_main(self, call: Call, fields: Mapping[str, Any]) -> Any:  # pragma: no cover - interface
        """Run as the module's entry on a row's fields (only when `reads_row`)."""
        raise NotImplementedError

    def program_file(self) -> tuple[str, str | None] | None:
        """A `.decomp` file this handler runs a program of (`file=`, and the program's name or
        None for the file's `main`): the loader loads it and hands the program's handler to
        `link`. None for kinds that run no other file."""
        return None

    def link(self, target: "Handler") -> None:
        """Receive the handler of the program `program_file` named, once loaded."""

    def linked(self) -> tuple["Handler", ...]:
        """The handlers of other files this one runs (effects reach through them; the session
        closes their modules' handlers too)."""
        return ()

    async def aclose(self) -> None:
        """Release what the handler holds (connections, indexes); the session calls it when a
        run ends."""

    # ---- bounded synchronous work (see `decomp.handlers.sandbox.offload`)
    def time_limit(self, call: Call) -> float:
        """Seconds `call`'s synchronous work may take: the handler's `timeout=` option when
        written, else its session's (`call.limits`: `--handler-timeout`, default 10 s), or the
        kind's `default_timeout` when that is tighter."""
        own = getattr(self.options, "timeout", None)
        if own is not None:
            return own
        run = call.limits.seconds
        return run if self.default_timeout is None else min(run, self.default_timeout)

    async def offload(self, call: Call, fn, *args: Any, what: str, grace: float = 0.0) -> Any:
        """`fn(*args)` in a worker thread under `time_limit(call)` (plus `grace` seconds, for work
        that stops itself at the limit): the event loop (every other row) goes on meanwhile; an
        overrun is a `HandlerError` naming `what`, the limit and how to raise it. Kinds run every
        piece of blocking work through this."""
        return await bounded(fn, *args, limit=self.time_limit(call), owner=self, what=what,
                             option=self._timeout_option, grace=grace)

    async def await_bounded(self, call: Call, awaitable, *, what: str) -> Any:
        """`await awaitable` under `time_limit(call)` (an async function's call)."""
        return await bounded_await(awaitable, limit=self.time_limit(call), what=what, option=self._timeout_option)

    @property
    def _timeout_option(self) -> str | None:
        return "timeout" if "timeout" in type(self.options).model_fields else None

    def timeout_problems(self) -> list[CheckError]:
        """The check of a `timeout=` option: a number of seconds > 0."""
        seconds = getattr(self.options, "timeout", None)
        if seconds is None or seconds > 0:
            return []
        return [CheckError(f"timeout must be > 0 seconds, got {seconds}", self.error_span("timeout"))]

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
