"""The `python` handler kind: answer with what a Python function returns.

    @python_handler("reverse")
    def reverse(values): return list(reversed(values[0]))

    handler rev   = python(function="reverse")
    handler f     = python(function="helpers:f")         # helpers.py next to the .decomp file
    handler upper = python(function="string:capwords")   # refused unless trusted: --trust string

The cache key of a call holds the sha256 of the function's module file and of the project
modules it imports (`function_sources`), read from disk on every call; a module whose file
changed since it was imported is re-imported first (`fresh_function`), so a cached run never
answers what a fresh process would not.

A call runs in a worker process (`decomp.handlers.sandbox.workers`), where its deadline stops it and a
memory limit holds it: the parent decides what may be called and how it is found
(`worker_target`), the worker imports that very file and calls it (`answer_in_worker`), re-imported
there too when the sources the parent hashed (`function_sources`) changed. A function a worker
cannot import (a lambda, a closure, one of `__main__`) runs in a thread (`decomp.handlers.sandbox.offload`),
not containable: past its limit it is abandoned, and no memory limit applies.
"""
from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import copy
import hashlib
import importlib
import importlib.util
import inspect
import math
import site
import sys
import sysconfig
import threading
import traceback
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from decomp.dsl.errors import CheckError, CheckWarning, HandlerError
from decomp.dsl.sizes import answer_size, over_answer_limit
from decomp.dsl.text import shorten
from decomp.dsl.values import Failed
from decomp.handlers.base import Call, Handler
from decomp.handlers.base import Options as BaseOptions
from decomp.handlers.sandbox.offload import TimeLimitError
from decomp.handlers.sandbox.imports import (first_on_path, import_module, local_module_file, module_file,
                                     untrusted_folder)
from decomp.handlers.registry import Registry, default_registry
from decomp.handlers.sandbox.trust import NO_TRUST, FolderTrust, Trust, not_imported
from decomp.handlers.sandbox.workers import call_in_worker, capped

#: What a function may ask for by naming a parameter.
ARGUMENTS = ("query", "values", "inputs")


