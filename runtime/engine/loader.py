"""Module loading: parse a .decomp file and its imports, build every handler, check it all.

`load(path, registry)` returns a `LoadedModule` or raises `Diagnostics` listing every problem.
`load_plugin(spec, folder)` imports a Python module that registers handler kinds or functions.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from decomp.dsl import nodes
from decomp.dsl.checker import METRIC_NAMES, check_metric, check_recursion, effectful
from decomp.dsl.typecheck import check_types
from decomp.dsl.answer_types import ANY, Type
from decomp.dsl.errors import CheckError, CheckWarning, DecompError, Diagnostics
from decomp.dsl.limits import source_lines
from decomp.dsl.parser import not_read, parse_module, read_text
from decomp.handlers.base import Handler, LoadContext
from decomp.handlers.kinds.environment import ActsOnEnvironment, EnvironmentHandler
from decomp.handlers.kinds.python import user_traceback
from decomp.handlers.sandbox.imports import (files_run_by_import, find_module_file, import_function, import_module,
                                     local_module_file, untrusted_folder)
from decomp.handlers.plugins import add_plugin_module, load as load_plugins
from decomp.handlers.registry import Registry, RegistryConflict, default_registry
from decomp.handlers.sandbox.trust import (NO_TRUST, TRUSTED_FOLDERS_ENV, FolderTrust, PathRefused, Trust, inside, not_imported,
                                   refusal, trust_list_file)
from decomp.runtime.models.base import CONSTRAIN_MODES, Backend


@dataclass
class LoadedModule:
    """A checked module: its handlers by name (programs included) and its entry point."""

    path: str
    module: nodes.Module
    handlers: dict[str, Handler] = field(default_factory=dict)
    main: str | None = None
    #: The root module's `metric` (how dataset runs score rows with gold); None: not declared.
    metric: str | None = None
    default_model: str | None = None
    models: dict[str, str] = field(default_factory=dict)
    model_decls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: The files the module was built from: itself, its imports, and every file its handlers
    #: named (prompt files, program files), whether or not they exist.
    files: set[Path] = field(default_factory=set)
    #: Warnings of the load itself: a model backend's at a declaration (a check's fake model
    #: responder not imported from an untrusted folder), a metric not imported, types.
    notices: list[CheckWarning] = field(default_factory=list)


def load(path: str | Path, registry: Registry, text: str | None = None,
         trusted_folders: FolderTrust | None = None, trust: Trust = NO_TRUST) -> LoadedModule:
    """Parse, build and check the module at `path` (or `text`, named `path`). `trusted_folders`:
    a check's (`decomp check`, `decomp lsp`): Python of other folders is not imported; None: a
    run's, which imports the program's own modules. `trust`: the modules and folders the
    loading session allows beyond the program's folder (`Session.trust`)."""
    try:
        os.fsencode(path)
        usable = "\x00" not in str(path)
    except UnicodeEncodeError:
        usable = False
    if not usable:
        raise DecompError("no file can have this name (it holds a NUL or text that is not Unicode)",
                          nodes.Span(str(path), 1, 1, 1, 2), line_text="")
    return _Loader(load_plugins(registry), trusted_folders=trusted_folders, trust=trust).load(Path(path), text)


def load_plugin(spec: str, folder: str | Path | None = None,
                trusted_folders: FolderTrust | None = None) -> ModuleType:
    """Import a plugin module and register it: its hooks (`decomp.handlers.plugins`) and its
    `@handler_kind` / `@python_handler` decorators add kinds, functions, models and environments
    to the default registry before a program that uses them is loaded.

    `spec` is a path to a `.py` file (relative to the working folder, else to `folder`, the
    program's folder), imported under its file name with its own folder first on the import
    path; or a module name, looked for in `folder`, then in the working folder, then on the
    import path. Raises `DecompError` with the plugin's own traceback when it cannot be imported.

    `trusted_folders`: a check's (`decomp check`, `decomp lsp`): a plugin file of a folder they
    do not trust is not imported (a module name is then looked for on the import path only), and
    `PluginNotTrusted` says so; None: a run's, which imports it as above.
    """
    load_plugins(default_registry)  # the built-ins first: a plugin may not take their names
    module = _import_plugin(spec, folder, trusted_folders)
    problems = add_plugin_module(module, module.__name__, f"--plugin {spec}")
    if problems:
        raise DecompError("\n".join(problems))
    return module


