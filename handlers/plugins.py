"""The one plugin table: built-in and third-party plugins, read the same way.

A plugin is a module with hook implementations (pluggy, as in simonw/llm):

    from decomp import hookimpl

    @hookimpl
    def register_kinds(register):            register(MyKind)  # or register(MyKind, name="mine")
    @hookimpl
    def register_models(register):          register("echo", factory)   # factory(name, settings) -> Model
    @hookimpl
    def register_environments(register):     register("counter", factory)  # factory(row fields) -> Environment
    @hookimpl
    def register_functions(register):        register(fn, name="fn")   # python(function="fn")
    @hookimpl
    def register_metrics(register):          register("len_ratio", fn)  # fn(prediction, gold) -> float
    @hookimpl
    def register_commands(cli):              cli.add_command(...)      # a click group: `decomp ...`

Built-ins are the modules of `BUILTIN_PLUGINS`; a third-party package names its module in the
entry-point group `decomp` (`[project.entry-points.decomp] name = "module"`); `--plugin MODULE`
adds one for a command. The older entry-point groups `decomp.handlers` (a `Handler` subclass:
a kind; a function: a python function; a module: imported so its decorators run) and
`decomp.environments` (a factory) are read too.

A plugin that fails to import, whose hook raises, or that registers a name already taken is
refused by name: the problem is kept in `problems()` (the CLI prints each once as a warning) and
every other plugin goes on working.
"""
from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Callable

import click
import pluggy

from decomp.dsl.errors import DecompError
from decomp.handlers.base import Handler
from decomp.handlers.registry import Registry, RegistryConflict, default_registry

PROJECT = "decomp"
#: The entry-point group of plugin modules (pluggy hooks).
ENTRY_POINT_GROUP = "decomp"
#: Older groups: kinds or functions (`decomp.handlers`), environment factories (`decomp.environments`).
HANDLERS_GROUP = "decomp.handlers"
ENVIRONMENTS_GROUP = "decomp.environments"

#: The built-in plugins, in the order they register (read exactly like third-party ones).
BUILTIN_PLUGINS = (
    "decomp.handlers.kinds",
    "decomp.programs.adapt.textcraft.plugin",
    "decomp.handlers.search.plugin",
    "decomp.runtime.models.local",
    "decomp.runtime.models.openai_backend",
    "decomp.runtime.testing.fake",
    "decomp.programs.adapt.textcraft.scripted",
    "decomp.runtime.scoring.metrics",
    "decomp.programs.tasklama.taskgraph.commands",
    "decomp.learning.tuning.command",
    "decomp.learning.optimize.command",
    "decomp.editors.lsp.command",
)

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: hook name -> registry table it fills (commands have none: they go on the click group)
_TABLES = {"register_kinds": "kinds", "register_models": "model_backends",
           "register_environments": "environments", "register_functions": "functions", "register_metrics": "metrics"}


class Specs:
    """The hooks a plugin may implement."""

    @hookspec
    def register_kinds(self, register: Callable[..., Any]) -> None:
        """Call `register(HandlerSubclass, name=None)` for each handler kind."""

    @hookspec
    def register_models(self, register: Callable[..., Any]) -> None:
        """Call `register(scheme, factory)`: `--model scheme:NAME` makes `factory(NAME, settings)`."""

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
        """Add click commands or groups to `cli`, the `decomp` command group."""


@dataclass
class Plugin:
    """One plugin as loaded: its name, where it came from, what it registered."""

    name: str
    source: str  # "builtin", "entry point", "--plugin", "entry point (decomp.handlers)", ...
    module: ModuleType | None = None
    registered: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class PluginSet:
    """The plugin manager and what loading found, for one process."""

    manager: pluggy.PluginManager
    plugins: dict[str, Plugin] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    legacy: list[tuple[str, str, Any]] = field(default_factory=list)  # (group, name, loaded object)


_loaded: PluginSet | None = None


def _manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(Specs)
    return manager


