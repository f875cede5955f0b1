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

`allowing(trust=..., roots=...)` adds to both for the duration of a command (the CLI uses it).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterable, Iterator

from decomp.dsl.errors import DecompError

TRUST_ENV = "DECOMP_TRUST"
ROOTS_ENV = "DECOMP_ALLOW_ROOTS"
#: The bundled programs (`decomp programs`): every program may read files there.
BUNDLED_PROGRAMS = Path(__file__).resolve().parents[1] / "programs"

#: Trusted always: the helpers of the bundled programs ship with decomp (as trusted as decomp
#: itself), and programs copied out of programs/ to be adapted keep working.
DEFAULT_TRUSTED = ("decomp.programs",)

_trusted: list[str] = []
_roots: list[Path] = []


@contextlib.contextmanager
def allowing(trust: Iterable[str] = (), roots: Iterable[str | Path] = ()) -> Iterator[None]:
    """Trust the modules `trust` and allow the folders `roots` (relative ones from the working
    folder) while the block runs, in addition to `DECOMP_TRUST` and `DECOMP_ALLOW_ROOTS`."""
    modules = [m.strip() for m in trust if m and m.strip()]
    folders = [_resolved(Path(r).expanduser()) for r in roots if str(r)]
    _trusted.extend(modules)
    _roots.extend(folders)
    try:
        yield
    finally:
        for module in modules:
            _trusted.remove(module)
        for folder in folders:
            _roots.remove(folder)


def allowed_now() -> tuple[tuple[str, ...], tuple[Path, ...]]:
    """The modules trusted and the folders allowed by the `allowing(...)` blocks open now (not
    the defaults, nor the environment's): what a run directory records as the run's trust."""
    return tuple(dict.fromkeys(_trusted)), tuple(dict.fromkeys(_roots))


def trusted_modules() -> tuple[str, ...]:
    """The modules trusted now: `DEFAULT_TRUSTED`, `allowing(...)` ones, then those of
    `DECOMP_TRUST`."""
    env = [m.strip() for m in os.environ.get(TRUST_ENV, "").split(",") if m.strip()]
    return tuple(dict.fromkeys([*DEFAULT_TRUSTED, *_trusted, *env]))


def is_trusted(module: str) -> bool:
    """Whether `module` is, or is inside, a trusted module or package."""
    return any(module == t or module.startswith(t + ".") for t in trusted_modules())


def extra_roots() -> tuple[Path, ...]:
    """The folders allowed on purpose: `allowing(...)` ones, then those of `DECOMP_ALLOW_ROOTS`."""
    env = [_resolved(Path(p).expanduser()) for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if p.strip()]
    return tuple(dict.fromkeys([*_roots, *env]))


def program_roots(program: str | Path) -> tuple[Path, ...]:
    """Where the program at `program` may read files: its folder (as named and with symlinks
    resolved), the bundled programs, and the folders allowed on purpose."""
    path = Path(program)
    return tuple(dict.fromkeys([_resolved(path.parent), _resolved(path).parent, BUNDLED_PROGRAMS, *extra_roots()]))


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