class PluginNotTrusted(DecompError):
    """A check's `--plugin` whose file lies in a folder the user has not trusted: not imported."""


def _import_plugin(spec: str, folder: str | Path | None, trust: FolderTrust | None) -> ModuleType:
    folders = [Path(f) for f in (folder, Path.cwd()) if f is not None]
    try:
        if spec.endswith(".py") or "/" in spec or "\\" in spec:
            return _import_plugin_file(spec, folders, trust)
        top = spec.partition(".")[0]
        homes = [f for f in folders if local_module_file(top, f) is not None]
        home = next((f for f in homes if trust is None or trust.trusts(f)), None)
        if home is None and homes and _not_on_import_path(spec, homes):
            raise PluginNotTrusted(_plugin_not_trusted(spec, homes[0]))
        return import_module(spec, home)
    except RegistryConflict as err:  # refused by us, not the plugin's bug: no traceback
        raise DecompError(f"plugin {spec!r} refused: {err}") from err
    except DecompError:
        raise
    except Exception as err:  # the plugin's own error, whatever it is
        raise DecompError(f"cannot load the plugin {spec!r}: {type(err).__name__}: {err}\n"
                          + user_traceback(err).rstrip()) from err


def _import_plugin_file(spec: str, folders: list[Path], trust: FolderTrust | None) -> ModuleType:
    """The plugin at the path `spec` (absolute, else from the working folder, else from the
    program's folder), imported unless `trust` (a check's) does not trust its folder."""
    candidates = [Path(spec)] if Path(spec).is_absolute() else [Path.cwd() / spec] + [f / spec for f in folders]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        raise DecompError(f"plugin file not found: {spec}")
    if trust is not None and not (trust.trusts(path.parent) and trust.trusts(path)):
        raise PluginNotTrusted(_plugin_not_trusted(spec, path.parent.resolve()))
    path = path.resolve()
    if path.suffix != ".py" or not path.stem.isidentifier():
        raise DecompError(f"plugin {spec}: a plugin file is a Python module named NAME.py")
    return import_module(path.stem, path.parent)


def _not_on_import_path(spec: str, untrusted: list[Path]) -> bool:
    """Whether the import path has no module `spec` of its own: none, or only a file of one of
    the `untrusted` folders (found without running any)."""
    files = files_run_by_import(spec)
    found = find_module_file(spec)
    return found is None or any(inside(f, untrusted) for f in (*files, found))


def _plugin_not_trusted(spec: str, folder: Path) -> str:
    """The notice for a check's `--plugin` of a folder the user has not trusted."""
    return (f"--plugin {spec}: not imported: the folder {folder} is not trusted (a check runs no code of a "
            f"folder you have not trusted); the kinds it registers are unknown to this check. To trust it: "
            f"--trust-folder {folder}, a line in {trust_list_file()}, {TRUSTED_FOLDERS_ENV}, or your editor's "
            "workspace trust; decomp run imports it")


