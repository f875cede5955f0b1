"""Handlers as tools: a prompt on a chat model may call the handlers its `tools=` names.

    handler ages = prompt(file="ages.txt", tools=["birth_year", "calc"], max_tool_rounds=4)

Each tool is a function named after its handler, described by the handler's `description=`
option (else "The <kind> handler <name>."), and taking one argument: for a program whose first
parameter has a declared type (`program year(person: str) -> int`), that parameter, with its
type's JSON Schema (its answer type is said in the description); else `query`, a string (the
handler's sub-query). The model's calls run as `QS:` steps would (`Call.run_handler`): under
the run's budgets, step cache, deadlines and trace (each a child of the prompt's node). Each
result goes back as a tool message: the answer as JSON text; a handler's failure as
`error: ...`, and a failed outcome as `failed: ...`, so the model can try another way; an
unknown tool or arguments that are not a JSON object the same way. A failure that ends the
row (a spent budget, a cache miss in replay mode) ends it. When the model still calls tools
after `max_tool_rounds` rounds, the call fails, saying so.
"""
from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from decomp.dsl.errors import Failure, HandlerError
from decomp.dsl.values import json_text, outcome
from decomp.handlers.call import Call
from decomp.handlers.conversation import Message, Tool, ToolCall

if TYPE_CHECKING:  # pragma: no cover
    from decomp.dsl.answer_types import Constraint
    from decomp.handlers.base import Handler

__all__ = ["tool_of", "with_tools"]

_QUERY = "query"


def tool_of(handler: "Handler") -> Tool:
    """The tool that stands for `handler` (see the module docstring)."""
    described = getattr(handler.options, "description", None) or f"The {handler.kind} handler {handler.name}."
    answer = handler.answer_type()
    if not answer.is_any:
        described += f" It answers a value of type {answer.text}."
    name, schema = _argument(handler)
    parameters = {"type": "object", "properties": {name: schema}, "required": [name], "additionalProperties": False}
    return Tool(handler.name, described, json.dumps(parameters, sort_keys=True))


def _argument(handler: "Handler") -> tuple[str, dict]:
    """The tool's one argument: a program's typed first parameter, else `query`."""
    params = handler.param_types() if hasattr(handler, "param_types") else []
    if params and not params[0][1].is_any:
        param, declared = params[0]
        return param.name, declared.schema()
    return _QUERY, {"type": "string", "description": f"what to ask [{handler.name}]"}


async def with_tools(handler: "Handler", call: Call, prompt: tuple, constraint: "Constraint | None") -> str:
    """Ask the handler's model with its tools offered, run each call it makes, hand back the
    results, until it answers in text; that text."""
    opts = handler.options
    module = handler.ctx.module
    tools = tuple(tool_of(module.handlers[name]) for name in opts.tools)
    turns = list(prompt[1] or (Message("user", prompt[0]),))
    for _ in range(opts.max_tool_rounds + 1):
        reply = (await call.converse(prompt[0], tuple(turns), tools=tools, model=opts.model, stop=tuple(opts.stop),
                                     max_tokens=opts.max_tokens, temperature=opts.temperature,
                                     constraint=constraint))[0]
        if not reply.tool_calls:
            return reply.text
        turns.append(Message("assistant", reply.text or None, reply.tool_calls))
        results = await asyncio.gather(*(_run(call, tools, found) for found in reply.tool_calls))
        turns += [Message("tool", result, tool_call_id=found.id) for found, result in zip(reply.tool_calls, results)]
    raise HandlerError(f"the model still called tools after {opts.max_tool_rounds} rounds "
                       "(raise max_tool_rounds?)", call.span)


async def _run(call: Call, tools: tuple[Tool, ...], found: ToolCall) -> str:
    """One tool call run as a step of its handler: its answer as JSON text, or what went wrong."""
    tool = next((t for t in tools if t.name == found.name), None)
    if tool is None:
        return f"error: there is no tool {found.name!r}; the tools are {', '.join(t.name for t in tools)}"
    try:
        arguments = json.loads(found.arguments or "{}")
    except ValueError:
        return f"error: the arguments are not JSON: {found.arguments[:200]!r}"
    name = next(iter(json.loads(tool.parameters)["properties"]))
    if not isinstance(arguments, dict) or name not in arguments:
        return f"error: give the argument {name!r} as a JSON object's member, e.g. {{\"{name}\": ...}}"
    value = arguments[name]
    query = value if isinstance(value, str) else json_text(value)
    try:
        answer, ok = outcome(await call.run_handler(found.name, query, () if isinstance(value, str) else (value,)))
    except Failure as err:
        return f"error: {err.message}"
    return json_text(answer) if ok else f"failed: {json_text(answer)}"

