"""Plugins loaded into registries: built-in and third-party plugins, read the same way.

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

The hooks and `hookimpl` live in `decomp.handlers.hooks` (re-exported here); the loading lives
here; the table of built-in plugins lives at the top of the package, `decomp.plugins` (as
simonw/llm keeps its default plugins), which hands it down when `decomp` is imported. A
third-party package names its module in the entry-point group `decomp`
(`[project.entry-points.decomp] name = "module"`); `--plugin MODULE` adds one for a command.
A session registers the table's built-in plugins, then the entry points'; the built-in plugins
that only add commands are imported when the command line first needs a command it does not
hold (`register_commands`), never by a session.

A plugin that fails to import, whose hook raises, or that registers a name already taken is
refused by name: the problem is kept in `problems()` (the CLI prints each once as a warning) and
every other plugin goes on working.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Callable, Sequence

import pluggy

from decomp.handlers import hooks
from decomp.handlers.hooks import PROJECT, Specs, hookimpl, hookspec
from decomp.handlers.registry import Registry, RegistryConflict, default_registry

__all__ = ["ENTRY_POINT_GROUP", "Plugin", "PluginSet", "Specs", "add_plugin_module", "builtin_registry", "hookimpl",
           "hookspec", "load", "plugin_set", "plugins", "problems", "refresh", "register_commands"]

#: The entry-point group of plugin modules (pluggy hooks).
ENTRY_POINT_GROUP = "decomp"

#: hook name -> registry table it fills (commands have none: they go on the click group)
_TABLES = {"register_kinds": "kinds", "register_models": "model_backends",
           "register_environments": "environments", "register_functions": "functions", "register_metrics": "metrics"}


@dataclass
class Plugin:
    """One plugin as loaded: its name, where it came from, what it registered."""

    name: str
    source: str  # "builtin", "entry point MODULE", "--plugin SPEC"
    module: ModuleType | None = None
    registered: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class PluginSet:
    """The plugin manager and what loading found, for one process."""

    manager: pluggy.PluginManager
    plugins: dict[str, Plugin] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: The table of built-in plugins these came from (`decomp.handlers.hooks.table`).
    table: hooks.Table = field(default_factory=hooks.Table)
    #: Whether the table's command plugins are in (`register_commands` adds them).
    commands_loaded: bool = False


_loaded: PluginSet | None = None


def _manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(Specs)
    return manager


def plugin_set() -> PluginSet:
    """The plugins of this process: the table's built-ins, then the entry points, loaded once."""
    global _loaded
    if _loaded is None or _loaded.table is not hooks.table():
        found = PluginSet(_manager(), table=hooks.table())
        _add_builtins(found, found.table.plugins)
        for ep in _entry_points(found, ENTRY_POINT_GROUP):
            _add_module(found, ep.name, f"entry point {ep.value}", ep.load)
        _loaded = found
    return _loaded


def _add_builtins(found: PluginSet, listed: Callable[[], Sequence[ModuleType]]) -> None:
    try:
        modules = listed()
    except Exception as err:  # a built-in that cannot be imported (a broken installation)
        found.problems.append(f"the built-in plugins cannot be loaded: {type(err).__name__}: {err}")
        return
    for module in modules:
        _add_module(found, module.__name__, "builtin", lambda module=module: module)


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
    return registry


def builtin_registry() -> Registry:
    """A new registry holding every plugin's kinds, models and environments (the built-ins and
    installed plugins), for adding kinds of one's own in isolation."""
    return load(Registry())


def problems() -> list[str]:
    """What went wrong loading plugins, one line each (a plugin named in each)."""
    return list(plugin_set().problems)


def plugins() -> list[Plugin]:
    """The loaded plugins: the table's built-ins, the entry points', then the table's command plugins
    once the command line asked for them (`register_commands`); the default registry is filled
    first, so each says what it registered."""
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
    from decomp.handlers.base import Handler  # (here: `import decomp` imports this module, and stays light)

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


def register_commands(cli: Any) -> list[str]:
    """Let every plugin add its commands to the click group `cli` (the table's command plugins
    imported first, once); the problems, in words (a plugin whose commands fail to register, or
    that takes a command name already there). Only the command line calls it."""
    found = plugin_set()
    before = len(found.problems)
    if not found.commands_loaded:
        found.commands_loaded = True
        _add_builtins(found, found.table.commands)
    for impl in found.manager.hook.register_commands.get_hookimpls():
        _add_commands(found, impl, cli)
    return found.problems[before:]


def _add_commands(found: PluginSet, impl, cli: Any) -> None:
    """One plugin's `register_commands(cli)`: a command it replaces keeps the first one."""
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