class _Loader:
    def __init__(self, registry: Registry, active: tuple[Path, ...] = (), roots: tuple[Path, ...] | None = None,
                 trusted_folders: FolderTrust | None = None, trust: Trust = NO_TRUST):
        self.registry = registry
        #: What the loading session trusts (`--trust`, `--allow-root`), for every file of the load.
        self.trust = trust
        #: A check's trusted folders (None: a run's load, see `load`).
        self.trusted_folders = trusted_folders
        self.active = active
        #: Where this load may read files (the main program's folder first): `import` and `file=`
        #: paths outside them are refused unread (see `decomp.handlers.sandbox.trust`).
        self.roots = roots
        self.errors: list[DecompError] = []
        #: Warnings of the load itself (a backend's at a model declaration), kept on the module.
        self.notices: list[CheckWarning] = []
        self.sources: dict[str, nodes.HandlerDecl | nodes.Program | nodes.ModelDecl] = {}
        self.declared: set[str] = set()
        self.texts: dict[str, str] = {}

    def load(self, path: Path, text: str | None) -> LoadedModule:
        self.active = self.active + (path.resolve(),)
        if self.roots is None:
            self.roots = self.trust.program_roots(path)
        root = self._parse(path, text)
        if root is None:
            raise Diagnostics(self.errors) if len(self.errors) > 1 else self.errors[0]
        modules = self._with_imports(root, path)
        loaded = LoadedModule(str(path), root, main=root.main.target if root.main else None,
                              metric=root.metric.name if root.metric else None)
        loaded.files.update(file for _, file in modules)
        self._models(loaded, modules)
        for module, file in modules:
            self._declare(loaded, module, LoadContext(file.parent, loaded.default_model, loaded, self.registry,
                                                      loaded.files, self.roots, self.trusted_folders,
                                                      self.trust))
        self._check(loaded, modules)
        if self.errors:
            self._attach_lines()
            raise Diagnostics(self.errors) if len(self.errors) > 1 else self.errors[0]
        loaded.notices = self.notices
        return loaded

    def _attach_lines(self) -> None:
        """Give each error its source line from the text that was parsed (maybe not on disk);
        each text is split into lines once, however many errors it has."""
        lines: dict[str, list[str]] = {}
        for err in self.errors:
            text = self.texts.get(err.span.file) if err.span else None
            if err.line_text is None and text is not None:
                if err.span.file not in lines:
                    lines[err.span.file] = source_lines(text)
                found = lines[err.span.file]
                err.line_text = found[err.span.line - 1] if 0 < err.span.line <= len(found) else ""

    # ---- parsing and imports
    def _parse(self, path: Path, text: str | None) -> nodes.Module | None:
        try:
            source = text if text is not None else read_text(path)
            self.texts[str(path)] = source
            return parse_module(source, str(path))
        except DecompError as err:
            self.errors += err.errors if isinstance(err, Diagnostics) else [err]
        except (OSError, ValueError) as err:
            self.errors.append(CheckError(f"cannot read {path}: {getattr(err, 'strerror', None) or err}"))
        return None

    def _with_imports(self, root: nodes.Module, path: Path) -> list[tuple[nodes.Module, Path]]:
        found, seen, queue = [], {path.resolve()}, [(root, path)]
        while queue:
            module, file = queue.pop(0)
            found.append((module, file))
            for imp in module.imports:
                try:
                    target = (file.parent / imp.path).resolve()
                except (OSError, ValueError) as err:
                    self.errors.append(CheckError(f"bad import path: {err}", imp.span))
                    continue
                if target in seen:
                    continue
                seen.add(target)
                if not inside(target, self.roots or ()):  # never read: its text must not reach a diagnostic
                    self.errors.append(CheckError(refusal(imp.path, "import", self.roots or ()), imp.span))
                    continue
                if not target.is_file():
                    self.errors.append(CheckError(not_read(target, "imported file"), imp.span))
                    continue
                parsed = self._parse(target, None)
                if parsed is not None:
                    queue.append((parsed, target))
        return found

    # ---- declarations
    def _models(self, loaded: LoadedModule, modules) -> None:
        """Model declarations: their own namespace, a known backend that checks them, known options."""
        for module, file in modules:
            ctx = LoadContext(file.parent, None, loaded, self.registry, loaded.files, self.roots,
                              self.trusted_folders, self.trust)
            for decl in module.models:
                if decl.name in loaded.models:
                    self.errors.append(CheckError(f"model '{decl.name}' is already declared", decl.span))
                    continue
                spec, added = self._model_spec(decl, ctx)
                self.errors += _model_option_errors(decl)
                written = {o.name: o.value.plain() for o in decl.options}
                loaded.models[decl.name] = spec
                loaded.model_decls[decl.name] = (spec, {**written, **added})
        # the name, not the spec: the session resolves it with the declaration's options
        loaded.default_model = "default" if "default" in loaded.models else None

    def _model_spec(self, decl: nodes.ModelDecl, ctx: LoadContext) -> tuple[str, dict[str, Any]]:
        """The declared spec as its backend checked it (`Backend.check`: a path resolved, a
        module allowed) and the options the backend adds; its problems placed at the declaration."""
        scheme, _, name = decl.spec.partition(":")
        backend = self.registry.model_backend(scheme)
        if backend is None:
            known = ", ".join(sorted(self.registry.model_backends))
            self.errors.append(CheckError(f"unknown model backend '{scheme}' in {decl.spec!r}", decl.span,
                                          expected=f"SCHEME:NAME with SCHEME one of: {known}"))
        if not isinstance(backend, Backend):  # a plain factory: nothing to check before it is called
            return decl.spec, {}
        found = backend.check(name, ctx)
        self.errors += [CheckError(message, decl.span) for message in found.errors]
        self.notices += [CheckWarning(message, decl.span) for message in found.warnings]
        return f"{scheme}:{found.name}", found.options

    def _metric_function(self, name: str, folder: Path, module: nodes.Module) -> Any:
        """The function a `metric module:function` statement names, imported as python handlers'
        are (`check_metric` checks its form); why not, as text; None when a check does not
        import it (an untrusted folder: a notice at the statement)."""
        local = tuple((self.roots or ())[:1])
        untrusted = untrusted_folder(name, folder, local, self.trusted_folders, self.trust)
        if untrusted is not None:
            self.notices.append(CheckWarning(f"metric {not_imported(name, untrusted)}", module.metric.span))
            return None
        return import_function(name, folder, local, self.trust)

    def _declare(self, loaded: LoadedModule, module: nodes.Module, ctx: LoadContext) -> None:
        for decl in module.handlers:
            self.declared.add(decl.name)
            handler = self._handler(decl, ctx)
            if handler is not None and self._unique(decl.name, decl, decl.name_span):
                loaded.handlers[decl.name] = handler
        kind = self.registry.kind("program") if module.programs else None
        for program in module.programs:
            self.declared.add(program.name)
            if kind is None:
                self.errors.append(CheckError("no handler kind 'program' is registered to run programs with",
                                              program.span))
                continue
            options = self._options(kind, program.options, f"program '{program.name}'", program.span)
            if options is not None and self._unique(program.name, program, program.name_span):
                loaded.handlers[program.name] = kind(program.name, options, None, ctx, program=program)
        for extra in module.mains[:-1] if module is loaded.module else ():
            self.errors.append(CheckError("main is declared more than once", extra.span))

    def _unique(self, name: str, node, span) -> bool:
        first = self.sources.get(name)
        if first is not None:
            self.errors.append(CheckError(f"'{name}' is already declared", span,
                                          expected=f"a new name (the first '{name}' is at {first.span})"))
            return False
        self.sources[name] = node
        return True

    def _handler(self, decl: nodes.HandlerDecl, ctx: LoadContext) -> Handler | None:
        cls = self.registry.kind(decl.kind)
        if cls is None:
            self.errors.append(CheckError(f"unknown handler kind '{decl.kind}'", decl.kind_span,
                                          expected="one of: " + ", ".join(sorted(self.registry.kinds))
                                          + "; a kind a plugin registers needs `--plugin MODULE` (or the "
                                          "plugin installed under the `decomp` entry-point group)"))
            return None
        options = self._options(cls, decl.options, f"kind '{decl.kind}'", decl.span)
        return None if options is None else cls(decl.name, options, decl, ctx)

    def _options(self, cls: type[Handler], options: tuple[nodes.Option, ...], what: str, span) -> Any:
        values: dict[str, Any] = {}
        for opt in options:
            if opt.name in values:
                self.errors.append(CheckError(f"option '{opt.name}' is given twice", opt.span))
            self.errors += _bare_names(opt.value)
            values[opt.name] = opt.value.plain()
        try:
            return cls.Options(**values)
        except ValidationError as err:
            self.errors += [_option_error(e, cls, options, what, span) for e in err.errors()]
            return None

    # ---- checks
    def _check(self, loaded: LoadedModule, modules) -> None:
        names = set(loaded.handlers) | self.declared
        for handler in loaded.handlers.values():
            try:
                self.errors += handler.check()
            except PathRefused as err:  # a kind that resolves a path in its check without catching this
                self.errors.append(CheckError(err.message, _option_span(handler, err.written)))
                continue
            except RecursionError:  # a library's recursive parser (Jinja, re) on something nested deep
                self.errors.append(_too_deep_to_check(handler))
                continue
            self._link_program_file(handler)
        for handler in loaded.handlers.values():
            try:
                self.errors += handler.check_references(names)
            except PathRefused:  # reported once, by its check()
                pass
            except RecursionError:
                self.errors.append(_too_deep_to_check(handler))
        self.errors += check_recursion(loaded.handlers)
        found = type_problems(loaded.handlers)
        self.errors += [e for e in found if not isinstance(e, CheckWarning)]
        self.notices += [w for w in found if isinstance(w, CheckWarning)]
        self.errors += _environment_problems(loaded.handlers, names)
        for module, file in modules:  # only the root's metric is used; an imported one is still checked
            self.errors += check_metric(module, (*METRIC_NAMES, *sorted(self.registry.metrics)),
                                        lambda name, at=file.parent, of=module: self._metric_function(name, at, of))
        _mark_effects(loaded.handlers)
        root = loaded.module
        if root.main is not None and root.main.target not in names:
            self.errors.append(CheckError(f"main names an unknown program or handler '{root.main.target}'",
                                          root.main.span, expected="one of: " + ", ".join(sorted(names))))

    def _link_program_file(self, handler: Handler) -> None:
        wanted = handler.program_file()
        if wanted is None:
            return
        file, program = wanted
        try:
            path = handler.ctx.resolve(file).resolve()
        except PathRefused as err:
            self.errors.append(CheckError(err.message, handler.error_span("file")))
            return
        except (OSError, ValueError) as err:  # a name no file can have (a NUL, a lone surrogate)
            self.errors.append(CheckError(f"bad program file path: {err}", handler.error_span("file")))
            return
        if not path.is_file():
            self.errors.append(CheckError(not_read(path, "program file"), handler.error_span("file")))
            return
        if path in self.active:
            chain = " -> ".join(p.name for p in self.active + (path,))
            self.errors.append(CheckError(f"program(file=...) loads a file already being loaded ({chain}); "
                                          "for recursion, call the program by name in its own file",
                                          handler.error_span("file")))
            return
        try:
            other = _Loader(self.registry, self.active + (path,), self.roots, self.trusted_folders,
                            self.trust).load(path, None)
        except DecompError as err:
            self.errors += err.errors if isinstance(err, Diagnostics) else [err]
            return
        name = program or other.main
        if name not in other.handlers:
            self.errors.append(CheckError(f"{path} has no program '{name}'", handler.error_span("name")))
            return
        handler.link(other.handlers[name])


