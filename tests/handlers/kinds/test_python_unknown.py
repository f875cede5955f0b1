"""The `python` handler's "unknown python function" message, worded for what was given: a
registered name (then the registered ones are listed and a module:function path suggested), or
a module:function path (then what went wrong with it: no such module, a module that would not
import, or a module without that function)."""
from __future__ import annotations

import itertools
from pathlib import Path

from decomp.handlers.base import LoadContext
from decomp.handlers.kinds.python import PythonHandler

_names = itertools.count()


def message(function: str, folder: Path) -> str:
    handler = PythonHandler("py", PythonHandler.Options(function=function), None, LoadContext(folder))
    (problem,) = handler.check()
    return problem.message


def module(folder: Path, source: str) -> str:
    name = f"unknown_fn_helpers_{next(_names)}"
    (folder / f"{name}.py").write_text(source, encoding="utf-8")
    return name


def test_a_module_without_the_function_is_said_so_with_its_functions(tmp_path):
    name = module(tmp_path, "def shout(q):\n    return q.upper()\n\ndef _hidden(q):\n    return q\n")
    text = message(f"{name}:whisper", tmp_path)
    assert text == (f"unknown python function '{name}:whisper': cannot load '{name}:whisper': the module "
                    f"'{name}' was imported, but it has no function 'whisper' (its functions: shout)")
    assert "give a 'module:function' path" not in text


def test_a_module_that_does_not_import_is_said_so(tmp_path):
    name = module(tmp_path, "import no_such_dependency_here\n")
    text = message(f"{name}:f", tmp_path)
    assert f"importing the module '{name}' failed: ModuleNotFoundError" in text
    assert "give a 'module:function' path" not in text


def test_a_missing_module_is_said_so(tmp_path):
    text = message("no_such_module_xyz:f", tmp_path)
    assert text == ("unknown python function 'no_such_module_xyz:f': cannot load 'no_such_module_xyz:f': "
                    "there is no module named 'no_such_module_xyz'")


def test_a_bare_name_still_lists_the_registered_and_suggests_a_path(tmp_path):
    text = message("nope_not_registered", tmp_path)
    assert text.endswith("; or give a 'module:function' path)") and "registered: " in text
