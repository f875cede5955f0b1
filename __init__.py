"""decomp: a declarative prompt-program language and its interpreter.

Public entry points: `load`, `run` / `arun` and `open_run` (the notebook API, docs/notebook.md:
load a program, run it on one question or a dataset, read a run directory back as `Program`,
`RunResult` and `Run`; the synchronous calls work inside Jupyter's running loop too),
`evaluate` and `compare` (`decomp eval` and `decomp compare` from Python: `Evaluation`,
`Comparison`), `Session` (load and run .decomp programs), `run_dataset` / `arun_dataset` (run
a program over a dataset into a run directory, as `decomp run --input` does; with
`RunOptions`, `RunSummary`; `RunInterrupted`: the rows kept and left when one is stopped), `optimize` (few-shot demonstrations bootstrapped from traces, as
`decomp optimize` does; `OptimizeSettings`, `OptimizeResult`), `FakeModel` (tests), `hookimpl`
(write a plugin: see `decomp.handlers.plugins`), `handler_kind` / `python_handler` /
`environment` (extend the language; `Environment`, `StepResult`; `Failed(value)`: an answer
whose outcome is failed), `Model` / `Completion` / `Request` / `ModelSettings` (a model backend
of one's own), `parse_module`, `parse_fewshot`, `parse_plan` (the grammar's entry points).

Each name is imported from its module when it is first used (`decomp.load` imports the engine,
`decomp.compare` numpy's statistics, `decomp.optimize` the optimizer), so `import decomp`
costs only this file.
"""
from decomp.runtime.module_entry import drop_working_folder

drop_working_folder()  # `python -m decomp`: before anything else is imported, the working folder leaves sys.path

import importlib
from typing import TYPE_CHECKING, Any

#: Where each public name lives: imported from there on first use (`__getattr__`).
_HOMES = {
    "decomp.dsl.errors": ("Abort", "DecompError", "Failure", "HandlerError"),
    "decomp.dsl.parser": ("parse_fewshot", "parse_module", "parse_plan", "parse_step_line"),
    "decomp.dsl.values": ("Failed",),
    "decomp.handlers.environment": ("Environment", "StepResult"),
    "decomp.handlers.registry": ("environment", "handler_kind", "python_handler"),
    "decomp.handlers.base": ("Call", "Handler", "Options"),
    "decomp.handlers.plugins": ("hookimpl",),
    "decomp.handlers.service": ("Service",),
    "decomp.runtime.engine.session": ("RunResult", "Session"),
    "decomp.runtime.models.base": ("Completion", "Model", "ModelSettings", "Request"),
    "decomp.learning.optimize": ("OptimizeResult", "OptimizeSettings", "optimize"),
    "decomp.runtime.runs.api": ("RunInterrupted", "RunOptions", "RunSummary", "arun_dataset", "run_dataset"),
    "decomp.runtime.runs.notebook": ("Program", "Run", "arun", "load", "open_run", "run"),
    "decomp.runtime.runs.notebook_evaluate": ("Evaluation", "evaluate"),
    "decomp.runtime.views.notebook_compare": ("Comparison", "compare"),
    "decomp.runtime.testing.fake": ("FakeModel",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'decomp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and the API reference read
    from decomp.dsl.errors import Abort, DecompError, Failure, HandlerError
    from decomp.dsl.parser import parse_fewshot, parse_module, parse_plan, parse_step_line
    from decomp.dsl.values import Failed
    from decomp.handlers.base import Call, Handler, Options
    from decomp.handlers.environment import Environment, StepResult
    from decomp.handlers.plugins import hookimpl
    from decomp.handlers.registry import environment, handler_kind, python_handler
    from decomp.handlers.service import Service
    from decomp.runtime.engine.session import RunResult, Session
    from decomp.runtime.models.base import Completion, Model, ModelSettings, Request
    from decomp.learning.optimize import OptimizeResult, OptimizeSettings, optimize
    from decomp.runtime.runs.api import RunInterrupted, RunOptions, RunSummary, arun_dataset, run_dataset
    from decomp.runtime.runs.notebook import Program, Run, arun, load, open_run, run
    from decomp.runtime.runs.notebook_evaluate import Evaluation, evaluate
    from decomp.runtime.testing.fake import FakeModel
    from decomp.runtime.views.notebook_compare import Comparison, compare
