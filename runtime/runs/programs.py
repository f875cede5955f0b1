"""Which program a run runs: a path or a bundled program's name, loaded with its `main`
chosen (`decomp run FILE --main NAME`), in one process or in every worker of a Ray run."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from decomp.dsl.errors import DecompError
from decomp.runtime.engine.loader import LoadedModule
from decomp.runtime.engine.session import Session

__all__ = ["PROGRAMS_DIR", "find_program", "load_program", "use_main"]

#: The bundled programs (`decomp programs` lists them); a program name may be one of them.
PROGRAMS_DIR = Path(__file__).resolve().parents[2] / "programs"


def find_program(name: str | Path) -> Path:
    """`name` as a path when it exists, else the bundled program it names, such as
    `decomp/letter_cat_symbolic` (with or without `.decomp`); a `DecompError` otherwise."""
    path = Path(name)
    if path.exists():
        return path
    text = str(name)
    bundled = PROGRAMS_DIR / (text if text.endswith(".decomp") else text + ".decomp")
    if bundled.is_file():
        return bundled
    raise DecompError(f"no such file or bundled program: {name} (see `decomp programs`)")


def use_main(loaded: LoadedModule, main: str | None, program: str | Path | None = None) -> LoadedModule:
    """`loaded` running its program or handler `main` instead of its `main` line (a copy;
    `loaded` itself is unchanged); `loaded` when `main` is None. A `DecompError` names the
    programs and handlers there are when `main` is none of them."""
    if main is None:
        return loaded
    if main not in loaded.handlers:
        raise DecompError(f"{program if program is not None else loaded.path} has no program or handler named "
                          f"'{main}' (it has: {', '.join(sorted(loaded.handlers))})")
    return dataclasses.replace(loaded, main=main)


def load_program(session: Session, program: str | Path | LoadedModule, main: str | None) -> tuple[LoadedModule, Path]:
    """The module to run (`program` loaded in `session`, or a module it loaded already, with
    `main` chosen) and the path of its main file."""
    if isinstance(program, LoadedModule):
        return use_main(program, main), Path(program.path)
    path = find_program(program)
    return use_main(session.load(path), main, path), path
