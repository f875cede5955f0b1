"""Environments with effects (ADaPT): the `Environment` interface that plugins implement (the
`environment` handler kind that acts on one is `decomp.handlers.kinds.environment`).

An environment is registered by name with a factory `factory(fields) -> Environment`, called
with the row's fields the first time a row uses it (one live instance per row and handler):

    @hookimpl
    def register_environments(register):
        register("textcraft", TextCraft.from_row)

(a plugin, see `decomp.handlers.plugins`), or with the `environment` decorator. In a .decomp
file

    handler craft = environment(name="textcraft")

declares it; `QS: [craft] get 2 oak logs` is one action (the answer is the observation; the
outcome fails when the environment says the action failed), and the query `reset` replaces the
row's instance by a fresh one from the factory (its answer is the opening observation).
Executors act on it through `Call.environment`. Steps that can reach an environment run in
text order and are never answered from the step cache (see `decomp.dsl.checker.effectful`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["Environment", "Factory", "StepResult"]


@dataclass(frozen=True)
class StepResult:
    """What one action did: the observation the agent reads, the reward, whether the episode ended."""

    observation: str
    reward: float = 0.0
    done: bool = False


class Environment:
    """One row's live environment. Subclasses implement `step`; the rest have defaults."""

    def start(self) -> str:
        """The opening observation (what the agent is told before its first action)."""
        return ""

    def step(self, action: str) -> StepResult:  # pragma: no cover - interface
        raise NotImplementedError

    def failed(self, observation: str) -> bool:
        """Whether `observation` says the action failed (executors count these for patience)."""
        return False

    def summary(self) -> dict[str, Any]:
        """What the results line records for the row (JSON): reward, success, actions taken...
        A `success` key is the environment's verdict (summaries count it as `env_success_rate`);
        a `group` key groups rows in summaries (TextCraft: the recipe depth)."""
        return {}

    def close(self) -> None:
        """Release what the instance holds (a process, a browser): called when its row ends or
        when `reset` replaces it."""


Factory = Callable[[Mapping[str, Any]], Environment]
