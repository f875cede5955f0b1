"""Environments with effects (ADaPT): the `Environment` interface, the registry of factories,
and the `environment` handler kind.

An environment is registered by name with a factory `factory(fields) -> Environment`, called
with the row's fields the first time a row uses it (one live instance per row and handler):

    @environment("textcraft")
    def make(fields): return TextCraft.from_row(fields)

or from the entry-point group `decomp.environments`. In a .decomp file

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

from decomp.dsl.errors import CheckError, HandlerError
from decomp.dsl.values import Failed
from decomp.handlers.base import Call, Handler, Options
from decomp.handlers.registry import default_registry, handler_kind

__all__ = ["ActsOnEnvironment", "Environment", "EnvironmentHandler", "StepResult", "environment"]


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


def environment(name: str, registry=default_registry):
    """Decorator: register `factory(fields) -> Environment` as the environment `name`."""

    def register(factory: Factory) -> Factory:
        registry.add_environment(name, factory)
        return factory

    return register


class ActsOnEnvironment(Handler):
    """Base of kinds that act on the environment an option names (`environment="craft"`: an
    `environment` handler of the same file): the checker sees the call, so such handlers are
    effectful, and the loader refuses a name that is no `environment(...)` handler."""

    def calls(self) -> dict[str, list]:
        return {self.options.environment: [self.error_span("environment")]}


class EnvironmentOptions(Options):
    name: str
    reset_query: str = "reset"


@handler_kind("environment")
class EnvironmentHandler(Handler):
    """Acts on the row's instance of a registered environment: the query is the action."""

    Options = EnvironmentOptions
    cacheable = False
    effects = True

    def check(self) -> list[CheckError]:
        if self.ctx.registry is not None and self.ctx.registry.environment(self.options.name) is None:
            known = ", ".join(sorted(self.ctx.registry.environments)) or "none"
            return [CheckError(f"[{self.name}] unknown environment {self.options.name!r}",
                               self.error_span("name"), expected=f"one of: {known}")]
        return []

    async def run(self, call: Call) -> Any:
        action = call.query.strip()
        if action == self.options.reset_query:
            env = call.environment(self.name, fresh=True)
            return env.start()
        if not action:
            raise HandlerError("the action is empty")
        env = call.environment(self.name)
        result = env.step(action)
        return Failed(result.observation) if env.failed(result.observation) else result.observation

    def make(self, fields: Mapping[str, Any]) -> Environment:
        """A new instance for a row, from the registered factory (its errors as `HandlerError`)."""
        factory = self.ctx.registry.environment(self.options.name) if self.ctx.registry else None
        if factory is None:
            raise HandlerError(f"unknown environment {self.options.name!r}")
        try:
            made = factory(fields)
        except HandlerError:
            raise
        except Exception as err:  # the factory's own complaint about the row
            raise HandlerError(f"environment {self.options.name!r} cannot start for this row: "
                               f"{type(err).__name__}: {err}") from err
        if not isinstance(made, Environment):
            raise HandlerError(f"environment {self.options.name!r}: the factory returned "
                               f"{type(made).__name__}, not an Environment")
        return made
