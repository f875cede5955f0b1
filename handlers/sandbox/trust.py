"""What a program may reach: which Python modules its `python(function="module:attr")` handlers
may import, and which folders its `import "..."` lines and `file=` options may read.

A program is confined by default:

* Python functions: registered ones (`@python_handler`, entry points, `--plugin` modules), those
  of modules whose file lies in the program's own folder (`helpers:f` beside the .decomp file,
  or `decomp.programs.decomp.letters:words` for a bundled program in programs/decomp/), and those
  of the bundled programs' helpers (`decomp.programs`, trusted by default: they ship with
  decomp, and a bundled program copied elsewhere keeps working), and those of modules the user
  trusts on purpose: `--trust MODULE` (repeatable) on `decomp run` and
  `decomp check`, or `DECOMP_TRUST=MODULE,MODULE` in the environment. Trusting `pkg` trusts
  `pkg.sub` too. Everything else (the standard library, site-packages) is refused by the check.
* Files: `import "..."` and `file=` paths resolve (symlinks followed) inside the program's
  folder or the bundled programs folder, unless the user allows another folder on purpose:
  `--allow-root DIR` (repeatable) or `DECOMP_ALLOW_ROOTS=DIR:DIR` (`os.pathsep`-separated).

A `Trust` value holds what the user allowed (`--trust`, `--allow-root`, `load(trust=...,
allow_roots=...)`); the session owns it and hands it to each load and call, so two sessions in
one process never share it.

Checking is not running. `decomp check` and `decomp lsp` import a program's own Python modules
(`helpers:f` beside the .decomp file) only from folders the user trusts, in the manner of VS
Code's workspace trust: a `FolderTrust` the command builds (`folder_trust`) from
`--trust-folder DIR`, the trust list file (`trust_list_file()`: `$XDG_CONFIG_HOME/decomp/
trusted-folders`, one folder per line) and `DECOMP_TRUSTED_FOLDERS`, plus what the editor says it
trusts, and hands to the check. Elsewhere the function is not imported (`not_imported` says so
once, at the handler). `decomp run` passes none: running a program is consent to run its code.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from decomp.dsl.errors import DecompError

TRUST_ENV = "DECOMP_TRUST"
ROOTS_ENV = "DECOMP_ALLOW_ROOTS"
#: Folders whose Python a check may import (`os.pathsep`-separated), beside `--trust-folder`.
TRUSTED_FOLDERS_ENV = "DECOMP_TRUSTED_FOLDERS"
#: The bundled programs (`decomp programs`): every program may read files there.
BUNDLED_PROGRAMS = Path(__file__).resolve().parents[2] / "programs"

#: Trusted always: the helpers of the bundled programs ship with decomp (as trusted as decomp
#: itself), and programs copied out of programs/ to be adapted keep working.
DEFAULT_TRUSTED = ("decomp.programs",)

@dataclass(frozen=True)
class Trust:
    """What a session lets its programs reach beyond their own folders: the modules `modules`
    whose functions `python(function="module:f")` may call (`--trust MODULE`), and the folders
    `roots` whose files `import` lines and `file=` options may read (`--allow-root DIR`), as
    resolved paths. A value owned by one session and handed to each load and call that needs it:
    never process-wide, so two sessions in one process each see only their own. The defaults
    (`DEFAULT_TRUSTED`, the bundled programs) and the environment (`DECOMP_TRUST`,
    `DECOMP_ALLOW_ROOTS`, read when asked) hold for every trust."""

    modules: tuple[str, ...] = ()
    roots: tuple[Path, ...] = ()

    @classmethod
    def of(cls, modules: Iterable[str] = (), roots: Iterable[str | Path] = ()) -> "Trust":
        """The trust of `modules` and `roots` (`~` expanded, relative ones from the working folder)."""
        return cls().adding(modules, roots)

    def adding(self, modules: Iterable[str] = (), roots: Iterable[str | Path] = ()) -> "Trust":
        """This trust and `modules` and `roots` too."""
        more_modules = [m.strip() for m in modules if m and m.strip()]
        more_roots = [_resolved(Path(r).expanduser()) for r in roots if str(r)]
        return Trust(tuple(dict.fromkeys([*self.modules, *more_modules])),
                     tuple(dict.fromkeys([*self.roots, *more_roots])))

    def record(self) -> dict[str, list[str]]:
        """What run.json's options record of it: `trust` and `allow_roots`, each only when there
        is some (not the defaults, nor the environment's)."""
        return {**({"trust": list(self.modules)} if self.modules else {}),
                **({"allow_roots": [str(r) for r in self.roots]} if self.roots else {})}

    def trusted_modules(self) -> tuple[str, ...]:
        """The modules trusted: `DEFAULT_TRUSTED`, this trust's, then those of `DECOMP_TRUST`."""
        env = [m.strip() for m in os.environ.get(TRUST_ENV, "").split(",") if m.strip()]
        return tuple(dict.fromkeys([*DEFAULT_TRUSTED, *self.modules, *env]))

    def is_trusted(self, module: str) -> bool:
        """Whether `module` is, or is inside, a trusted module or package."""
        return any(module == t or module.startswith(t + ".") for t in self.trusted_modules())

    def extra_roots(self) -> tuple[Path, ...]:
        """The folders allowed on purpose: this trust's, then those of `DECOMP_ALLOW_ROOTS`."""
        env = [_resolved(Path(p).expanduser()) for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep)
               if p.strip()]
        return tuple(dict.fromkeys([*self.roots, *env]))

    def program_roots(self, program: str | Path) -> tuple[Path, ...]:
        """Where the program at `program` may read files: its folder (as named and with symlinks
        resolved), the bundled programs, and the folders allowed on purpose."""
        path = Path(program)
        return tuple(dict.fromkeys([_resolved(path.parent), _resolved(path).parent, BUNDLED_PROGRAMS,
                                    *self.extra_roots()]))


