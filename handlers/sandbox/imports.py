"""What a `.decomp` file's `python(function="module:attr")` may import, and how: the import
policy beside `trust.py` (which says what the user trusts). A module is found without running
its code, checked (denied modules, the program's own folder, trusted modules) and only then
imported, with the program's folder first on `sys.path`. A check asks `untrusted_folder` first:
a module of a folder the user has not trusted (`FolderTrust`) is not imported at all.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from decomp.handlers.sandbox.trust import NO_TRUST, FolderTrust, Trust, inside, untrusted


#: Modules whose functions a .decomp file may never call by `module:attr`, even when trusted:
#: they reach the shell, the file system or the interpreter. Beyond these, `module:attr` is
#: default-deny: only modules of the program's folder and trusted ones (`decomp.handlers.sandbox.trust`)
#: are imported at all.
DENIED_MODULES = frozenset({
    "os", "posix", "nt", "subprocess", "shutil", "sys", "builtins", "importlib", "runpy", "pty",
    "socket", "ctypes", "multiprocessing", "pickle", "marshal", "code", "codeop", "pathlib", "tempfile",
    "signal", "io", "pdb", "webbrowser", "http", "urllib", "ftplib", "smtplib", "asyncio",
})


def import_function(name: str, folder: str | Path | None = None, local: tuple[Path, ...] = (),
                    trust: Trust = NO_TRUST) -> Callable[..., Any] | str:
    """The Python function `module:attr` (the module looked for in `folder` first), or why it
    cannot be used (a denied, missing or untrusted module, by `trust`; not a function)."""
    module, sep, attr = name.partition(":")
    if not sep or not module or not attr:
        return f"{name!r} is neither a registered function nor a 'module:function' path"
    if module.split(".")[0] in DENIED_MODULES:
        return f"functions of the module {module!r} may not be called from a .decomp file"
    if module_allowance(module, folder, local, trust) is None:  # refused before anything is imported
        if local_module_file(module.partition(".")[0], _real(folder)) is None and find_module_file(module) is None:
            return f"cannot load {name!r}: there is no module named {module!r}"
        return untrusted(name, module)
    if not attr.isidentifier() or attr.startswith("_"):  # no walking to what the module imported (random._os)
        return f"{name!r}: name one public function of the module (module:function), not {attr!r}"
    allowed = module_allowance(module, folder, local, trust)
    approved = _approved_file(module, folder, local) if allowed == "local" else None
    try:
        mod = import_module(module, folder)
    except Exception as err:  # the module's own import error, whatever it is
        return f"cannot load {name!r}: importing the module {module!r} failed: {type(err).__name__}: {err}"
    try:
        obj = getattr(mod, attr)
    except Exception:  # no such attribute (or a module __getattr__ that raised)
        return (f"cannot load {name!r}: the module {module!r} was imported, but it has no function {attr!r} "
                f"({_own_functions(mod)})")
    if approved is not None and module_file(mod) != approved:  # imported another module than the one approved
        return untrusted(name, module)
    if not inspect.isfunction(obj):
        return f"{name!r} is not a Python function (builtins and classes are not allowed)"
    if getattr(obj, "__module__", None) != mod.__name__:  # defined elsewhere, only imported there
        return (f"{name!r} is defined in the module {getattr(obj, '__module__', '?')!r}, not in {module!r}: "
                "name the module that defines it (it must be allowed itself)")
    return obj


def _own_functions(mod: ModuleType, most: int = 8) -> str:
    """The public functions `mod` defines, as a message names them."""
    names = sorted(n for n, v in vars(mod).items() if not n.startswith("_") and inspect.isfunction(v)
                   and getattr(v, "__module__", None) == mod.__name__)
    if not names:
        return "it defines no public function"
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return "its functions: " + ", ".join(names[:most]) + more


def _approved_file(module: str, folder, local) -> Path | None:
    """The file `module_allowance` found `module` to be "local" by."""
    folders = [f for f in (_real(folder), *(_real(x) for x in local)) if f is not None]
    for where in folders:
        own = local_module_file(module, where)
        if own is not None:
            return own
    found = find_module_file(module)
    return found


def module_allowance(module: str, folder: str | Path | None = None, local: tuple[Path, ...] = (),
                     trust: Trust = NO_TRUST) -> str | None:
    """"local" when the file of `module` lies in `folder` or a folder of `local` (symlinks
    followed; found without importing anything: `helpers` as FOLDER/helpers.py, or a dotted
    package path such as `decomp.programs.decomp.letters` whose file is there), "trusted" when
    `trust` trusts it (`decomp.handlers.sandbox.trust.Trust`), else None."""
    folders = [f for f in (_real(folder), *(_real(x) for x in local)) if f is not None]
    if folders:
        for where in folders:
            own = local_module_file(module, where)
            if own is not None:  # the folder provides it: local only if it does not lead elsewhere
                if inside(own, folders):
                    return "local"
                break
        else:
            found = find_module_file(module)
            if found is not None and inside(found, folders):
                return "local"
    return "trusted" if trust.is_trusted(module) else None


def untrusted_folder(name: str, folder: str | Path | None, local: tuple[Path, ...],
                     trust: FolderTrust | None, modules: Trust = NO_TRUST) -> Path | None:
    """The folder a check may not import `name` ("module:attr") from, when `trust` does not
    trust it. When the program's folder (or the main program's, of `local`) provides the module's
    top-level name, Python searches there: that folder must be trusted, whatever its files link
    to, and so must every file the import may run on the way (`files_run_by_import`: each
    package's `__init__` and the module, as found there, symlinks followed). A module of the
    import path: the files it would run that lie in the program's folder, or anywhere for a
    module not trusted by name. None: nothing of an untrusted folder would run (`trust` None: a
    run, which trusts the program; a missing module, a refused one, a built-in). Found without
    running any code."""
    module, sep, _ = name.partition(":")
    if trust is None or not sep or not module or module.split(".")[0] in DENIED_MODULES:
        return None
    allowance = module_allowance(module, folder, local, modules)
    if allowance is None:  # refused by the import policy, which imports nothing either
        return None
    folders = [f for f in (_real(folder), *(_real(x) for x in local)) if f is not None]
    top = module.partition(".")[0]
    home = next((where for where in folders if local_module_file(top, where) is not None), None)
    if home is not None and not trust.trusts(home):  # nothing of it is imported, wherever its links lead
        return home
    files = [_real(f) or f for f in files_run_by_import(module, home)]
    if home is None and allowance == "trusted" and not any(inside(f, folders) for f in files):
        return None  # trusted by name (--trust MODULE), and found outside the program's folder
    bad = next((f for f in files if not trust.trusts(f)), None)
    if bad is None:
        return None
    return next((f for f in folders if inside(bad, (f,))), bad.parent)


def files_run_by_import(module: str, home: Path | None = None) -> list[Path]:
    """Every file importing `module` may run, as found (symlinks not followed), without running
    any: in `home` (a folder Python searches first) each package's `__init__` and the module's
    file, with every suffix the import system loads (a package, `NAME.py`, an extension module);
    else those of the import path, less the modules imported already."""
    names = module.split(".")
    found, places = ([], [Path(home)]) if home is not None else _import_path_top(names[0])
    for depth in range(0 if home is not None else 1, len(names)):
        if home is not None or ".".join(names[:depth + 1]) not in sys.modules:  # an imported one runs nothing
            found += [c for place in places for c in _candidates(place, names[depth])]
        places = [place / names[depth] for place in places if (place / names[depth]).is_dir()]
    return found


def _import_path_top(name: str) -> tuple[list[Path], list[Path]]:
    """The file the import path's top-level module `name` would run (none when it is imported
    already) and the folders its submodules are looked for in."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return [], [Path(p) for p in getattr(loaded, "__path__", None) or ()]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return [], []
    if spec is None:
        return [], []
    file = [Path(spec.origin)] if spec.origin and spec.has_location else []
    return file, [Path(p) for p in spec.submodule_search_locations or ()]


