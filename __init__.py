"""decomp: a declarative prompt-program language and its interpreter.

Public entry points: `load`, `run` / `arun` and `open_run` (the notebook API, docs/notebook.md:
load a program, run it on one question or a dataset, read a run directory back as `Program`,
`RunResult` and `Run`; the synchronous calls work inside Jupyter's running loop too),
`Session` (load and run .decomp programs), `run_dataset` / `arun_dataset` (run a program
over a dataset into a run directory, as `decomp run --input` does; with `RunOptions`,
`RunSummary`), `optimize` (few-shot demonstrations bootstrapped from traces, as
`decomp optimize` does; `OptimizeSettings`, `OptimizeResult`), `FakeModel` (tests), `hookimpl` (write a plugin: see `decomp.handlers.plugins`),
`handler_kind` / `python_handler` / `environment` (extend the language;
`Environment`, `StepResult`; `Failed(value)`: an answer whose outcome is failed),
`Model` / `Completion` / `Request` / `ModelSettings` (a model backend of one's own),
`parse_module`, `parse_fewshot`, `parse_plan` (the grammar's entry points).
"""
from decomp.runtime.module_entry import drop_working_folder

drop_working_folder()  # `python -m decomp`: before anything else is imported, the working folder leaves sys.path

from decomp.dsl.errors import Abort, DecompError, Failure, HandlerError
from decomp.dsl.parser import parse_fewshot, parse_module, parse_plan, parse_step_line
from decomp.dsl.values import Failed
from decomp.handlers.environment import Environment, StepResult
from decomp.handlers.registry import environment
from decomp.handlers.base import Call, Handler, Options
from decomp.handlers.plugins import hookimpl
from decomp.handlers.registry import handler_kind, python_handler
from decomp.handlers.service import Service
from decomp.runtime.engine.session import RunResult, Session
from decomp.runtime.models.base import Completion, Model, ModelSettings, Request
from decomp.runtime.optimize import OptimizeResult, OptimizeSettings, optimize
from decomp.runtime.runs.api import RunOptions, RunSummary, arun_dataset, run_dataset
from decomp.runtime.runs.notebook import Program, Run, arun, load, open_run, run
from decomp.runtime.testing.fake import FakeModel

__all__ = [
    "Abort", "Call", "Completion", "Model", "ModelSettings", "Request", "DecompError", "Environment", "Failed", "Failure", "FakeModel", "Handler", "HandlerError", "Options", "RunOptions",
    "RunResult", "RunSummary", "Service", "Session", "handler_kind", "parse_fewshot", "parse_module", "parse_plan",
    "parse_step_line", "python_handler", "run_dataset", "StepResult", "environment", "hookimpl",
    "Program", "Run", "arun", "arun_dataset", "load", "open_run", "run", "OptimizeResult", "OptimizeSettings", "optimize",
]
__version__ = "0.1.0"
