"""decomp: a declarative prompt-program language and its interpreter.

Public entry points: `Session` (load and run .decomp programs), `FakeModel` (tests),
`handler_kind` / `python_handler` (extend the language), `parse_module`, `parse_fewshot`,
`parse_plan` (the grammar's entry points).
"""
from .dsl.errors import DecompError
from .dsl.parser import parse_fewshot, parse_module, parse_plan, parse_step_line
from .handlers.base import Call, Handler, Options
from .handlers.models.fake import FakeModel
from .handlers.registry import handler_kind, python_handler
from .runtime.session import RunResult, Session

__all__ = [
    "Call", "DecompError", "FakeModel", "Handler", "Options", "RunResult", "Session", "handler_kind",
    "parse_fewshot", "parse_module", "parse_plan", "parse_step_line", "python_handler",
]
__version__ = "0.1.0"
