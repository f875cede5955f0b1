"""decomp: a declarative prompt-program language and its interpreter.

The one way in (docs/notebook.md): `load` a program into a `Program`, then `Program.run`
(`arun`) for one question, a `RunResult`, and `Program.run_dataset` (`arun_dataset`) for a
dataset, a `Run` (its run directory, as `decomp run --input` writes it; `RunInterrupted`: the
rows kept and left when one is stopped); `open_run` reads a run directory back; `evaluate` and
`compare` are `decomp eval` and `decomp compare` (`Evaluation`, `Comparison`). The synchronous
calls work inside Jupyter's running loop too. `Session` owns the settings, models, cache and
trust of runs (`load(..., session=Session(...))` runs a program in one of one's own);
`RunOptions` are the settings `load` takes by name. `optimize` bootstraps few-shot
demonstrations from traces, as `decomp optimize` does (`OptimizeSettings`, `OptimizeResult`).
`FakeModel` (tests), `hookimpl` (write a plugin: see `decomp.handlers.plugins`), `handler_kind`
/ `python_handler` / `environment` (extend the language; `Handler`, `Options`, `Call`,
`Service`, `Environment`, `StepResult`; `Failed(value)`: an answer whose outcome is failed),
`Model` / `Completion` / `Request` / `ModelSettings` (a model backend of one's own), the errors
(`DecompError`, `Failure`, `Abort`, `HandlerError`), `parse_module`, `parse_fewshot`,
`parse_plan` (the grammar's entry points). `__all__` is exactly what docs/api.md documents
(tests/test_api_surface.py).

`run`, `arun`, `run_dataset` and `arun_dataset` stay one release more as deprecated aliases of
the `Program` methods (each warns, `DeprecationWarning`); they are not in `__all__`.

Each name is imported from its module when it is first used (`decomp.load` imports the engine,
`decomp.compare` numpy's statistics, `decomp.optimize` the optimizer), so `import decomp`
costs only this file and the table of built-in plugins (`decomp.plugins`, which hands itself to
the plugin hooks, `decomp.handlers.hooks`, and imports no plugin).
"""
from decomp.runtime.module_entry import drop_working_folder

drop_working_folder()  # `python -m decomp`: before anything else is imported, the working folder leaves sys.path

import importlib
from typing import TYPE_CHECKING, Any

#: Where each public name lives: imported from there on first use (`__getattr__`).
_HOMES = {
    "decomp.dsl.errors": ("Abort", "DecompError", "Failure", "HandlerError"),
    "decomp.dsl.parser": ("parse_fewshot", "parse_module", "parse_plan"),
    "decomp.dsl.values": ("Failed",),
    "decomp.handlers.environment": ("Environment", "StepResult"),
    "decomp.handlers.registry": ("environment", "handler_kind", "python_handler"),
    "decomp.handlers.base": ("Call", "Handler", "Options"),
    "decomp.handlers.plugins": ("hookimpl",),
    "decomp.handlers.service": ("Service",),
    "decomp.runtime.engine.session": ("RunResult", "Session"),
    "decomp.runtime.models.base": ("Completion", "Model", "ModelSettings", "Request"),
    "decomp.learning.optimize": ("OptimizeResult", "OptimizeSettings", "optimize"),
    "decomp.runtime.runs.api": ("RunInterrupted", "RunOptions"),
    "decomp.runtime.runs.notebook": ("Program", "Run", "load", "open_run"),
    "decomp.runtime.runs.notebook_evaluate": ("Evaluation", "evaluate"),
    "decomp.runtime.views.notebook_compare": ("Comparison", "compare"),
    "decomp.runtime.testing.fake": ("FakeModel",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
#: The old entry points, kept one release as deprecated aliases of the `Program` methods (each
#: warns when called); served like the names above, but not in `__all__`.
_DEPRECATED = {name: "decomp.runtime.runs.notebook" for name in ("arun", "arun_dataset", "run", "run_dataset")}

__all__ = sorted(_HOME)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    module = _HOME.get(name) or _DEPRECATED.get(name)
    if module is None:
        raise AttributeError(f"module 'decomp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# The table of built-in plugins, handed down to the plugin hooks here, whichever way the package is
# entered (a session made anywhere, a worker process, the command line); it imports no plugin.
from decomp import plugins  # noqa: E402,F401


if TYPE_CHECKING:  # what type checkers and the API reference read
    from decomp.dsl.errors import Abort, DecompError, Failure, HandlerError
    from decomp.dsl.parser import parse_fewshot, parse_module, parse_plan
    from decomp.dsl.values import Failed
    from decomp.handlers.base import Call, Handler, Options
    from decomp.handlers.environment import Environment, StepResult
    from decomp.handlers.plugins import hookimpl
    from decomp.handlers.registry import environment, handler_kind, python_handler
    from decomp.handlers.service import Service
    from decomp.runtime.engine.session import RunResult, Session
    from decomp.runtime.models.base import Completion, Model, ModelSettings, Request
    from decomp.learning.optimize import OptimizeResult, OptimizeSettings, optimize
    from decomp.runtime.runs.api import RunInterrupted, RunOptions
    from decomp.runtime.runs.notebook import Program, Run, load, open_run
    from decomp.runtime.runs.notebook import arun, arun_dataset, run, run_dataset  # deprecated
    from decomp.runtime.runs.notebook_evaluate import Evaluation, evaluate
    from decomp.runtime.testing.fake import FakeModel
    from decomp.runtime.views.notebook_compare import Comparison, compare