class PythonHandler(Handler):
    """Calls a registered (`@python_handler("name")`) or `module:attr` function.

    Options:
      function  the function's registered name or "module:attr" path (required); the module
                is looked for in the program's own folder first, then on the import path.
                Only registered functions, modules whose file is in the program's folder and
                trusted modules (`--trust MODULE`, `DECOMP_TRUST`) may be called: see
                `decomp.handlers.sandbox.trust`; anything else is a check error, imported never.
      timeout   seconds one call may take (> 0); not written: the run's `--handler-timeout`
                (default 10 s). Past it the call's worker process is killed.
      memory    MiB one call may add to its worker process (> 0; held by RLIMIT_DATA, its
                hard limit too, Linux only); what earlier calls in that worker kept (a
                module-level cache) counts; not written: the run's `--handler-memory`
                (default 1,024 MiB).

    Arguments are chosen by the function's signature: parameters named `query` (the sub-query
    text), `values` (list of the referenced values) and `inputs` (dict of named inputs) get
    those, by keyword; a `**kwargs` parameter gets all three. A function that names none of
    them but has exactly one required positional parameter (`def f(text)`, `len`) gets the
    query. A function a worker process can import (`worker_target`) runs there, sync or async
    (awaited in a loop of the worker's own), one call per worker at a time, its answer converted
    to JSON there: a call past its time limit is killed (`TimeLimitError`), one past its memory
    limit fails (`MemoryLimitError`), whatever it raises (`SystemExit`, `KeyboardInterrupt`,
    `CancelledError`, ... too) is its `HandlerError`, and a worker that dies is one too, naming
    its exit code or signal. Any other function (a lambda, a closure) runs as before: a sync one
    in a worker thread (its arguments copied and its answer converted there too), an async one
    awaited on the event loop, and past its limit it is abandoned, not stopped (a handler with 4
    such calls still running takes no more calls).
    The function is looked up in `call.registry` (the run's registry), else in the
    default registry (at construction and check time: the load context's `registry`, if any).
    The answer must be JSON-serialisable (tuples become lists; NaN and infinities are refused).
    An exception the function raises becomes a `HandlerError` whose `details` hold the
    traceback of the user's own frames (the trace records it).
    """

    kind = "python"

    class Options(BaseOptions):
        function: str
        timeout: float | None = None
        memory: float | None = None

    def __init__(self, name, options, decl, ctx):
        super().__init__(name, options, decl, ctx)
        self._registry: Registry = getattr(ctx, "registry", None) or default_registry
        self._folder = _resolved(getattr(ctx, "base_dir", None))
        #: The main program's folder: its modules are local too (see `Registry.function`).
        self._local = tuple((getattr(ctx, "roots", None) or ())[:1])
        #: The modules the loading session trusts (`Trust`): those a `module:attr` may come from.
        self._trust: Trust = getattr(ctx, "trust", None) or NO_TRUST
        #: A check's notice that the function was not imported: its folder is not trusted.
        self._not_imported: str | None = self._untrusted(getattr(ctx, "trusted_folders", None))
        self._fn = None if self._not_imported else self._registry.function(options.function, self._folder, self._local,
                                                                                          self._trust)
        self._reload_error: str | None = None
        if self._fn is not None:
            sources = function_sources(self._fn, self._folder)
            try:  # a module imported earlier in this process and edited since: load it again
                self._fn = fresh_function(self._fn, sources, self._folder)
            except Exception as err:  # the user's module no longer imports
                self._reload_error = f"{type(err).__name__}: {err}"
            module = options.function.partition(":")[0].partition(".")[0]
            if options.function not in self._registry.functions and local_module_file(module, self._folder):
                # modules imported from the program's folder are files of the program (run directories copy them)
                files = getattr(ctx, "files", None)
                if files is not None:
                    files.update(s.path for s in sources if s.path.is_relative_to(self._folder))

    def _untrusted(self, trust: FolderTrust | None) -> str | None:
        """For a check (`trust` given): why the function is not imported, when the folder of its
        module is not trusted (`decomp.handlers.sandbox.imports.untrusted_folder`); else None."""
        name = self.options.function
        if trust is None or name in self._registry.functions:
            return None
        folder = untrusted_folder(name, self._folder, self._local, trust, self._trust)
        return None if folder is None else f"python handler '{self.name}': {not_imported(name, folder)}"

    # ---- static checks
    def check(self) -> list[CheckError]:
        return self.timeout_problems() + self._memory_problems() + self._function_problems()

    def warnings(self) -> list[CheckWarning]:
        """The notice, at the declaration, that a check did not import the function (its folder
        is not trusted): everything else was checked."""
        if self._not_imported is None:
            return []
        return [CheckWarning(self._not_imported, self.decl.span if self.decl is not None else None)]

    def _memory_problems(self) -> list[CheckError]:
        mb = self.options.memory
        if mb is None or mb > 0:
            return []
        return [CheckError(f"memory must be > 0 MB, got {mb}", self.error_span("memory"))]

    def _function_problems(self) -> list[CheckError]:
        if self._not_imported is not None:  # said once, as a warning (`warnings`)
            return []
        if self._fn is None:
            return [CheckError(self._unknown_message(self._registry), self.error_span("function"))]
        if self._reload_error is not None:
            return [CheckError(f"python handler '{self.name}': re-importing the edited module of "
                               f"{self.options.function} failed: {self._reload_error}", self.error_span("function"))]
        try:
            _plan(self._fn)
        except TypeError as err:
            return [CheckError(f"python handler '{self.name}': {err}", self.error_span("function"))]
        return []

    def _unknown_message(self, registry: Registry) -> str:
        names = ", ".join(sorted(registry.functions)) or "none"
        problem = registry.function_problem(self.options.function, self._folder, self._local, self._trust)
        if (problem or "").startswith("python function "):  # not allowed: the message says how to allow it
            return f"python handler '{self.name}': {problem}"
        module, _, attr = self.options.function.partition(":")
        if module and attr:  # a path was given: what went wrong with it says it all
            return f"unknown python function {self.options.function!r}: {problem}"
        return (f"unknown python function {self.options.function!r}: {problem} "
                f"(registered: {names}; or give a 'module:function' path)")

    def cache_parts(self, call: Call) -> dict[str, Any]:
        """The options, query and values, plus the function's code and the sha256 of its
        module's source and of the project modules that module imports (an edit anywhere in
        them misses the cache), and the named inputs when the function reads them."""
        parts = super().cache_parts(call)
        parts["options"].pop("memory", None)  # a limit, like timeout=: it never decides an answer
        fn, sources = self._current(call)
        code = getattr(fn, "__code__", None)
        parts["function"] = [_name(fn), code_fingerprint(code) if code else None,
                             {s.module: s.sha256 for s in sources}]
        if "inputs" in _plan(fn):
            parts["inputs"] = dict(call.inputs)
        return parts

    # ---- running
    def memory_limit(self, call: Call) -> float:
        """MiB `call` may add to its worker process: the handler's `memory=` option when
        written, else its session's (`call.limits`: `--handler-memory`, default 1,024 MiB)."""
        return self.options.memory if self.options.memory is not None else call.limits.memory

    async def run(self, call: Call) -> Any:
        fn, sources = self._current(call)
        try:
            plan = _plan(fn)
        except TypeError as err:
            raise HandlerError(str(err), call.span) from err
        what = f"function {self.options.function}"
        target = worker_target(fn) if call.limits.workers else None
        if target is not None:
            return await self._contained(target, plan, sources, call, what)
        try:
            if inspect.iscoroutinefunction(fn):
                args, kwargs = _arguments(plan, call)
                result = _json_answer(await self.await_bounded(call, fn(*args, **kwargs), what=what))
            else:  # in a worker thread, its arguments copied and its answer converted there too
                result = await self.offload(call, _call, fn, plan, call, what=what)
                if inspect.isawaitable(result):
                    result = _json_answer(await self.await_bounded(call, result, what=what))
        except TimeLimitError:
            raise
        except _NotJSON as err:
            raise HandlerError(f"function {self.options.function} {err.message}", call.span) from None
        except Exception as err:
            raise HandlerError(f"function {self.options.function} raised "
                               f"{type(err).__name__}: {err}", call.span, details=user_traceback(err)) from err
        return result

    async def _contained(self, target: dict[str, Any], plan: tuple[str, ...], sources: list["Source"],
                         call: Call, what: str) -> Any:
        """The call in a worker process (`decomp.handlers.sandbox.workers`), under the time and memory limits."""
        payload = {"target": target, "folder": None if self._folder is None else str(self._folder),
                   "sources": [(s.module, str(s.path), s.sha256) for s in sources], "plan": plan,
                   "query": call.query, "values": list(call.values) if "values" in plan else None,
                   "inputs": dict(call.inputs) if "inputs" in plan else None, "answer_mb": call.limits.answer_mb}
        reply = await call_in_worker(WORKER_ENTRY, payload, limit=self.time_limit(call), memory_mb=self.memory_limit(call),
                                     what=what, option=self._timeout_option)
        if "answer" in reply:
            return Failed(reply["answer"]) if reply.get("failed") else reply["answer"]
        if "over_size" in reply:  # sized in the worker: the answer never came into this process
            raise over_answer_limit(self.name, reply["over_size"], payload["answer_mb"])
        if "not_json" in reply:
            raise HandlerError(f"{what} {reply['not_json']}", call.span)
        if "raised" in reply:
            kind, message = reply["raised"]
            raise HandlerError(f"{what} raised {kind}: {message}" if message else f"{what} raised {kind}", call.span,
                               details=reply["details"]) from _rebuilt(kind, message) if reply["builtin"] else None
        raise HandlerError(f"{what}: its worker process could not import it: {reply['unloadable']}", call.span,
                           details=reply["details"])

    def _resolve(self, call: Call) -> Callable[..., Any]:
        registry = call.registry
        own = registry is None or registry is self._registry
        fn = self._fn if own else registry.function(self.options.function, self._folder, self._local, self._trust)
        if fn is None:
            raise HandlerError(self._unknown_message(registry or self._registry), call.span)
        return fn

    def _current(self, call: Call) -> tuple[Callable[..., Any], list["Source"]]:
        """The function as a fresh process would load it now (its modules re-imported when
        their files changed), with the sources its cache key holds."""
        fn = self._resolve(call)
        sources = function_sources(fn, self._folder)
        try:
            fresh = fresh_function(fn, sources, self._folder)
        except Exception as err:  # the edited module no longer imports: the user's error
            raise HandlerError(f"function {self.options.function}: re-importing its edited module failed: "
                               f"{type(err).__name__}: {err}", call.span, details=user_traceback(err)) from err
        if fresh is not fn:
            if fn is self._fn:
                self._fn = fresh
            sources = function_sources(fresh, self._folder)
        return fresh, sources