def plugin_set() -> PluginSet:
    """The plugins of this process: the built-ins, then the entry points, loaded once."""
    global _loaded
    if _loaded is None:
        found = PluginSet(_manager())
        for name in BUILTIN_PLUGINS:
            _add_module(found, name, "builtin", lambda name=name: importlib.import_module(name))
        for ep in _entry_points(found, ENTRY_POINT_GROUP):
            _add_module(found, ep.name, f"entry point {ep.value}", ep.load)
        for group in (HANDLERS_GROUP, ENVIRONMENTS_GROUP):
            for ep in _entry_points(found, group):
                try:
                    found.legacy.append((group, ep.name, ep.load()))
                except Exception as err:  # the plugin's own import error, whatever it is
                    found.problems.append(_import_problem(ep.name, f"entry point {ep.value}", err))
        _loaded = found
    return _loaded


def refresh() -> None:
    """Forget the loaded plugins: the next `load` of a registry not loaded yet reads the built-ins
    and the entry points again (after a plugin was installed into a running process)."""
    global _loaded
    _loaded = None


def _entry_points(found: PluginSet, group: str) -> list:
    try:
        return list(entry_points(group=group))
    except Exception as err:  # a broken distribution's metadata
        found.problems.append(f"plugins: cannot read the entry points of {group!r}: {type(err).__name__}: {err}")
        return []


def _add_module(found: PluginSet, name: str, source: str, load: Callable[[], ModuleType]) -> Plugin | None:
    if name in found.plugins:
        found.problems.append(f"plugin {name!r} ({source}): a plugin of that name is already loaded "
                              f"({found.plugins[name].source}); skipped")
        return None
    try:
        module = load()
        found.manager.register(module, name=name)
    except Exception as err:
        found.problems.append(_import_problem(name, source, err))
        return None
    plugin = found.plugins[name] = Plugin(name, source, module)
    return plugin


def _import_problem(name: str, source: str, err: Exception) -> str:
    return f"plugin {name!r} ({source}) cannot be loaded: {type(err).__name__}: {err}"


def add_plugin_module(module: ModuleType, name: str | None = None, source: str = "--plugin") -> list[str]:
    """Register an imported module's hooks (a `--plugin` module) with the process's plugins and
    fill the default registry from it; the problems it caused, in words."""
    found = plugin_set()
    name = name or module.__name__
    if name in found.plugins or found.manager.is_registered(module):
        return []
    before = len(found.problems)
    plugin = _add_module(found, name, source, lambda: module)
    if plugin is not None and default_registry.plugins_loaded:
        _fill(default_registry, found, [plugin])
    return found.problems[before:]


def load(registry: Registry = default_registry) -> Registry:
    """Fill `registry` from every plugin (once per registry); returns it."""
    if not registry.plugins_loaded:
        registry.plugins_loaded = True
        found = plugin_set()
        _fill(registry, found, list(found.plugins.values()))
        for group, name, obj in found.legacy:
            _legacy(registry, found, group, name, obj)
    return registry


def builtin_registry() -> Registry:
    """A new registry holding every plugin's kinds, models and environments (the built-ins and
    installed plugins), for adding kinds of one's own in isolation."""
    return load(Registry())


def problems() -> list[str]:
    """What went wrong loading plugins, one line each (a plugin named in each)."""
    return list(plugin_set().problems)


def plugins() -> list[Plugin]:
    """The loaded plugins, built-ins first (load the default registry first to see what each registered)."""
    load(default_registry)
    return list(plugin_set().plugins.values())


def _fill(registry: Registry, found: PluginSet, chosen: list[Plugin]) -> None:
    for plugin in chosen:
        for hook, table in _TABLES.items():
            for impl in getattr(found.manager.hook, hook).get_hookimpls():
                if impl.plugin_name == plugin.name:
                    _call(registry, found, plugin, impl, table)


def _call(registry: Registry, found: PluginSet, plugin: Plugin, impl, table: str) -> None:
    def register(*args: Any, **kwargs: Any) -> Any:
        try:
            return _register(registry, table, plugin.name, *args, **kwargs)
        except RegistryConflict as err:
            found.problems.append(f"plugin {plugin.name!r}: {err}")
        except TypeError as err:
            found.problems.append(f"plugin {plugin.name!r}: bad registration in {impl.function.__name__}: {err}")
        return None

    try:
        impl.function(register=register)
    except Exception as err:  # the plugin's own bug: named, the rest go on
        found.problems.append(f"plugin {plugin.name!r}: {impl.function.__name__} failed: {type(err).__name__}: {err}")
    if registry is default_registry:
        names = [n for (t, n), owner in registry.owners.items() if t == table and owner == plugin.name]
        if names:
            plugin.registered[table] = names