def _candidates(place: Path, name: str) -> list[Path]:
    """The files of the module `name` in the folder `place` that Python may load: its package's
    `__init__` and its module file, with any suffix the import system knows."""
    suffixes = importlib.machinery.all_suffixes()
    paths = [place / name / f"__init__{s}" for s in suffixes] + [place / f"{name}{s}" for s in suffixes]
    return [p for p in paths if p.is_file()]


def find_module_file(name: str) -> Path | None:
    """The resolved file the module `name` would be imported from, found without running any
    module's code (only the top-level package is located by the import system), or None."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return module_file(loaded)
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None:
        return None
    if not rest:
        return _real(spec.origin) if spec.origin and spec.has_location else None
    places = [Path(p) for p in (spec.submodule_search_locations or ())]
    for part in rest[:-1]:
        places = [p / part for p in places if (p / part).is_dir()]
    for place in places:
        for candidate in (place / (rest[-1] + ".py"), place / rest[-1] / "__init__.py"):
            if candidate.is_file():
                return _real(candidate)
    return None


def _real(path: str | Path | None) -> Path | None:
    if path is None:
        return None
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


# ---- modules of the program's own folder
#: The folders `import_module` imported modules from (a program's folder, a plugin's folder).
_PROJECT_FOLDERS: set[Path] = set()


def local_module_file(name: str, folder: str | Path | None) -> Path | None:
    """The file `folder` holds for the module `name` (`name.py`, or `name/__init__.py` for a
    package; `a.b` as `a/b.py`), or None when the folder does not provide it."""
    if folder is None or not name:
        return None
    parts = name.split(".")
    for depth in range(1, len(parts)):  # a dotted name: a real package at each level (no namespace trick)
        if not Path(folder).joinpath(*parts[:depth], "__init__.py").is_file():
            return None
    base = Path(folder).joinpath(*parts)
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def import_module(name: str, folder: str | Path | None = None) -> ModuleType:
    """Import the module `name`, looking for it in `folder` first (a `.decomp` file's folder: its
    helpers need no PYTHONPATH). While it is imported the folder comes first on `sys.path`, so
    its own top-level imports of sibling modules work too.

    A module of that name already imported from another program's folder is forgotten (with the
    modules of that folder) so this folder's one is loaded; one imported from anywhere else (the
    standard library, an installed package) is not replaced: ImportError asks for a rename.

    One import at a time in the process (`sys.path` and `sys.modules` are the process's): a
    thread never takes a module another thread is still executing for a whole one."""
    with _IMPORTING:
        return _import_module(name, folder)


#: Held while `import_module` reads and changes `sys.path` and `sys.modules`.
_IMPORTING = threading.RLock()


def _import_module(name: str, folder: str | Path | None) -> ModuleType:
    top = name.partition(".")[0]
    root = Path(folder).resolve() if folder is not None else None
    local = local_module_file(top, root)
    if local is None or root is None:
        return importlib.import_module(name)
    loaded = sys.modules.get(top)
    if loaded is not None and name in sys.modules and module_file(loaded) == local:
        return sys.modules[name]
    if loaded is not None and module_file(loaded) != local:
        other = module_file(loaded)
        owner = next((f for f in _PROJECT_FOLDERS if other is not None and local_module_file(top, f) == other), None)
        if owner is None:
            raise ImportError(f"{local} has the name of the module {top!r} already imported from "
                              f"{other or 'elsewhere'}; rename {local.name}")
        forget_folder(owner)
    _PROJECT_FOLDERS.add(root)
    with first_on_path(root):
        return importlib.import_module(name)


def module_file(module: ModuleType) -> Path | None:
    """The resolved source file of `module`, or None (built-in, namespace package)."""
    file = getattr(module, "__file__", None)
    try:
        return Path(file).resolve() if file else None
    except (OSError, ValueError):
        return None


def forget_folder(folder: Path) -> None:
    """Drop from `sys.modules` every module imported from `folder` (another program's helpers
    of the same names: modules whose top-level module or package is in `folder`); objects
    already holding them keep them."""
    provided = _top_level_names(folder)
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in provided:  # the folder has no file for it: not one of its modules
            continue
        file = module_file(module) if isinstance(module, ModuleType) else None
        top = local_module_file(name.partition(".")[0], folder) if file is not None else None
        if top is not None and file.is_relative_to(top.parent if top.name == "__init__.py" else top):
            del sys.modules[name]
    importlib.invalidate_caches()


def _top_level_names(folder: Path) -> set[str]:
    """The top-level module names `folder` provides a file for (`NAME.py`, `NAME/__init__.py`):
    those `local_module_file` can find there."""
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return set()
    return {entry.stem if entry.suffix == ".py" else entry.name for entry in entries
            if (entry.suffix == ".py" and entry.is_file()) or (entry / "__init__.py").is_file()}


@contextlib.contextmanager
def first_on_path(*folders: Path) -> Iterator[None]:
    """`folders` at the front of `sys.path` for the duration (only those not already there)."""
    added = [str(f) for f in folders if str(f) not in sys.path]
    sys.path[:0] = added
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for entry in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)