# ---- what a function's answers depend on: its module's source and its project imports
@dataclass(frozen=True)
class Source:
    """One module file a function's answers depend on, with the sha256 of its current bytes
    (None when it cannot be read)."""

    module: str
    path: Path
    sha256: str | None


#: The sha256 of each project module file as it was when its module was (re-)imported.
_LOADED: dict[Path, str] = {}
#: Module files already parsed: (sha256, module name, roots) -> the project modules they import.
_IMPORTS: dict[tuple, tuple[tuple[str, Path], ...]] = {}


def function_sources(fn: Callable[..., Any], folder: Path | None = None) -> list[Source]:
    """The function's module file, then every project module it imports (transitively), each
    hashed from the file's current bytes. Project modules are those found in `folder` (the
    program's folder) or beside the function's own module (relative imports, sibling modules);
    installed code (the standard library, site-packages) is hashed but its imports are not
    followed. A function without a source file (a builtin, a lambda typed at a prompt) has none:
    its code fingerprint alone stands for it."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(fn, "__code__", None)
    if code is None or code.co_filename.startswith("<"):
        return []
    origin = _origin(code.co_filename, getattr(fn, "__module__", None) or "", folder)
    if origin is None:
        return []
    name, own, roots = origin
    found: list[Source] = []
    seen: set[Path] = set()
    queue = [(name, own)]
    while queue:
        module, path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            found.append(Source(module, path, None))
            continue
        digest = hashlib.sha256(data).hexdigest()
        found.append(Source(module, path, digest))
        if roots:
            queue += _project_imports(digest, data, module, path, roots)
    return found


@lru_cache(maxsize=4096)
def _origin(filename: str, module: str, folder: Path | None) -> tuple[str, Path, tuple[Path, ...]] | None:
    """A function's module name, resolved file and project roots (see `_roots`), or None."""
    own = _resolved(filename)
    if own is None or not own.is_file():
        return None
    module = module or own.stem
    return module, own, () if _installed(own) else _roots(module, own, folder)