def type_problems(handlers: dict[str, Handler]) -> list[CheckError | CheckWarning]:
    """Types that cannot be read, examples that contradict their handler's declared type, and
    the type errors (and warnings) of every program (`decomp.dsl.typecheck`)."""
    errors = [e for handler in handlers.values() for e in handler.type_problems()]
    answers = {name: _answer_type(handler) for name, handler in handlers.items()}
    params = {name: handler.param_types() for name, handler in handlers.items() if hasattr(handler, "param_types")}
    callees = {name: typed[0][1] for name, typed in params.items() if typed}
    for name, handler in handlers.items():
        program = getattr(handler, "program", None)
        if program is not None:
            errors += check_types(program, answers, {p.name: t for p, t in params[name]}, callees)
    return errors


def _answer_type(handler: Handler) -> Type:
    """A handler's answer type for the checker; `any` when its declaration has problems of its
    own (which its check reports)."""
    try:
        return handler.answer_type()
    except (DecompError, OSError, ValueError, RecursionError):
        return ANY


def _too_deep_to_check(handler: Handler) -> CheckError:
    """A handler whose check ran out of stack: a template, pattern or expression in its options
    nests deeper than the library that reads it can follow."""
    return CheckError(f"[{handler.name}] cannot be checked: a template, pattern or expression in it is nested "
                      "too deeply", handler.error_span(), expected="fewer brackets inside each other")


