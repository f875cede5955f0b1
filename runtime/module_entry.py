"""`python -m decomp`: Python's rule for `-m` puts the working folder first on `sys.path`, so a
`pygls.py` or `pydantic.py` of the folder a user checks, or opens in an editor, would be imported
in place of the real module. `drop_working_folder` takes that entry out; the package's
`__init__` calls it before it imports anything else. The `decomp` command (a console script)
puts no working folder there.
"""
from __future__ import annotations

import os
import sys


def drop_working_folder() -> None:
    """Remove the working folder Python put first on `sys.path` for `python -m decomp` (or
    `python -m decomp.MODULE`): while runpy imports the package, `sys.argv[0]` is "-m". Nothing
    otherwise, nor under `-P` or `-I` (nothing was put there)."""
    if sys.argv[:1] != ["-m"] or sys.flags.safe_path or not sys.path:
        return
    module = _dash_m_module(getattr(sys, "orig_argv", []))
    if module is None or module.partition(".")[0] != "decomp":
        return
    try:
        here = os.getcwd()
    except OSError:  # a working folder removed since: Python put "" or its old path there
        here = None
    if sys.path[0] in ("", here):
        del sys.path[0]


def _dash_m_module(argv: list[str]) -> str | None:
    """The module of `python [OPTIONS] -m MODULE` in the interpreter's own arguments, or None
    (a script, `-c`, or options not read here)."""
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None)
        if arg.startswith("-m"):
            return arg[2:]
        if arg in ("-W", "-X"):  # the options that take the next argument
            next(args, None)
        elif not arg.startswith("-") or arg in ("-c", "-"):  # a script, a command: not -m
            return None
    return None