def fresh_function(fn: Callable[..., Any], sources: list[Source], folder: Path | None = None) -> Callable[..., Any]:
    """`fn` itself when none of its `sources` changed since their modules were imported; else
    the same function of the modules re-imported from their files (imports before importers)."""
    changed = [s for s in sources if s.sha256 is not None and _LOADED.setdefault(s.path, s.sha256) != s.sha256]
    if not changed:
        return fn
    for source in changed:  # a .pyc of the same second and size would bring the old code back
        with contextlib.suppress(OSError, NotImplementedError, ValueError):
            Path(importlib.util.cache_from_source(str(source.path))).unlink(missing_ok=True)
    own = sources[0]
    roots = _roots(own.module, own.path, folder)
    with first_on_path(*roots):
        for source in reversed(sources):
            module = sys.modules.get(source.module)
            if module is not None and module_file(module) == source.path:
                importlib.reload(module)
            elif source is own:  # another program's module of the same name took its place
                import_module(own.module, _root_of(own.module, own.path))
            if source.sha256 is not None:
                _LOADED[source.path] = source.sha256
    module = sys.modules.get(own.module)
    target: Any = module
    for part in getattr(fn, "__qualname__", "<").split("."):
        target = getattr(target, part, None) if "<" not in part else None
    return target if callable(target) else fn


