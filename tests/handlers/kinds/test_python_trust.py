"""Python handlers are default-deny: only registered functions, modules of the program's own
folder, the bundled programs' helpers and modules the user trusts (`--trust MODULE`,
`DECOMP_TRUST`) may be called; anything else is refused by `decomp check`, never imported."""
import json
import sys

import pytest

from decomp import Session
from decomp.dsl.errors import DecompError
from decomp.handlers.sandbox.trust import Trust
from decomp.runtime.cli import PROGRAMS_DIR
from tests.helpers import invoke


def program(tmp_path, function, name="p.decomp"):
    path = tmp_path / name
    path.write_text(f'handler h = python(function="{function}")\nmain h\n', encoding="utf-8")
    return path


@pytest.mark.parametrize("function", ["string:capwords", "cProfile:run", "profile:run", "pydoc:importfile",
                                      "linecache:getlines", "json:loads", "xml.sax.saxutils:escape"])
def test_check_refuses_functions_of_modules_that_are_not_allowed(tmp_path, function):
    path = program(tmp_path, function)
    result = invoke("check", path)
    assert result.exit_code == 1
    module = function.partition(":")[0]
    # positioned at the function's value, with how to allow the module on purpose
    assert f"{path}:1:29: python handler 'h': python function '{function}' is not allowed" in result.output
    assert f"--trust {module.partition('.')[0]}" in result.output and "DECOMP_TRUST=" in result.output


def test_a_refused_module_is_never_imported(tmp_path):
    assert "this" not in sys.modules  # importing `this` prints the Zen of Python
    result = invoke("check", program(tmp_path, "this:s"))
    assert result.exit_code == 1 and "is not allowed" in result.output
    assert "this" not in sys.modules and "Beautiful is better" not in result.output


def test_session_load_refuses_too(tmp_path):
    with pytest.raises(DecompError, match="'cProfile:run' is not allowed"):
        Session().load(program(tmp_path, "cProfile:run"))


def test_trust_option_allows_a_module_and_its_submodules(tmp_path):
    path = program(tmp_path, "string:capwords")
    assert invoke("check", path, "--trust", "string").exit_code == 0
    ran = invoke("run", path, "--trust", "string", "-q", "hello big world")
    assert ran.exit_code == 0, ran.output
    assert ran.output.strip() == "Hello Big World"
    nested = program(tmp_path, "xml.sax.saxutils:escape", "x.decomp")
    assert invoke("check", nested, "--trust", "xml").exit_code == 0
    assert invoke("run", nested, "--trust", "string", "--trust", "xml", "-q", "a<b").output.strip() == "a&lt;b"


def test_trust_lasts_for_the_command_only(tmp_path):
    path = program(tmp_path, "string:capwords")
    assert invoke("check", path, "--trust", "string").exit_code == 0
    assert invoke("check", path).exit_code == 1
    with pytest.raises(DecompError, match="not allowed"):  # nor for the process's next session
        Session().load(path)


def test_trust_by_environment_variable(tmp_path, monkeypatch):
    path = program(tmp_path, "string:capwords")
    monkeypatch.setenv("DECOMP_TRUST", "textwrap, string")
    assert invoke("check", path).exit_code == 0
    assert invoke("run", path, "-q", "a b").output.strip() == "A B"
    monkeypatch.setenv("DECOMP_TRUST", "strings")  # a prefix of the name is no trust
    assert invoke("check", path).exit_code == 1


def test_trust_in_the_library(tmp_path):
    path = program(tmp_path, "string:capwords")
    session = Session(trust=Trust.of(["string"]))
    assert session.run(session.load(path), {"question": "a b"}).answer == "A B"


def test_a_module_of_the_programs_folder_is_allowed(tmp_path):
    (tmp_path / "helpers_trust_local.py").write_text("def shout(query):\n    return query.upper() + '!'\n")
    (tmp_path / "pkg_trust_local").mkdir()
    (tmp_path / "pkg_trust_local" / "__init__.py").write_text("")
    (tmp_path / "pkg_trust_local" / "text.py").write_text("def twice(query):\n    return query * 2\n")
    path = program(tmp_path, "helpers_trust_local:shout")
    assert invoke("check", path).exit_code == 0
    assert invoke("run", path, "-q", "hi").output.strip() == "HI!"
    nested = program(tmp_path, "pkg_trust_local.text:twice", "n.decomp")
    assert invoke("run", nested, "-q", "ab").output.strip() == "abab"


def test_a_symlinked_module_that_leaves_the_folder_is_not_local(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far_trust_mod.py").write_text("def f(query):\n    return 'far'\n")
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "far_trust_mod.py").symlink_to(tmp_path / "elsewhere" / "far_trust_mod.py")
    result = invoke("check", program(tmp_path / "prog", "far_trust_mod:f"))
    assert result.exit_code == 1 and "'far_trust_mod:f' is not allowed" in result.output