def _option_span(handler: Handler, written: str):
    """The position of the option of `handler` whose value is `written`, else the declaration's."""
    for option in getattr(handler.decl, "options", ()) or ():
        if option.value.plain() == written:
            return option.value.span
    return handler.error_span()


def _mark_effects(handlers: dict[str, Handler]) -> None:
    """Mark every handler that can reach an environment (`Handler.effectful`): kinds that act on
    one, `program(file=...)` handlers whose target can, kinds that may run any handler of the
    module (decomposers) when one is effectful, and all that call them."""
    sources = [name for name, h in handlers.items()
               if h.effects or any(target.effectful for target in h.linked())]
    found = effectful(handlers, sources)
    if found:
        found = effectful(handlers, sources + [name for name, h in handlers.items() if h.calls_any])
    for name in found:
        handlers[name].effectful = True


def _environment_problems(handlers: dict[str, Handler], names: set[str]) -> list[CheckError]:
    """An executor (or another kind acting on an environment) whose `environment=` names no
    handler of the file (`names`: every name declared), or one that is not an `environment(...)`."""
    errors = []
    for handler in handlers.values():
        if not isinstance(handler, ActsOnEnvironment):
            continue
        name = handler.options.environment
        if name not in names:
            errors.append(CheckError(f"[{handler.name}] names an unknown environment handler {name!r}",
                                     handler.error_span("environment"),
                                     expected="the name of an environment(...) handler"))
        else:
            target = handlers.get(name)
            if target is not None and not isinstance(target, EnvironmentHandler):
                errors.append(CheckError(f"[{handler.name}] acts on [{target.name}], which is a {target.kind} "
                                         "handler, not an environment", handler.error_span("environment"),
                                         expected="the name of an environment(...) handler"))
    return errors