def _register(registry: Registry, table: str, owner: str, *args: Any, **kwargs: Any) -> Any:
    """One `register(...)` call of a plugin's hook, its arguments bound by the table's signature."""
    return _REGISTERS[table](registry, owner, *args, **kwargs)


def _register_kind(registry: Registry, owner: str, cls: Any, name: str | None = None) -> Any:
    if not (inspect.isclass(cls) and issubclass(cls, Handler)):
        raise TypeError(f"register_kinds registers Handler subclasses, not {cls!r}")
    if not (name or cls.kind):
        raise TypeError(f"{cls.__name__} has no `kind` name (set `kind = \"...\"` or pass name=)")
    return registry.add_kind(cls, name or cls.kind, owner=owner)


def _register_function(registry: Registry, owner: str, fn: Any, name: str | None = None) -> Any:
    if not callable(fn):
        raise TypeError(f"register_functions registers callables, not {fn!r}")
    return registry.add_function(fn, name, owner=owner)


def _factory(adder: str) -> Callable[..., Any]:
    def register(registry: Registry, owner: str, name: str, factory: Any) -> Any:
        if not callable(factory):
            raise TypeError(f"register({name!r}, factory) needs a callable factory")
        return getattr(registry, adder)(name, factory, owner=owner)

    return register


_REGISTERS = {"kinds": _register_kind, "functions": _register_function,
              "model_backends": _factory("add_model_backend"), "environments": _factory("add_environment"),
              "metrics": _factory("add_metric")}
for _fn in _REGISTERS.values():  # a bad call's TypeError reads `register() missing ...`
    _fn.__qualname__ = _fn.__name__ = "register"


def _legacy(registry: Registry, found: PluginSet, group: str, name: str, obj: Any) -> None:
    try:
        if group == ENVIRONMENTS_GROUP:
            registry.add_environment(name, obj, owner=name)
        elif inspect.isclass(obj) and issubclass(obj, Handler):
            registry.add_kind(obj, obj.kind or name, owner=name)
        elif callable(obj) and not inspect.ismodule(obj):
            registry.add_function(obj, name, owner=name)
    except RegistryConflict as err:
        found.problems.append(f"plugin {name!r} (entry point, {group}): {err}")


def register_commands(cli: Any) -> list[str]:
    """Let every plugin add its commands to the click group `cli`; the problems, in words (a
    plugin whose commands fail to register, or that takes a command name already there)."""
    found = plugin_set()
    before = len(found.problems)
    for impl in found.manager.hook.register_commands.get_hookimpls():
        had = dict(cli.commands)
        subs = {name: set(getattr(group, "commands", ())) for name, group in had.items()}
        try:
            impl.function(cli=cli)
        except Exception as err:
            found.problems.append(f"plugin {impl.plugin_name!r}: register_commands failed: {type(err).__name__}: {err}")
        for command, obj in list(cli.commands.items()):
            if command in had and had[command] is not obj:  # replaced a command: the first one stands
                cli.commands[command] = had[command]
                found.problems.append(f"plugin {impl.plugin_name!r}: the command {command!r} is already taken; "
                                      "not replaced")
        plugin = found.plugins.get(impl.plugin_name)
        added = [c for c in cli.commands if c not in had]
        added += [f"{name} {sub}" for name, before in subs.items()
                  for sub in getattr(cli.commands.get(name), "commands", ()) if sub not in before]
        if plugin is not None and added:
            plugin.registered["commands"] = added
    return found.problems[before:]


def fail(err: Exception) -> None:
    """End a command on `err` as every `decomp` command does: its message on stderr (a positioned
    `DecompError` as ``file:line:col: ...`` with its line and caret, any other as ``error: ...``),
    exit status 1. For plugins' commands."""
    said = err.format() if isinstance(err, DecompError) else str(err)
    click.echo(said if getattr(err, "span", None) else f"error: {said}", err=True)
    sys.exit(1)