def test_registered_functions_are_allowed(tmp_path):
    path = program(tmp_path, "capwords")  # registered by tests/conftest.py
    assert invoke("run", path, "-q", "a b").output.strip() == "A B"


@pytest.mark.parametrize("name", ["decomp/letter_cat_symbolic", "decomp/reverse_symbolic",
                                  "tasklama/steps", "commaqa/fine_symbolic", "tasklama/graphs",
                                  "decomp/letter_cat"])
def test_bundled_programs_still_check(name):
    if not (PROGRAMS_DIR / f"{name}.decomp").is_file():
        pytest.skip(f"no bundled program {name}")
    result = invoke("check", name)
    assert result.exit_code == 0, result.output


def test_a_bundled_program_copied_elsewhere_keeps_its_helpers(tmp_path):
    copy = tmp_path / "letter_cat_symbolic.decomp"
    copy.write_text((PROGRAMS_DIR / "decomp" / "letter_cat_symbolic.decomp").read_text())
    result = invoke("check", copy, "--json")
    assert result.exit_code == 0, result.output
    functions = json.loads(result.stdout)["python_functions"]
    assert functions and {f["allowed"] for f in functions} == {"trusted"}  # decomp.programs, by default


def test_check_json_lists_every_python_function(tmp_path):
    (tmp_path / "helpers_trust_json.py").write_text("def f(query):\n    return query\n")
    (tmp_path / "sub.decomp").write_text('handler inner = python(function="helpers_trust_json:f")\nmain inner\n')
    path = tmp_path / "m.decomp"
    path.write_text('handler a = python(function="capwords")\n'
                    'handler b = python(function="string:capwords")\n'
                    'handler c = program(file="sub.decomp")\n'
                    'program p(question) {\n  QS: [a] #question\n  QS: [b] #1\n  QS: [c] #2\n}\nmain p\n')
    result = invoke("check", path, "--json", "--trust", "string")
    assert result.exit_code == 0, result.output
    listed = {f["function"]: f for f in json.loads(result.stdout)["python_functions"]}
    assert set(listed) == {"capwords", "string:capwords", "helpers_trust_json:f"}
    assert listed["capwords"]["allowed"] == "registered"
    assert listed["string:capwords"]["allowed"] == "trusted"
    assert listed["string:capwords"]["file"].endswith("string.py")
    assert listed["helpers_trust_json:f"]["allowed"] == "local"
    assert listed["helpers_trust_json:f"]["handler"] == "inner"
    bundled = json.loads(invoke("check", "decomp/letter_cat_symbolic", "--json").stdout)["python_functions"]
    assert {f["allowed"] for f in bundled} == {"local"}
    assert all(f["function"].startswith("decomp.programs.decomp.") for f in bundled)


# ---- ways around the rules (found in review): each one refused at check, nothing run
def test_a_function_path_cannot_walk_to_what_a_module_imported(tmp_path):
    """`module:random._os.popen` would reach `os.popen` through an allowed module's imports."""
    marker = tmp_path / "pwned"
    path = program(tmp_path, "decomp.programs.tasklama.handlers:random._os.popen")
    result = invoke("check", path)
    assert result.exit_code == 1 and "name one public function of the module" in result.output
    ran = invoke("run", path, "-q", f"touch {marker}")
    assert ran.exit_code != 0 and not marker.exists()


def test_a_function_only_imported_by_a_local_module_is_refused(tmp_path):
    (tmp_path / "helpers.py").write_text("from os import getcwd\ndef own(query):\n    return query\n",
                                         encoding="utf-8")
    trusted = ("--trust-folder", tmp_path)  # the check imports helpers.py only from a trusted folder
    refused = invoke("check", program(tmp_path, "helpers:getcwd"), *trusted)
    assert refused.exit_code == 1
    assert "not a Python function" in refused.output or "defined in" in refused.output
    (tmp_path / "shim.py").write_text("from string import capwords\n", encoding="utf-8")
    shim = invoke("check", program(tmp_path, "shim:capwords", name="q.decomp"), *trusted)
    assert shim.exit_code == 1 and "is defined in the module 'string', not in 'shim'" in shim.output
    assert invoke("check", program(tmp_path, "helpers:own", name="r.decomp"), *trusted).exit_code == 0


def test_a_folder_named_like_a_stdlib_package_does_not_make_its_modules_local(tmp_path):
    """`logging/config.py` beside the program (no `__init__.py`) once made `logging.config` look
    local while the standard library's was imported (`fileConfig` runs code from a file)."""
    (tmp_path / "logging").mkdir()
    (tmp_path / "logging" / "config.py").write_text("", encoding="utf-8")
    result = invoke("check", program(tmp_path, "logging.config:fileConfig"))
    assert result.exit_code == 1 and "is not allowed" in result.output
