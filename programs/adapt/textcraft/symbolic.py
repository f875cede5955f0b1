"""Symbolic TextCraft handlers (no model): ADaPT's executor and planner played by the solver of
`decomp.programs.adapt.textcraft.recipes`, to test the controller program without a model.

    handler craft   = environment(name="textcraft")
    handler execute = textcraft_executor(environment="craft")
    handler plan    = textcraft_planner(environment="craft")

`textcraft_executor` makes one atomic attempt at a sub-task (`fetch 4 oak planks`): done at once
when the inventory already holds enough, one action when one action is enough, otherwise it
fails without acting, so the controller decomposes. `textcraft_planner` answers the plan of the
shallowest recipe in ADaPT's planner format (`Step 1: ...` lines and an `Execution Order:`).
"""
from __future__ import annotations

from typing import Any

from decomp.dsl.errors import HandlerError
from decomp.dsl.values import Failed
from decomp.handlers.base import Call, Options
from decomp.handlers.kinds.environment import ActsOnEnvironment
from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.programs.adapt.textcraft.recipes import parse_task, plan_actions, plan_text

__all__ = ["TextCraftExecutor", "TextCraftPlanner"]


class SymbolicOptions(Options):
    #: The name of an `environment` handler of the same file (a TextCraft one).
    environment: str


class _Symbolic(ActsOnEnvironment):
    Options = SymbolicOptions
    cacheable = False

    def textcraft(self, call: Call) -> TextCraft:
        env = call.environment(self.options.environment)
        if not isinstance(env, TextCraft):
            raise HandlerError(f"the environment of [{self.options.environment}] is "
                               f"{type(env).__name__}, not a TextCraft environment")
        return env


class TextCraftExecutor(_Symbolic):
    """One atomic attempt at the sub-task in the query; answers a record of what it did
    (`Failed(record)` when the sub-task is not done)."""

    kind = "textcraft_executor"

    async def run(self, call: Call) -> Any:
        task = call.query.strip()
        record: dict[str, Any] = {"task": task, "success": False, "judge": "symbolic", "reward": 0.0,
                                  "stopped": "", "iterations": 0, "actions": []}
        try:
            item, count = parse_task(task)
        except ValueError as err:
            return Failed({**record, "stopped": "unreadable task", "why": f"unreadable task: {err}"})
        env = self.textcraft(call)
        if env.inventory.get(item, 0) >= count:
            record.update(success=True, stopped="done", reward=_reward(env))
            return record
        try:
            actions = plan_actions(item, count, env.inventory, env.recipes)
        except ValueError as err:
            return Failed({**record, "stopped": "too deep", "why": str(err), "reward": _reward(env)})
        if actions is None:
            record.update(stopped="impossible", reward=_reward(env))
            return Failed(record)
        if len(actions) != 1:
            record.update(stopped="cannot do it in one action", reward=_reward(env))
            return Failed(record)
        action = actions[0]
        result = env.step(action)
        ok = not env.failed(result.observation) and env.inventory.get(item, 0) >= count
        call.child("iteration", label=action, answer=result.observation, failed=not ok)
        record.update(success=ok, stopped="done" if ok else "action failed", iterations=1,
                      actions=[action], reward=_reward(env, result.reward))
        return record if ok else Failed(record)


def _reward(env: TextCraft, step_reward: float = 0.0) -> float:
    return max(step_reward, 1.0 if env.solved else 0.0)


class TextCraftPlanner(_Symbolic):
    """The plan for the sub-task in the query, from the environment's inventory and recipes."""

    kind = "textcraft_planner"

    async def run(self, call: Call) -> Any:
        try:
            item, count = parse_task(call.query)
        except ValueError as err:
            return Failed(f"unreadable task: {err}")
        env = self.textcraft(call)
        try:
            return plan_text(item, count, env.inventory, env.recipes)
        except ValueError as err:
            return Failed(f"no plan: {err}")
