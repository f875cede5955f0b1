"""One registry for handler kinds, python functions and model backends.

Built-in kinds register here exactly as plugins do: with the `handler_kind` decorator, or from
the entry-point group `decomp.handlers` (a `Handler` subclass registers as a kind, a plain
function as a python handler function, a module is imported so its decorators run).
"""
from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points
from typing import Any, Callable

from decomp.handlers.base import Handler

ENTRY_POINT_GROUP = "decomp.handlers"


class Registry:
    """Maps kind names to `Handler` classes, function names to callables, model schemes to factories."""

    def __init__(self):
        self.kinds: dict[str, type[Handler]] = {}
        self.functions: dict[str, Callable[..., Any]] = {}
        self.model_backends: dict[str, Callable[..., Any]] = {}
        self._entry_points_loaded = False

    @classmethod
    def with_builtins(cls) -> "Registry":
        """A new registry holding the built-in kinds and model backends (those registered in the
        default registry so far: importing `decomp` registers them all), for adding kinds of
        one's own in isolation."""
        from decomp.handlers import kinds  # noqa: F401  (registers this package's kinds)

        reg = cls()
        reg.kinds.update(default_registry.kinds)
        reg.model_backends.update(default_registry.model_backends)
        return reg

    # ---- registration
    def add_kind(self, cls: type[Handler], name: str | None = None) -> type[Handler]:
        self.kinds[name or cls.kind] = cls
        return cls

    def add_function(self, fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
        self.functions[name or fn.__name__] = fn
        return fn

    def add_model_backend(self, scheme: str, factory: Callable[..., Any]) -> None:
        self.model_backends[scheme] = factory

    # ---- lookup
    def kind(self, name: str) -> type[Handler] | None:
        self._load_entry_points()
        return self.kinds.get(name)

    def function(self, name: str) -> Callable[..., Any] | None:
        """A registered function by name, or a `module:attr` Python function imported on demand
        (see `function_problem` for why one is refused)."""
        self._load_entry_points()
        if name in self.functions:
            return self.functions[name]
        found = _import_function(name)
        return found if callable(found) else None

    def function_problem(self, name: str) -> str | None:
        """Why `function(name)` finds nothing, in words; None when it finds a function."""
        if self.function(name) is not None:
            return None
        found = _import_function(name)
        return found if isinstance(found, str) else f"no function is registered as {name!r}"

    def model_backend(self, scheme: str) -> Callable[..., Any] | None:
        """The factory for model specs `scheme:...`, called as factory(name, settings)."""
        self._load_entry_points()
        return self.model_backends.get(scheme)

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            self._register_entry_point(ep.name, ep.load())

    def _register_entry_point(self, name: str, obj: Any) -> None:
        if inspect.isclass(obj) and issubclass(obj, Handler):
            self.add_kind(obj, name if not obj.kind else obj.kind)
        elif callable(obj) and not inspect.ismodule(obj):
            self.add_function(obj, name)


#: Modules whose functions a .decomp file may not call by `module:attr`: they reach the shell,
#: the file system or the interpreter. A .decomp file is code all the same: run only files you
#: trust; this list stops the obvious abuse, not a determined author.
DENIED_MODULES = frozenset({
    "os", "posix", "nt", "subprocess", "shutil", "sys", "builtins", "importlib", "runpy", "pty",
    "socket", "ctypes", "multiprocessing", "pickle", "marshal", "code", "codeop", "pathlib", "tempfile",
    "signal", "io", "pdb", "webbrowser", "http", "urllib", "ftplib", "smtplib", "asyncio",
})


def _import_function(name: str) -> Callable[..., Any] | str:
    """The Python function `module:attr`, or why it cannot be used."""
    module, sep, attr = name.partition(":")
    if not sep or not module or not attr:
        return f"{name!r} is neither a registered function nor a 'module:function' path"
    if module.split(".")[0] in DENIED_MODULES:
        return f"functions of the module {module!r} may not be called from a .decomp file"
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as err:  # the module's own import error, whatever it is
        return f"cannot load {name!r}: {type(err).__name__}: {err}"
    if not inspect.isfunction(obj):
        return f"{name!r} is not a Python function (builtins and classes are not allowed)"
    return obj


#: The process-wide default registry; `Session(registry=...)` can take another one.
default_registry = Registry()


def handler_kind(name: str, registry: Registry = default_registry):
    """Class decorator: register a `Handler` subclass as the kind `name`."""

    def register(cls: type[Handler]) -> type[Handler]:
        cls.kind = name
        return registry.add_kind(cls, name)

    return register


def python_handler(name: str | None = None, registry: Registry = default_registry):
    """Function decorator: make `fn` usable as `python(function="name")` in .decomp files."""

    def register(fn):
        return registry.add_function(fn, name)

    return register