#: No trust beyond the defaults and the environment's: what a load, call or metric gets when
#: no session hands it one.
NO_TRUST = Trust()


def inside(path: Path, roots: Iterable[Path]) -> bool:
    """Whether `path`, resolved (symlinks followed), lies in one of `roots`."""
    real = _resolved(path)
    return any(real == root or real.is_relative_to(root) for root in roots)


def refusal(written: str, what: str, roots: tuple[Path, ...]) -> str:
    """The message for a path outside every allowed folder: it names the path as written, never
    what the file holds."""
    folder = roots[0] if roots else None
    where = f"the program's folder ({folder})" if folder is not None else "the program's folder"
    return (f"{what} {written!r} is outside {where} and the bundled programs; a program reads only "
            f"files in its own folder. To allow another folder on purpose, pass --allow-root DIR "
            f"(decomp run / decomp check) or set {ROOTS_ENV}=DIR")


def untrusted(function: str, module: str) -> str:
    """The message for a Python function of a module that is not allowed."""
    top = module.partition(".")[0]
    return (f"python function {function!r} is not allowed: the module {module!r} is not in the program's "
            f"folder, not registered and not trusted. Call functions of your own modules (a .py file "
            f"beside the .decomp file), register one with @python_handler (and --plugin), or trust the "
            f"module on purpose: --trust {top} (decomp run / decomp check) or {TRUST_ENV}={top}")


# ---- folder trust: whose Python a check may import
@dataclass(frozen=True)
class FolderTrust:
    """The folders whose Python modules a check (`decomp check`, `decomp lsp`) may import, as
    resolved paths; a folder trusts everything under it. The bundled programs are always trusted
    (they ship with decomp). Owned by the command that checks, passed to the load: never global."""

    folders: tuple[Path, ...] = ()

    @classmethod
    def of(cls, folders: Iterable[str | Path]) -> "FolderTrust":
        """The trust of `folders` (`~` expanded, relative ones from the working folder)."""
        return cls(tuple(dict.fromkeys(_resolved(Path(f).expanduser()) for f in folders if str(f).strip())))

    def adding(self, folders: Iterable[str | Path]) -> "FolderTrust":
        """This trust and `folders` too."""
        return FolderTrust.of((*self.folders, *folders))

    def trusts(self, path: str | Path) -> bool:
        """Whether `path`, resolved (symlinks followed), lies in a trusted folder or the bundled
        programs."""
        return inside(Path(path), (*self.folders, BUNDLED_PROGRAMS))


def trust_list_file(environ: Mapping[str, str] | None = None) -> Path:
    """The trust list: `$XDG_CONFIG_HOME/decomp/trusted-folders` (else
    `~/.config/decomp/trusted-folders`), one absolute folder per line (`~` allowed), `#` comments.
    decomp only reads it; the user writes it."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "decomp" / "trusted-folders"


def read_trust_list(path: Path) -> tuple[list[Path], list[str]]:
    """The folders the trust list at `path` names, and a worded problem (`file:line: ...`) for
    each line that is not an absolute folder (skipped). A missing file trusts nothing."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], []
    except OSError as err:
        return [], [f"{path}: cannot read the trust list: {err.strerror or err}"]
    folders, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        folder = Path(entry).expanduser()
        if folder.is_absolute():
            folders.append(folder)
        else:
            problems.append(f"{path}:{number}: {entry!r} is not an absolute folder (nor starts with ~); "
                            "this line trusts nothing")
    return folders, problems


def folder_trust(given: Iterable[str | Path] = (),
                 environ: Mapping[str, str] | None = None) -> tuple[FolderTrust, list[str]]:
    """The folders a check may import Python from: `given` (`--trust-folder`), then the trust
    list file's, then `DECOMP_TRUSTED_FOLDERS`'; and the trust list's problems, to be said."""
    env = os.environ if environ is None else environ
    listed, problems = read_trust_list(trust_list_file(env))
    from_env = [p for p in env.get(TRUSTED_FOLDERS_ENV, "").split(os.pathsep) if p.strip()]
    return FolderTrust.of([*given, *listed, *from_env]), problems


def not_imported(function: str, folder: Path) -> str:
    """The notice for a function a check did not import: its folder is not trusted."""
    return (f"{function!r} was not imported, so it is not checked: the folder {folder} is not trusted (a check "
            f"runs no code of a folder you have not trusted). To trust it: --trust-folder {folder}, a line in "
            f"{trust_list_file()}, {TRUSTED_FOLDERS_ENV}, or your editor's workspace trust; decomp run imports "
            "it (running a program is consent to run it)")


class PathRefused(DecompError, ValueError):
    """A path a program may not read (outside its allowed folders). `written` is the path as the
    program wrote it; the message says what to do. A `DecompError` (kinds that catch those while
    reading a file report it) and a `ValueError`."""

    def __init__(self, written: str, message: str):
        super().__init__(message)
        self.written = written


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return Path(os.path.abspath(path))
