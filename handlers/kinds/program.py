"""Kind `program`: a fixed program written in a .decomp file, usable wherever a handler is.

Called from a `QS:` line, the first parameter receives the sub-query (as JSON when it parses,
so `[reverse] #2` passes the list itself); the other parameters are taken from the caller's
named inputs. As `main`, every parameter is taken from the dataset row's field of that name.
`handler rev = program(file="other.decomp", name="reverse")` uses a program of another file
without importing its names.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any, Mapping

from pydantic import Field

from decomp.dsl import nodes
from decomp.dsl.answer_types import ANY, Type, TypeProblem, parse_type
from decomp.dsl.checker import check_program
from decomp.dsl.errors import CheckError, Failure
from decomp.dsl.repair import fit
from decomp.dsl.values import item_text, json_text, parse_output
from decomp.handlers.base import Call, Handler, Options, step_calls
from decomp.handlers.sandbox.trust import PathRefused
from decomp.dsl.walks import iter_steps, number_steps


class ProgramOptions(Options):
    file: str | None = None
    name: str | None = None
    max_depth: int | None = Field(None, ge=1)
    description: str | None = None


class ProgramHandler(Handler):
    """A program: parameters, then steps run in order; its answer is the last answer."""

    kind = "program"

    Options = ProgramOptions
    nests = True
    cacheable = False

    def __init__(self, *args, program: nodes.Program | None = None):
        super().__init__(*args)
        self.program = program
        self.target: Handler | None = None  # set by the loader for program(file=...), see `link`
        #: A program takes its parameters from the row's fields when it is a run's entry.
        self.reads_row = program is not None

    def program_file(self) -> tuple[str, str | None] | None:
        return (self.options.file, self.options.name) if self.program is None and self.options.file else None

    def link(self, target: Handler) -> None:
        self.target = target

    def linked(self) -> tuple[Handler, ...]:
        return () if self.target is None else (self.target,)

    @property
    def max_depth(self) -> int | None:
        return self.options.max_depth

    def check(self) -> list[CheckError]:
        if self.program is None and not self.options.file:
            return [CheckError(f"[{self.name}] needs file=... (a .decomp file)", self.error_span())]
        return []

    def check_references(self, handlers: set[str]) -> list[CheckError]:
        return [] if self.program is None else check_program(self.program, handlers)

    # ---- types: `program NAME(p: T, ...) -> T`
    def _read_declared_type(self) -> Type | None:
        if self.program is None:
            return self.target.declared_type if self.target is not None else super()._read_declared_type()
        written = self.program.result
        return None if written is None else parse_type(written.value, self.ctx.resolve)

    def _type_span(self):
        return self.program.result.span if self.program is not None and self.program.result else super()._type_span()

    def answer_type(self) -> Type:
        if self.program is None and self.target is not None and self.options.returns is None:
            return self.target.answer_type()
        return super().answer_type()

    def param_types(self) -> list[tuple[nodes.Param, Type]]:
        """Each parameter with its declared type (`any` when none, or one that cannot be read)."""
        if self.program is None:
            return self.target.param_types() if isinstance(self.target, ProgramHandler) else []
        return [(p, self._param_type(p)) for p in self.program.params]

    def _param_type(self, param: nodes.Param) -> Type:
        try:
            return ANY if param.type is None else parse_type(param.type.value, self.ctx.resolve)
        except (TypeProblem, PathRefused):
            return ANY

    def type_problems(self) -> list[CheckError]:
        errors = super().type_problems()
        for param in self.program.params if self.program is not None else ():
            if param.type is not None:
                try:
                    parse_type(param.type.value, self.ctx.resolve)
                except TypeProblem as err:
                    errors.append(CheckError(str(err), param.type.span))
                except PathRefused as err:
                    errors.append(CheckError(err.message, param.type.span))
        return errors

    def calls(self) -> dict[str, list[nodes.Span]]:
        return {} if self.program is None else step_calls(iter_steps(self.program.body))

    async def run(self, call: Call) -> Any:
        if self.target is not None:  # the target's name on the stack, so its depth() and bounds count it
            stack = call.stack[:-1] + (self.target.name,) if call.stack and call.stack[-1] == self.name else call.stack
            return await call.delegate(self.target, stack)
        if self.program is None:
            raise Failure("has no program to run (see `decomp check`)", call.span)
        params = self.program.params
        bound = {p.name: self._input(p, call.inputs, call.span) for p in params[1:]}
        if params:
            bound[params[0].name] = _argument(call)
        return await self.execute(call, bound)

    async def run_main(self, call: Call, fields: Mapping[str, Any]) -> Any:
        """Run as the module's entry: each parameter from the row field of the same name."""
        bound = {p.name: self._input(p, fields, None, "the row") for p in self.program.params}
        return await self.execute(call, bound)

    async def execute(self, call: Call, bound: Mapping[str, Any]) -> Any:
        return await call.run_program(self.program.body, self._typed(bound, call.span), numbers=self._numbers)

    def _typed(self, bound: Mapping[str, Any], span) -> dict[str, Any]:
        """The arguments fitted to the parameters' types (`decomp.dsl.repair.fit`); one that does
        not fit ends the call with the parameter, its type and the value named."""
        typed = dict(bound)
        for param, want in self.param_types():
            if want.is_any or param.name not in typed:
                continue
            typed[param.name], problem = fit(want, typed[param.name])
            if problem is not None:
                raise Failure(f"program '{self.name}': parameter '{param.name}': {problem}", span or param.span)
        return typed

    @cached_property
    def _numbers(self) -> dict[nodes.Span, int]:
        return number_steps(self.program.body)

    async def aclose(self) -> None:
        if self.target is not None:
            await self.target.aclose()

    def _input(self, param: nodes.Param, inputs: Mapping[str, Any], span, where: str = "the caller") -> Any:
        if param.name not in inputs:
            known = ", ".join(sorted(inputs)) or "none"
            raise Failure(f"program '{self.name}' needs '{param.name}', which {where} does not "
                                     f"provide (available: {known})", span or param.span)
        return inputs[param.name]


def _argument(call: Call) -> Any:
    """The value a program receives: the referenced value itself when the query is just that
    reference (so "true" or "12" stay the words they were), else the query read as JSON."""
    if len(call.values) == 1 and call.query.strip() in (item_text(call.values[0]), json_text(call.values[0])):
        return call.values[0]
    return parse_output(call.query)