#: What a `model NAME = "..." (option=value)` declaration may set, with the types allowed.
MODEL_OPTIONS = {"base_url": (str,), "timeout": (int, float), "attempt_deadline": (int, float),
                 "call_deadline": (int, float), "api": (str,), "n_threads": (int,), "n_ctx": (int,),
                 "n_threads_batch": (int,), "prompt_cache_mb": (int,), "reuse_prefix": (bool,),
                 "n_batch": (int,),
                 "transport": (str,), "price_in": (int, float), "price_out": (int, float), "price_cached": (int, float),
                 "constrain": (str,), "conversation": (bool,)}


def _model_option_errors(decl: nodes.ModelDecl) -> list[CheckError]:
    errors = []
    for opt in decl.options:
        errors += _bare_names(opt.value)
        allowed = MODEL_OPTIONS.get(opt.name)
        if allowed is None:
            errors.append(CheckError(f"unknown option '{opt.name}' for a model", opt.span,
                                     expected="one of: " + ", ".join(MODEL_OPTIONS)))
        elif not isinstance(opt.value.value, allowed) or (isinstance(opt.value.value, bool) and bool not in allowed):
            errors.append(CheckError(f"option '{opt.name}' of a model needs a {allowed[0].__name__}",
                                     opt.value.span))
        elif opt.name == "constrain" and opt.value.value not in CONSTRAIN_MODES:
            errors.append(CheckError(f"option 'constrain' of a model must be one of {', '.join(CONSTRAIN_MODES)}, "
                                     f"not {opt.value.value!r}", opt.value.span))
        elif opt.name in _MODEL_SECONDS and not 0 < opt.value.value < float("inf"):
            errors.append(CheckError(f"option '{opt.name}' of a model must be a number of seconds > 0, "
                                     f"not {opt.value.value}", opt.value.span))
        elif opt.name in _MODEL_COUNTS and opt.value.value < _MODEL_COUNTS[opt.name]:
            errors.append(CheckError(f"option '{opt.name}' of a model must be >= {_MODEL_COUNTS[opt.name]}, "
                                     f"not {opt.value.value}", opt.value.span))
        elif opt.name in (*_MODEL_PRICES, "price_cached") and not 0 <= opt.value.value < float("inf"):
            errors.append(CheckError(f"option '{opt.name}' of a model must be a price >= 0 (money per million "
                                     f"tokens), not {opt.value.value}", opt.value.span))
    given = [opt for opt in decl.options if opt.name in _MODEL_PRICES]
    if len({opt.name for opt in given}) == 1:
        errors.append(CheckError(f"model '{decl.name}' has {given[0].name} but not "
                                 f"{({*_MODEL_PRICES} - {given[0].name}).pop()}: give both, or neither",
                                 given[0].span))
    cached = next((opt for opt in decl.options if opt.name == "price_cached"), None)
    if cached is not None and not given:
        errors.append(CheckError(f"model '{decl.name}' has price_cached but not price_in and price_out: give "
                                 "them too (price_cached is the price of prompt tokens served from the "
                                 "provider's cache)", cached.span))
    return errors


