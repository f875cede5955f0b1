"""A document's problems, as `decomp check` finds them, in every file they are in.

`analyse` is what the language server's worker process runs on the editor's unsaved text: the
checker (`decomp.runtime.engine.checking.check_file`) and the index (`index.build_index`). It
never raises: whatever goes wrong becomes a problem at the document's first line. The worker
ends with the server, even one killed by SIGKILL (`start_worker`).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from decomp.dsl import nodes
from decomp.dsl.errors import CheckWarning, DecompError, Diagnostics, UnclosedError
from decomp.dsl.parser import special_file
from decomp.handlers.sandbox.trust import NO_TRUST, FolderTrust, Trust
from decomp.runtime.engine.checking import check_file
from decomp.runtime.engine.loader import load_plugin
from decomp.editors.lsp.index import Index, build_index


@dataclass(frozen=True)
class Problem:
    """One diagnostic: where (None: the document's first line), what, how bad."""

    span: nodes.Span | None
    message: str
    severity: str  # "error" | "warning"
    code: str
    #: Other places that explain it: (span, message), such as where an unclosed bracket opened.
    related: tuple[tuple[nodes.Span, str], ...] = ()


@dataclass
class Analysis:
    """A document's problems by file (resolved path; the document's own under its path) and its index."""

    path: Path
    version: int | None
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    index: Index | None = None


@dataclass(frozen=True)
class Settings:
    """What the server was started with: plugins to import, modules to trust, folders to allow,
    and the folders whose Python the checker may import (`--trust-folder`, the trust list, the
    editor's trust; none: no program's own module is imported)."""

    plugins: tuple[str, ...] = ()
    trust: tuple[str, ...] = ()
    allow_roots: tuple[str, ...] = ()
    trusted_folders: tuple[str, ...] = ()

    def policy(self) -> Trust:
        """What the programs checked may reach beyond their folders (`--trust`, `--allow-root`)."""
        return Trust.of(self.trust, self.allow_roots)


#: Seconds between two looks of the worker at its parent, where no death signal can be asked for.
PARENT_POLL_S = 0.5
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def start_worker(settings: Settings, parent: int | None = None) -> None:
    """The worker process's start: it ends when the process `parent` (the server) does
    (`die_with`), and the plugins are imported once (their problems are reported with each
    analysis by the checker, as `decomp check --plugin` would)."""
    if parent is not None:
        die_with(parent)
    for plugin in settings.plugins:
        try:  # the server said why one of a folder not trusted is not imported
            load_plugin(plugin, trusted_folders=FolderTrust.of(settings.trusted_folders))
        except DecompError:
            pass


def die_with(parent: int) -> None:
    """End this process when the process `parent` ends, however it ends (SIGKILL too): on Linux
    the kernel sends SIGKILL at once (`PR_SET_PDEATHSIG`; the server starts its worker from its
    loop's thread, which lives as long as the server); elsewhere a thread looks every
    `PARENT_POLL_S`. A parent gone before this ran ends it now."""
    if not _death_signal():
        threading.Thread(target=_watch, args=(parent,), name="decomp-parent-watch", daemon=True).start()
    if os.getppid() != parent:
        os._exit(1)


def _death_signal() -> bool:
    """Ask the kernel for SIGKILL when the parent dies (Linux); False where it cannot be asked."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def analyse(path: str, text: str, version: int | None, fewshot: bool | None = None,
            settings: Settings = Settings(), with_index: bool = True) -> Analysis:
    """Check `text` as the content of `path`, and index it (`with_index`: a large document's
    index is built where it is used instead: its syntax tree, pickled back from the worker,
    would hold the server's event loop for as long as it takes to unpickle, over a second at
    1 MB)."""
    resolved = Path(path)
    analysis = Analysis(resolved, version)
    special = special_file(resolved)
    if special is not None:  # its imports would be looked for beside a file that is none
        analysis.problems[str(resolved)] = [Problem(
            None, f"this document is {special}, not a regular file: it is not checked", "error", "error")]
        return analysis
    trust = settings.policy()
    try:
        checked = check_file(resolved, text=text, trusted_folders=FolderTrust.of(settings.trusted_folders), trust=trust)
        found = [_problem(w) for w in checked.warnings]
    except DecompError as err:
        found = [_problem(e) for e in (err.errors if isinstance(err, Diagnostics) else [err])]
    except (OSError, RecursionError, MemoryError) as err:
        found = [Problem(None, f"cannot check this file: {type(err).__name__}: {err}", "error", "error")]
    except Exception as err:  # a bug of ours: said, never a crash
        found = [Problem(None, f"internal error of the checker: {type(err).__name__}: {err}\n"
                               + "".join(traceback.format_exception(err)[-3:]), "error", "internal error")]
    for problem in found:
        where = problem.span.file if problem.span is not None else str(resolved)
        analysis.problems.setdefault(where, []).append(problem)
    if with_index:
        analysis.index = safe_index(resolved, text, fewshot, trust)
    return analysis


def safe_index(path: Path, text: str, fewshot: bool | None, trust: Trust = NO_TRUST) -> Index | None:
    """`build_index`, or None when it fails: an index is a convenience (without one, hover and
    completion say less), never a reason to lose the problems."""
    try:
        return build_index(path, text, fewshot, trust)
    except Exception:
        return None


def _problem(err: DecompError) -> Problem:
    message = err.message + (f"\nexpected {err.expected}" if err.expected else "")
    related = ((err.opened, err.note.message),) if isinstance(err, UnclosedError) else ()
    severity = "warning" if isinstance(err, CheckWarning) else "error"
    return Problem(err.span, message, severity, err.kind, related)
