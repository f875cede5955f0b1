"""The registry: the tables of handler kinds, Python functions, model backends, environments,
metrics and CLI commands that one run sees, each name with the plugin that registered it.

It is filled by plugins (`decomp.handlers.plugins`: the built-in ones and third parties', read
the same way) and by the `handler_kind` / `python_handler` / `environment` decorators. A name
is registered once: a second registration of a taken name by something else is refused with a
`RegistryConflict` naming both owners.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from decomp.dsl.errors import DecompError
from decomp.handlers.sandbox.imports import import_function, module_allowance
from decomp.handlers.sandbox.trust import NO_TRUST, Trust


class RegistryConflict(DecompError, ValueError):
    """A name registered twice: the first registration stands."""


class Registry:
    """Maps kind names to `Handler` classes, function names to callables, model schemes and
    environment names to factories; `owners` says which plugin registered each name."""

    def __init__(self):
        self.kinds: dict[str, type] = {}
        self.functions: dict[str, Callable[..., Any]] = {}
        self.model_backends: dict[str, Callable[..., Any]] = {}
        self.environments: dict[str, Callable[..., Any]] = {}
        #: metric name -> function(prediction, gold) -> float (`decomp eval --metric NAME`)
        self.metrics: dict[str, Callable[[Any, Any], float]] = {}
        #: (table, name) -> the plugin (or module) that registered it
        self.owners: dict[tuple[str, str], str] = {}
        #: Set by `decomp.handlers.plugins.load` once the plugins are in.
        self.plugins_loaded = False

    # ---- registration
    def add_kind(self, cls: type, name: str | None = None, owner: str | None = None) -> type:
        """Register the `Handler` subclass `cls` as the kind `name` (default: `cls.kind`)."""
        return self._add("kinds", name or cls.kind, cls, owner)

    def add_function(self, fn: Callable[..., Any], name: str | None = None,
                     owner: str | None = None, replace: bool = False) -> Callable[..., Any]:
        """Register `fn` for `python(function="name")` (`replace`: over a function of that name
        registered before, on purpose)."""
        return self._add("functions", name or fn.__name__, fn, owner, replace)

    def add_model_backend(self, scheme: str, factory: Callable[..., Any], owner: str | None = None) -> None:
        """Register `factory(name, settings) -> Model` for model specs `scheme:NAME`."""
        self._add("model_backends", scheme, factory, owner)

    def add_environment(self, name: str, factory: Callable[..., Any], owner: str | None = None) -> None:
        """Register `factory(fields) -> Environment` as the environment `name`."""
        self._add("environments", name, factory, owner)

    def add_metric(self, name: str, function: Callable[[Any, Any], float], owner: str | None = None) -> None:
        """Register `function(prediction, gold) -> float` as the metric `name`."""
        self._add("metrics", name, function, owner)

    def _add(self, table: str, name: str, obj: Any, owner: str | None, replace: bool = False) -> Any:
        if not isinstance(name, str) or not name:
            raise RegistryConflict(f"{_what(table)} needs a non-empty name, got {name!r}")
        entries: dict[str, Any] = getattr(self, table)
        owner = owner or getattr(obj, "__module__", None) or "?"
        held = entries.get(name)
        if held is not None and not replace and held is not obj and (_origin(held) is None or _origin(held) != _origin(obj)):
            first = self.owners.get((table, name), "?")
            raise RegistryConflict(f"the {_what(table)} {name!r} is already registered by {first!r}; "
                                   f"{owner!r} may not register it again (choose another name)")
        entries[name] = obj
        self.owners[(table, name)] = owner
        return obj

    # ---- lookup
    def kind(self, name: str) -> type | None:
        return self.kinds.get(name)

    def function(self, name: str, folder: str | Path | None = None, local: tuple[Path, ...] = (),
                 trust: Trust = NO_TRUST) -> Callable[..., Any] | None:
        """A registered function by name, or a `module:attr` Python function imported on demand,
        the module looked for in `folder` (the program's own folder) first. Only modules whose
        file lies in `folder` (or in a folder of `local`, the main program's) and those `trust`
        trusts (`decomp.handlers.sandbox.trust.Trust`) are imported; see `function_problem` for why one is refused."""
        if name in self.functions:
            return self.functions[name]
        found = import_function(name, folder, local, trust)
        return found if callable(found) else None

    def function_problem(self, name: str, folder: str | Path | None = None, local: tuple[Path, ...] = (),
                         trust: Trust = NO_TRUST) -> str | None:
        """Why `function(name, folder)` finds nothing, in words; None when it finds a function."""
        if self.function(name, folder, local, trust) is not None:
            return None
        found = import_function(name, folder, local, trust)
        return found if isinstance(found, str) else f"no function is registered as {name!r}"

    def function_origin(self, name: str, folder: str | Path | None = None, local: tuple[Path, ...] = (),
                        trust: Trust = NO_TRUST) -> str | None:
        """Why the function `name` may be called: "registered", "local" (its module's file is in
        the program's folder) or "trusted"; None when it may not (nothing is imported)."""
        if name in self.functions:
            return "registered"
        module, sep, attr = name.partition(":")
        return module_allowance(module, folder, local, trust) if sep and module and attr else None

    def model_backend(self, scheme: str) -> Callable[..., Any] | None:
        """The factory for model specs `scheme:...`, called as factory(name, settings)."""
        return self.model_backends.get(scheme)

    def environment(self, name: str) -> Callable[..., Any] | None:
        """The factory of the environment `name`, called as factory(row fields)."""
        return self.environments.get(name)


def _what(table: str) -> str:
    return {"kinds": "handler kind", "functions": "python function", "model_backends": "model scheme",
            "environments": "environment", "metrics": "metric"}[table]


def _origin(obj: Any) -> tuple[str, str] | None:
    """Where `obj` is defined: the same definition imported again (a plugin file loaded twice)
    replaces its earlier registration instead of conflicting with it."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return (module, name) if module and name and "<locals>" not in name else None


#: The process-wide default registry; `Session(registry=...)` can take another one.
default_registry = Registry()


def handler_kind(name: str, registry: Registry = default_registry):
    """Class decorator: register a `Handler` subclass as the kind `name`."""

    def register(cls: type) -> type:
        cls.kind = name
        return registry.add_kind(cls, name)

    return register


def environment(name: str, registry: Registry = default_registry):
    """Decorator: register `factory(fields) -> Environment` as the environment `name`."""

    def register(factory):
        registry.add_environment(name, factory)
        return factory

    return register


def python_handler(name: str | None = None, registry: Registry = default_registry):
    """Function decorator: make `fn` usable as `python(function="name")` in .decomp files."""

    def register(fn):
        return registry.add_function(fn, name)

    return register