_MODEL_PRICES = ("price_in", "price_out")


_MODEL_SECONDS = ("timeout", "attempt_deadline", "call_deadline")


#: The counts a model option holds, with their least value.
_MODEL_COUNTS = {"n_threads": 1, "n_threads_batch": 1, "n_ctx": 1, "prompt_cache_mb": 0, "n_batch": 1}


def _bare_names(value: nodes.Value) -> list[CheckError]:
    """A bare word is no value: `default=None` almost always means null or "None"."""
    if value.kind == "list":
        return [e for v in value.value for e in _bare_names(v)]
    if value.kind == "ident":
        return [CheckError(f"bare name {value.value} is not a value", value.span,
                           expected=f'a string ("{value.value}"), a number, true, false or null')]
    return []


def _option_error(error: dict, cls, options, what: str, span) -> CheckError:
    name = str(error["loc"][0]) if error["loc"] else ""
    opt = next((o for o in options if o.name == name), None)
    where = opt.span if opt is not None else span
    if error["type"] == "extra_forbidden":
        known = ", ".join(cls.Options.written_options())
        return CheckError(f"unknown option '{name}' for {what}", where, expected=f"one of: {known}")
    if error["type"] == "missing":
        return CheckError(f"{what} needs the option '{name}'", where)
    written = cls.Options.written_options()
    field_type = written[name].annotation if name in written else None
    shown = getattr(field_type, "__name__", None) or str(field_type).replace("typing.", "")
    return CheckError(f"option '{name}' of {what}: {error['msg'].lower()}", opt.value.span if opt else where,
                      expected=f"a value of type {shown}")