#: Held around `ast.parse`: CPython 3.11's AST validator keeps its recursion depth per
#: interpreter, so two threads parsing at once (two sessions loading programs) may fail with
#: "SystemError: AST constructor recursion depth mismatch" (a CPython bug, fixed in later releases).
_AST_PARSING = threading.Lock()


def _project_imports(digest: str, data: bytes, module: str, path: Path,
                     roots: tuple[Path, ...]) -> tuple[tuple[str, Path], ...]:
    key = (digest, module, path, roots)
    if key not in _IMPORTS:
        try:
            with _AST_PARSING:
                tree = ast.parse(data, str(path))
        except (SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: dict[str, Path] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    _add_local(found, alias.name, roots)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for name in (node.module, *(f"{node.module}.{a.name}" for a in node.names)):
                    _add_local(found, name, roots)
            elif isinstance(node, ast.ImportFrom):
                here = path.parent
                base = package.split(".") if package else []
                for _ in range(node.level - 1):
                    here, base = here.parent, base[:-1]
                head = node.module or ""
                for rel in ([head] if head else []) + [f"{head}.{a.name}".lstrip(".") for a in node.names]:
                    file = local_module_file(rel, here)
                    if file is not None:
                        found.setdefault(".".join([*base, rel]), file)
        _IMPORTS[key] = tuple(found.items())
    return _IMPORTS[key]


def _add_local(found: dict[str, Path], name: str, roots: tuple[Path, ...]) -> None:
    """`name` and its parent packages, when a project root provides them."""
    parts = name.split(".")
    for root in roots:
        if local_module_file(parts[0], root) is None:
            continue
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            file = local_module_file(prefix, root)
            if file is not None:
                found.setdefault(prefix, file)
        return


def _roots(module: str, path: Path, folder: Path | None) -> tuple[Path, ...]:
    """Where a function's project modules are: the program's folder, and the folder its own
    top-level module or package was imported from."""
    roots = [folder] if folder is not None else []
    own = _root_of(module, path)
    if own is not None and own not in roots and not _installed(path):
        roots.append(own)
    return tuple(roots)


def _root_of(module: str, path: Path) -> Path | None:
    """The folder the module `module` (file `path`) was imported from: `a.b` in `/x/a/b.py` -> /x."""
    if not module or module == "__main__":
        return path.parent
    root = path.parent.parent if path.name == "__init__.py" else path.parent
    for _ in range(module.count(".")):
        root = root.parent
    return root


@lru_cache(maxsize=1)
def _installed_roots() -> tuple[Path, ...]:
    paths = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    with contextlib.suppress(AttributeError):
        paths.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        paths.add(site.getusersitepackages())
    return tuple(p for p in (_resolved(x) for x in paths if x) if p is not None)


def _installed(path: Path) -> bool:
    """Whether `path` is installed code (standard library, site-packages), not a project's."""
    return any(path.is_relative_to(root) for root in _installed_roots())


def _resolved(path: Any) -> Path | None:
    if path is None:
        return None
    try:
        return Path(path).resolve()
    except (OSError, ValueError):
        return None


# ---- the user's traceback
_OWN_FOLDERS = tuple(Path(__file__).resolve().parents[2] / d for d in ("handlers", "runtime", "dsl"))


def user_traceback(err: BaseException) -> str:
    """The traceback of `err` through the user's own code: decomp's frames left out, the
    user's file names, line numbers and lines kept, as Python prints them."""
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if not f.filename.startswith("<frozen") and not any(Path(f.filename).resolve().is_relative_to(d)
                                                                   for d in _OWN_FOLDERS)]
    text = "".join(traceback.format_list(frames))
    head = "Traceback (most recent call last):\n" if frames else ""
    return head + text + "".join(traceback.format_exception_only(type(err), err))


