"""The plugin hooks (pluggy, as in simonw/llm): what a plugin may implement (`Specs`), the marker
it implements them with (`hookimpl`, also `decomp.hookimpl`), and the table of built-in plugins
as the top of the package hands it down (`Table`, `use_table`: `decomp.plugins` does when
`decomp` is imported). It imports nothing of decomp, so that importing `decomp` stays light;
`decomp.handlers.plugins` loads the plugins into registries.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

import pluggy

PROJECT = "decomp"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class Specs:
    """The hooks a plugin may implement."""

    @hookspec
    def register_kinds(self, register: Callable[..., Any]) -> None:
        """Call `register(HandlerSubclass, name=None)` for each handler kind."""

    @hookspec
    def register_models(self, register: Callable[..., Any]) -> None:
        """Call `register(scheme, factory)`: `--model scheme:NAME` makes `factory(NAME, settings)`
        (a `decomp.runtime.models.base.Backend` for a factory that also checks declarations)."""

    @hookspec
    def register_environments(self, register: Callable[..., Any]) -> None:
        """Call `register(name, factory)`: `environment(name=...)` makes `factory(row_fields)` per row."""

    @hookspec
    def register_functions(self, register: Callable[..., Any]) -> None:
        """Call `register(fn, name=None)`: `python(function="name")` calls `fn`."""

    @hookspec
    def register_metrics(self, register: Callable[..., Any]) -> None:
        """Call `register(name, function)`: `decomp eval --metric name` scores with
        `function(prediction, gold) -> float` (gold: one alternative, a list of strings)."""

    @hookspec
    def register_commands(self, cli: Any) -> None:
        """Add click commands or groups to `cli`, the `decomp` command group (called by the
        command line only)."""


@dataclass(frozen=True)
class Table:
    """The built-in plugins, as the top of the package lists them (`decomp.plugins`): `plugins()`
    imports and returns those a session registers (kinds, model schemes, environments, metrics),
    `commands()` those that only add commands to the command line; each in the order they
    register."""

    plugins: Callable[[], Sequence[ModuleType]] = tuple
    commands: Callable[[], Sequence[ModuleType]] = tuple


_table = Table()


def use_table(table: Table) -> None:
    """Take `table` as the built-in plugins (`decomp.plugins` hands its own when `decomp` is
    imported); plugins loaded from another table are loaded again on next use."""
    global _table
    _table = table


def table() -> Table:
    """The built-in plugins handed down (an empty table until `decomp.plugins` is imported)."""
    return _table
