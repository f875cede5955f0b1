"""Kind `executor`: an interactive ReAct executor over an environment (ADaPT's executor).

    handler act = executor(environment = "craft", file = "executor.j2", max_iterations = 20,
                           patience = 4, success = "either", state_action = "inventory")

The sub-query is the task. The prompt is a Jinja template (sandboxed, StrictUndefined) that
sees `task`, `start` (the environment's opening observation), `state` (the observation of
`state_action`, taken before the first turn: the inventory, so a sub-task knows what the
previous one achieved), `inputs` and each input by name. Each turn the model writes one line
after `>`: `think: ...` gets `OK.`, "task completed" / "task failed" ends the attempt, anything
else is an action stepped in the environment; the line and its observation are appended to the
prompt. The attempt ends on the model's verdict, when the environment is done, after
`patience` observations in a row that say the action failed, on an empty line, or after
`max_iterations` turns.

Success (`success=`): "model" (the model said "task completed"), "reward" (the environment
gave a reward), "either" (default) or "both". The answer records success, who judged it, the
reward, why it stopped, the turns and the actions; a failed attempt is a failed outcome
(`ok(#n)` false), not a row error. In the trace each turn is an `iteration` node.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from jinja2 import TemplateError
from pydantic import Field

from decomp.dsl.errors import CheckError, CheckWarning, DecompError, HandlerError
from decomp.dsl.values import Failed
from decomp.handlers.base import Call, Options
from decomp.handlers.conversation import Message, Reply, Tool, ToolCall, role_marker, split_roles
from decomp.handlers.environment import Environment
from decomp.handlers.kinds.environment import ActsOnEnvironment
from decomp.handlers.kinds.prompt import source_problems, source_text, template_error, template_warnings
from decomp.handlers.sandbox.templates import JINJA, RENDER_GRACE

COMPLETED, FAILED = "task completed", "task failed"


class ExecutorOptions(Options):
    environment: str
    file: str | None = None
    text: str | None = None
    model: str | None = None
    max_iterations: int = Field(20, ge=1)
    patience: int | None = Field(None, ge=1)
    success: Literal["model", "reward", "either", "both"] = "either"
    state_action: str | None = None
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(64, ge=1)
    #: How the model acts: "text" (an action line after `>`) or "tool" (a call of the tool
    #: `act(action)` per action: chat models only).
    act: Literal["text", "tool"] = "text"


@dataclass
class Attempt:
    """One attempt at a task: the turns so far and how it ended."""

    task: str
    said: str | None = None            # "completed" | "failed" | None: the model's own verdict
    reward: float = 0.0
    stopped: str = ""
    actions: list[str] = field(default_factory=list)
    turns: int = 0
    failures_in_row: int = 0

    def record(self, success: bool, judge: str) -> dict[str, Any]:
        return {"task": self.task, "success": success, "judge": judge, "model_said": self.said,
                "reward": self.reward, "stopped": self.stopped, "iterations": self.turns, "actions": self.actions}


class ExecutorHandler(ActsOnEnvironment):
    """ReAct over an `environment` handler: one model line per turn, until a verdict or a limit."""

    kind = "executor"

    Options = ExecutorOptions
    cacheable = False

    def __init__(self, *args):
        super().__init__(*args)
        self._template = None

    def check(self) -> list[CheckError]:
        errors = source_problems(self, " (a Jinja template)")
        if errors:
            return errors
        try:
            self._prepare()
        except (DecompError, OSError, TemplateError) as err:
            return template_error(self, err)
        return []

    def warnings(self) -> list[CheckWarning]:
        return template_warnings(self, source_text(self), "file" if self.options.file else "text")

    def _prepare(self):
        if self._template is None:
            self._template = JINJA.from_string(source_text(self))
        return self._template

    def render(self, call: Call, env: Environment, state: str) -> str:
        """The prompt before the first turn."""
        return self._render(call, env.start(), state)

    def _render(self, call: Call, start: str, state: str) -> str:
        return self._render_both(call, start, state)[0]

    def _render_both(self, call: Call, start: str, state: str) -> tuple[str, tuple[Message, ...] | None]:
        """The opening prompt as text and as messages (`decomp.handlers.conversation`)."""
        role, nonce = role_marker()
        # a row's own field `role` wins (templates written before role markers keep working)
        variables = {"role": role, **call.inputs, "task": call.query, "start": start, "state": state,
                     "inputs": dict(call.inputs)}
        try:
            rendered = self._prepare().render_within(self.time_limit(call), **variables)
        except Exception as err:  # a template can fail in any way
            raise HandlerError(f"template: {type(err).__name__}: {err}", call.span) from err
        return split_roles(rendered, nonce)

    async def run(self, call: Call) -> Any:
        opts = self.options
        env = call.environment(opts.environment)
        state = env.step(opts.state_action).observation if opts.state_action else ""
        start = env.start()  # the environment is the row's: it is used on the event loop only
        text, messages = await self.offload(call, self._render_both, call, start, state, what="the template",
                                            grace=RENDER_GRACE)
        prompt = text.rstrip("\n") + "\n"
        turns = list(messages or (Message("user", prompt.rstrip("\n")),))
        attempt = Attempt(call.query)
        while not attempt.stopped:
            if attempt.turns >= opts.max_iterations:
                attempt.stopped = f"max_iterations ({opts.max_iterations})"
                break
            reply = (await call.converse(prompt + ">", tuple(turns), tools=self._tools(),
                                         model=opts.model, stop=("\n",), max_tokens=opts.max_tokens,
                                         temperature=opts.temperature))[0]
            attempt.turns += 1
            if reply.tool_calls:
                prompt += self._tool_turn(call, attempt, reply, env, turns)
                continue
            line = _first_line(reply.text)
            observation = self._turn(attempt, line, env)
            call.child("iteration", label=line or "(nothing)", answer=observation)
            prompt += f"> {line}\n{observation}\n"
            turns += [Message("assistant", line), Message("user", observation)]
        return self._verdict(attempt)

    def _tools(self) -> tuple[Tool, ...]:
        return (ACT,) if self.options.act == "tool" else ()

    def _tool_turn(self, call: Call, attempt: Attempt, reply: Reply, env: Environment, turns: list) -> str:
        """Run the actions a reply asks for by tool calls (each one action); the text a
        completion prompt would have grown by. `turns` gets the call and each observation."""
        turns.append(Message("assistant", reply.text or None, reply.tool_calls))
        grown = ""
        for found in reply.tool_calls:
            action = _action(found)
            if action is None:
                observation = 'Call act with one argument, the action: {"action": "..."}.'
            elif attempt.stopped:
                observation = "The attempt has ended."
            else:
                observation = self._act(attempt, action, env)
            call.child("iteration", label=action or found.arguments[:80], answer=observation)
            turns.append(Message("tool", observation, tool_call_id=found.id))
            grown += f"> {action}\n{observation}\n"
        return grown

    def _turn(self, attempt: Attempt, line: str, env: Environment) -> str:
        """Act on one model line; the observation shown back to the model."""
        lowered = line.lower()
        if not line:
            attempt.stopped = "the model wrote nothing"
            return "Nothing was written."
        if lowered.startswith("think:"):
            return "OK."
        if COMPLETED in lowered or FAILED in lowered:
            attempt.said = "completed" if COMPLETED in lowered else "failed"
            attempt.stopped = f"the model said {attempt.said}"
            return "OK."
        if self.options.act == "tool":  # actions go by tool calls: any other text is a thought
            return "OK."
        return self._act(attempt, line, env)

    def _act(self, attempt: Attempt, line: str, env: Environment) -> str:
        """Step the environment by one action; its observation."""
        result = env.step(line)
        attempt.actions.append(line)
        attempt.reward = max(attempt.reward, result.reward)
        attempt.failures_in_row = attempt.failures_in_row + 1 if env.failed(result.observation) else 0
        if result.done:
            attempt.stopped = "the environment is done"
        elif self.options.patience and attempt.failures_in_row >= self.options.patience:
            attempt.stopped = f"patience ({self.options.patience} failed actions in a row)"
        return result.observation

    def _verdict(self, attempt: Attempt) -> Any:
        by_model, by_reward = attempt.said == "completed", attempt.reward > 0
        rule = self.options.success
        success = {"model": by_model, "reward": by_reward, "either": by_model or by_reward,
                   "both": by_model and by_reward}[rule]
        judges = [name for name, said in (("model", by_model), ("reward", by_reward)) if said]
        judge = "+".join(judges) if success else rule
        record = attempt.record(success, judge)
        return record if success else Failed(record)


#: The tool an executor with `act="tool"` offers: one action per call.
ACT = Tool("act", "Take one action in the environment; its observation comes back.",
           json.dumps({"type": "object", "properties": {"action": {"type": "string", "description":
                       "the action, as the environment takes it"}}, "required": ["action"],
                       "additionalProperties": False}, sort_keys=True))


def _action(found: ToolCall) -> str | None:
    """The action of a call of `act` (None for another tool or arguments without one)."""
    try:
        arguments = json.loads(found.arguments or "{}")
    except ValueError:
        return None
    action = arguments.get("action") if isinstance(arguments, dict) and found.name == "act" else None
    return action.strip() if isinstance(action, str) and action.strip() else None


def _first_line(text: str) -> str:
    """The model's line: its first non-blank line, without a leading `>`."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.lstrip(">").strip()
    return ""
