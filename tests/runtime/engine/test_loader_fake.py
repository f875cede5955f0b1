"""Tests of decomp.runtime.engine.loader's `fake:` model declarations: a file (confined to the
program's folders) or a Python responder `fake:module:function` (allowed as python handlers are)."""
from __future__ import annotations

import itertools

import pytest

from decomp.dsl.errors import DecompError
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FOLDER_OPTION

_names = itertools.count()

PROGRAM = '''model default = "fake:{spec}"
handler ask = prompt(text="Q: {{{{ query }}}}\\nA:", max_tokens=8)
main ask
'''


def program(folder, spec: str):
    path = folder / "prog.decomp"
    path.write_text(PROGRAM.format(spec=spec))
    return path


def responder(folder) -> str:
    name = f"loader_responder_{next(_names)}"
    (folder / f"{name}.py").write_text("def reply(request):\n    return 'answered by ' + __name__\n")
    return name


def test_a_declared_responder_of_the_programs_folder_runs(tmp_path, monkeypatch):
    folder = tmp_path / "project"
    folder.mkdir()
    name = responder(folder)
    monkeypatch.chdir(tmp_path)  # not the working folder's module: the program's
    session = Session(python_workers=False)
    module = session.load(program(folder, f"{name}:reply"))
    spec, options = module.model_decls["default"]
    assert spec == f"fake:{name}:reply" and options[FOLDER_OPTION].startswith(str(folder))
    assert session.run(module, {"question": "hi"}).answer == f"answered by {name}"


def test_an_untrusted_responder_module_is_a_check_error_at_the_declaration(tmp_path):
    path = program(tmp_path, "json:dumps")
    with pytest.raises(DecompError) as caught:
        Session().load(path)
    assert "fake model 'json:dumps'" in str(caught.value) and "--trust json" in str(caught.value)
    assert caught.value.span.line == 1


def test_a_missing_responder_module_is_a_check_error(tmp_path):
    with pytest.raises(DecompError, match="no module named 'not_here_at_all'"):
        Session().load(program(tmp_path, "not_here_at_all:reply"))


def test_a_fake_file_stays_a_confined_path(tmp_path):
    (tmp_path / "answers.json").write_text('{"default": "from the file"}')
    session = Session()
    module = session.load(program(tmp_path, "answers.json"))
    assert module.model_decls["default"][0] == f"fake:{tmp_path / 'answers.json'}"
    assert FOLDER_OPTION not in module.model_decls["default"][1]
    assert session.run(module, {"question": "hi"}).answer == "from the file"
    with pytest.raises(DecompError, match="outside the program's folder"):
        Session().load(program(tmp_path, "../elsewhere.json"))
