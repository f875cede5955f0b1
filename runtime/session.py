"""`Session`: the one object that wires a run together: registry, models, limits.

    session = Session(model=FakeModel(answers=[...]))
    module = session.load("programs/decomp/letter_cat.decomp")
    result = session.run(module, {"question": "Take the last letters of ..."})
    result.answer, result.error, result.trace
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..dsl.errors import DecompError
from ..handlers import builtins  # noqa: F401  (registers the built-in kinds)
from ..handlers.base import Call
from ..handlers.models.base import Model, ModelError
from ..handlers.models.fake import FakeModel
from ..handlers.program import ProgramHandler
from ..handlers.registry import Registry, default_registry
from .loader import LoadedModule, load
from .trace import TraceNode


@dataclass
class RunResult:
    """What one row produced: its answer, or the error that ended it, and the trace."""

    answer: Any
    error: str | None
    trace: TraceNode

    @property
    def ok(self) -> bool:
        return self.error is None


class Session:
    """Owns the handler registry, the models and the run limits. No hidden global state."""

    def __init__(self, *, registry: Registry | None = None, model: Model | str | None = None,
                 max_depth: int = 64):
        self.registry = registry or default_registry
        self.max_depth = max_depth
        self._override = model
        self._models: dict[str, Model] = {}

    # ---- loading
    def load(self, path: str | Path, text: str | None = None) -> LoadedModule:
        """Parse and check a .decomp file; raises `DecompError` (often `Diagnostics`)."""
        return load(path, self.registry, text)

    # ---- models
    def resolve_model(self, explicit: str | None, module_default: str | None) -> Model:
        """The model for a handler: its own `model=`, else the session's, else the module default."""
        if explicit is None and isinstance(self._override, Model):
            return self._override
        spec = explicit or (self._override if isinstance(self._override, str) else None) or module_default
        if spec is None:
            raise ModelError("no model is configured: pass --model or declare `model default = \"...\"`")
        return self.model(spec)

    def model(self, spec: str) -> Model:
        """A model instance for a spec such as `fake:answers.json` (cached per spec)."""
        if spec not in self._models:
            self._models[spec] = self._build_model(spec)
        return self._models[spec]

    def _build_model(self, spec: str) -> Model:
        scheme, _, rest = spec.partition(":")
        if scheme == "fake":
            return FakeModel.from_file(rest) if rest else FakeModel()
        factory = self.registry.model_backends.get(scheme)
        if factory is None:
            known = ", ".join(sorted({"fake", *self.registry.model_backends}))
            raise ModelError(f"unknown model {spec!r} (known backends: {known})")
        return factory(rest)

    # ---- running
    async def arun(self, module: LoadedModule, fields: Mapping[str, Any], target: str | None = None) -> RunResult:
        """Run the module's main (or `target`) on one row's fields; errors are caught into the result."""
        trace = TraceNode("row", label=str(fields.get("id", "")))
        try:
            answer = await self._entry(module, target, fields, trace)
        except (DecompError, ModelError) as err:
            trace.error = str(err)
            return RunResult(None, str(err), trace)
        trace.answer = answer
        return RunResult(answer, None, trace)

    def run(self, module: LoadedModule, fields: Mapping[str, Any], target: str | None = None) -> RunResult:
        """Synchronous `arun`."""
        return asyncio.run(self.arun(module, fields, target))

    async def _entry(self, module: LoadedModule, target: str | None, fields, trace: TraceNode) -> Any:
        name = target or module.main
        if name is None:
            raise DecompError(f"{module.path} has no `main` and no target was given")
        handler = module.handlers.get(name)
        if handler is None:
            raise DecompError(f"{module.path} has no program or handler named '{name}'")
        stack = (name,) if handler.nests else ()
        call = Call(str(fields.get("question", "")), self, (), dict(fields), stack, None, trace)
        if isinstance(handler, ProgramHandler) and handler.program is not None:
            return await handler.run_main(call, fields)
        if "question" not in fields:
            raise DecompError(f"the row has no 'question' field for [{name}]")
        return await handler.run(call)
