"""Kind `environment`: acts on the row's instance of a registered environment (the query is the
action), and `ActsOnEnvironment`, the base of kinds that act on one through an option (the
executor, TextCraft's symbolic agents). The interface environments implement is
`decomp.handlers.environment`."""
from __future__ import annotations

from typing import Any, Mapping

from decomp.dsl.errors import CheckError, HandlerError
from decomp.dsl.values import Failed
from decomp.handlers.base import Call, Handler, Options
from decomp.handlers.environment import Environment


class ActsOnEnvironment(Handler):
    """Base of kinds that act on the environment an option names (`environment="craft"`: an
    `environment` handler of the same file): the checker sees the call, so such handlers are
    effectful, and the loader refuses a name that is no `environment(...)` handler."""

    def calls(self) -> dict[str, list]:
        return {self.options.environment: [self.error_span("environment")]}


class EnvironmentOptions(Options):
    name: str
    reset_query: str = "reset"


class EnvironmentHandler(Handler):
    """Acts on the row's instance of a registered environment: the query is the action."""

    kind = "environment"
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