def code_fingerprint(code) -> str:
    """A hash of what a function does (bytecode, names, constants, nested code), stable across
    processes: an edited function gets a new cache key, an unchanged one keeps its key."""
    digest = hashlib.sha256()
    for part in (code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()):
        digest.update(part)
    for const in code.co_consts:
        digest.update(code_fingerprint(const).encode() if hasattr(const, "co_code") else repr(const).encode())
    return digest.hexdigest()


def _plan(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Which of `ARGUMENTS` `fn` takes by keyword, or ("*query",) for a positional query.

    Raises TypeError when `fn` needs a parameter the handler cannot give.
    """
    try:
        hash(fn)
    except TypeError:  # an unhashable callable object: read its signature each time
        return _read_plan(fn)
    return _cached_plan(fn)


@lru_cache(maxsize=1024)  # asked on every call: a signature is slow to read, and never changes
def _cached_plan(fn: Callable[..., Any]) -> tuple[str, ...]:
    return _read_plan(fn)


def _read_plan(fn: Callable[..., Any]) -> tuple[str, ...]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # some builtins have no signature: give them the query
        return ("*query",)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return ARGUMENTS
    named = tuple(p.name for p in params if p.name in ARGUMENTS and p.kind is not p.POSITIONAL_ONLY)
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    others = [p for p in required if p.name not in named]
    if not named and len(others) == 1 and others[0].kind is not others[0].KEYWORD_ONLY:
        return ("*query",)
    if not named and not required and any(p.kind is p.VAR_POSITIONAL for p in params):
        return ("*query",)
    if others:
        wanted = ", ".join(repr(p.name) for p in others)
        raise TypeError(f"function {_name(fn)} needs {wanted}; it may take query, values, inputs "
                        f"(by name) or a single positional parameter")
    return named


def _arguments(plan: tuple[str, ...], call: Call) -> tuple[list[Any], dict[str, Any]]:
    # copies: a function must not change the answers other steps will read
    given = {"query": call.query, "values": copy.deepcopy(list(call.values)), "inputs": copy.deepcopy(dict(call.inputs))}
    if plan == ("*query",):
        return [call.query], {}
    return [], {name: given[name] for name in plan}


def _call(fn: Callable[..., Any], plan: tuple[str, ...], call: Call) -> Any:
    """What `fn` answers `call` with, as JSON data (run in a worker thread); an awaitable as it is."""
    args, kwargs = _arguments(plan, call)
    result = fn(*args, **kwargs)
    return result if inspect.isawaitable(result) else _json_answer(result)


# ---- in a worker process (`decomp.handlers.sandbox.workers`)
#: What a worker runs for a call (`answer_in_worker`).
WORKER_ENTRY = "decomp.handlers.kinds.python:answer_in_worker"


def worker_target(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """Where a worker process finds `fn`: its module's name, its file, the folder its top-level
    module was imported from and its qualified name; None when a worker could not import it
    (a lambda, a closure, a function of `__main__` or of a notebook, a builtin, a callable
    object, a function its module no longer names): such a one runs in a thread."""
    if not inspect.isfunction(fn):
        return None
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "<")
    if not module or module == "__main__" or "<" in qualname:
        return None
    loaded = sys.modules.get(module)
    file = module_file(loaded) if loaded is not None else None
    if file is None or file.suffix != ".py" or _attribute(loaded, qualname) is not fn:
        return None
    root = _root_of(module, file)
    return {"module": module, "file": str(file), "root": None if root is None else str(root), "qualname": qualname}


def answer_in_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """In a worker: import the function `payload["target"]` names (the file the parent allowed,
    re-imported when its sources changed), call it under the memory cap and return
    {"answer": JSON, "failed"?}, {"over_size": characters} (an answer over `payload["answer_mb"]`
    MiB of text, never sent), {"raised": "Type: message", "details": traceback},
    {"not_json": why} or {"unloadable": why, "details": traceback}. Every exception the function
    raises is its answer here (SystemExit, KeyboardInterrupt, CancelledError, ... too), except
    the MemoryError of the cap, which the worker reports itself."""
    try:
        fn = worker_function(payload)
    except BaseException as err:  # the module's own import error, whatever it is
        return {"unloadable": f"{type(err).__name__}: {err}", "details": user_traceback(err)}
    given = {"query": payload["query"], "values": payload["values"], "inputs": payload["inputs"]}
    plan = tuple(payload["plan"])
    args, kwargs = ([given["query"]], {}) if plan == ("*query",) else ([], {name: given[name] for name in plan})
    with capped():
        try:
            answer = _json_answer(_awaited(fn(*args, **kwargs)))
        except MemoryError:
            raise
        except _NotJSON as err:
            return {"not_json": err.message}
        except BaseException as err:  # the call's error, never the worker's end
            return {"raised": [type(err).__name__, str(err)], "builtin": type(err).__module__ == "builtins",
                    "details": user_traceback(err)}
    limit = payload.get("answer_mb")
    if limit is not None and (size := answer_size(answer)) > limit * 2**20:
        return {"over_size": size}
    if isinstance(answer, Failed):
        return {"answer": answer.value, "failed": True}
    return {"answer": answer}


def worker_function(payload: dict[str, Any]) -> Callable[..., Any]:
    """In a worker: the function `payload["target"]` names (`worker_target`), imported from that
    very file and re-imported when `payload["sources"]` changed; ImportError when the module
    found is not the file the parent allowed, or names no such function."""
    target = payload["target"]
    module, file, root = target["module"], Path(target["file"]), target["root"]
    loaded = sys.modules.get(module)
    if loaded is None or module_file(loaded) != file:
        loaded = importlib.import_module(module) if _installed(file) or root is None else import_module(module, root)
    if module_file(loaded) != file:  # not the file the parent allowed: never called
        raise ImportError(f"the module {module!r} was found at {module_file(loaded)}, not at {file}")
    fn = _attribute(loaded, target["qualname"])
    if not callable(fn):
        raise ImportError(f"the module {module!r} has no function {target['qualname']!r}")
    sources = [Source(name, Path(path), digest) for name, path, digest in payload["sources"]]
    folder = payload["folder"]
    return fresh_function(fn, sources, None if folder is None else Path(folder))


def _rebuilt(kind: str, message: str) -> BaseException | None:
    """A built-in exception a worker's function raised, made again here (its message only): the
    cause of the call's error. None when it cannot be made from a message."""
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        with contextlib.suppress(Exception):
            return cls(message)
    return None


def _attribute(module: Any, qualname: str) -> Any:
    target = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target


def _awaited(result: Any) -> Any:
    """`result`, or what it stands for when it is awaitable (awaited in a loop of its own)."""
    if not inspect.isawaitable(result):
        return result

    async def wait() -> Any:
        return await result

    return asyncio.run(wait())


class _NotJSON(HandlerError):
    """A function's answer that is not JSON data."""


def _json_answer(result: Any) -> Any:
    """`result` as plain JSON data (a `Failed` kept as a failed outcome), or `_NotJSON`."""
    try:
        if isinstance(result, Failed):  # a failed outcome the program may handle
            return Failed(to_json(result.value))
        return to_json(result)
    except TypeError as err:
        raise _NotJSON(f"returned a value that is not JSON-serialisable: {err}") from None
    except RecursionError:
        raise _NotJSON("returned a value nested too deeply to store") from None


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def to_json(value: Any) -> Any:
    """`value` as plain JSON data (tuples to lists), or TypeError naming what is not."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{value} is not a finite number")
        return value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise TypeError(f"dict key {bad[0]!r} is not a string")
        return {k: to_json(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} {shorten(repr(value), 60, ellipsis='...', one_line=False)} "
                    "is not JSON-serialisable")
