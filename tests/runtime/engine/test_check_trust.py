"""`decomp check` imports a program's own Python only from folders the user trusts
(`--trust-folder`, the trust list file, `DECOMP_TRUSTED_FOLDERS`); elsewhere it checks the rest
and says once, at the handler, that the function was not imported. `decomp run` still imports
it (running a program is consent to run it)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from decomp.dsl.errors import DecompError
from decomp.handlers.sandbox.trust import BUNDLED_PROGRAMS, TRUSTED_FOLDERS_ENV, FolderTrust, folder_trust, trust_list_file
from decomp.runtime.engine.checking import check_file
from tests.helpers import invoke

#: A module whose import leaves a marker file beside it: proof that its code ran.
HELPERS = '''\
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("helpers.py ran", encoding="utf-8")


def f(query):
    return query.upper()
'''
PROGRAM = '''\
# a program whose handler names its folder's helpers
handler f = python(function="helpers:f")
main f
'''
NOTICE = "was not imported, so it is not checked"


@pytest.fixture(autouse=True)
def _no_trust_of_the_user(tmp_path_factory, monkeypatch):
    """Neither the user's trust list nor their environment decides these tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.delenv(TRUSTED_FOLDERS_ENV, raising=False)


def cloned(folder: Path, program: str = PROGRAM) -> Path:
    """A folder as a cloned repository holds it: helpers.py and p.decomp."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (folder / "p.decomp").write_text(program, encoding="utf-8")
    return folder / "p.decomp"


def test_check_of_an_untrusted_folder_imports_nothing_and_says_so_once_at_the_handler(tmp_path):
    path = cloned(tmp_path / "repo")
    result = invoke("check", path)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "repo" / "imported.marker").exists()
    assert result.output.count(NOTICE) == 1
    line = next(line for line in result.output.splitlines() if NOTICE in line)
    assert line.startswith(f"{path}:2:1: warning: python handler 'f': 'helpers:f' was not imported")
    assert f"--trust-folder {(tmp_path / 'repo').resolve()}" in line and str(trust_list_file()) in line
    assert f"{path}: ok (1 warning)" in result.output


def test_check_with_the_folder_trusted_imports_and_checks_the_function(tmp_path):
    path = cloned(tmp_path / "repo")
    result = invoke("check", path, "--trust-folder", tmp_path / "repo")
    assert result.exit_code == 0 and NOTICE not in result.output, result.output
    assert (tmp_path / "repo" / "imported.marker").read_text(encoding="utf-8") == "helpers.py ran"


def test_a_trusted_parent_folder_trusts_the_folders_under_it(tmp_path):
    path = cloned(tmp_path / "work" / "repo")
    assert invoke("check", path, "--trust-folder", tmp_path / "work").exit_code == 0
    assert (tmp_path / "work" / "repo" / "imported.marker").exists()


def test_trusting_another_folder_does_not_trust_this_one(tmp_path):
    path = cloned(tmp_path / "repo")
    (tmp_path / "mine").mkdir()
    result = invoke("check", path, "--trust-folder", tmp_path / "mine")
    assert NOTICE in result.output and not (tmp_path / "repo" / "imported.marker").exists()


def test_what_needs_no_import_is_still_checked(tmp_path):
    path = cloned(tmp_path / "repo", 'handler f = python(function="helpers:f", timeout=-1)\nmain g\n')
    result = invoke("check", path)
    assert result.exit_code == 1
    assert "timeout must be > 0" in result.output and "main names an unknown program or handler 'g'" in result.output
    assert not (tmp_path / "repo" / "imported.marker").exists()


def test_a_function_that_would_be_wrong_is_not_guessed_at_without_the_import(tmp_path):
    """Whether `helpers:missing` exists can be known only by importing: the notice, no error."""
    path = cloned(tmp_path / "repo", 'handler f = python(function="helpers:missing")\nmain f\n')
    untrusted = invoke("check", path)
    assert untrusted.exit_code == 0 and untrusted.output.count(NOTICE) == 1
    trusted = invoke("check", path, "--trust-folder", tmp_path / "repo")
    assert trusted.exit_code == 1 and "the module 'helpers' was imported, but it has no function 'missing'" in \
        trusted.output


def test_the_trust_list_file_and_the_environment_trust_folders(tmp_path, monkeypatch):
    path = cloned(tmp_path / "repo")
    listed = trust_list_file()
    listed.parent.mkdir(parents=True)
    listed.write_text(f"# my projects\n\nrelative/folder\n{tmp_path / 'repo'}\n", encoding="utf-8")
    result = invoke("check", path)
    assert result.exit_code == 0 and NOTICE not in result.output
    assert f"warning: {listed}:3: 'relative/folder' is not an absolute folder" in result.output
    assert (tmp_path / "repo" / "imported.marker").exists()
    other = cloned(tmp_path / "other")
    monkeypatch.setenv(TRUSTED_FOLDERS_ENV, os.pathsep.join(["", str(tmp_path / "other")]))
    assert NOTICE not in invoke("check", other).output and (tmp_path / "other" / "imported.marker").exists()


def test_a_fake_model_responder_of_an_untrusted_folder_is_not_imported(tmp_path):
    path = cloned(tmp_path / "repo", 'model default = "fake:helpers:f"\nhandler qa = prompt(text="Q: a\\nA: b")\n'
                                     'main qa\n')
    result = invoke("check", path)
    assert result.exit_code == 0 and result.output.count(NOTICE) == 1, result.output
    assert f"{path}:1:1: warning: fake model 'helpers:f'" in result.output
    assert not (tmp_path / "repo" / "imported.marker").exists()


def test_a_linked_program_file_of_an_untrusted_folder_is_checked_without_its_import(tmp_path):
    cloned(tmp_path / "repo")
    main_program = tmp_path / "repo" / "main.decomp"
    main_program.write_text('handler sub = program(file="p.decomp")\nmain sub\n', encoding="utf-8")
    result = invoke("check", main_program)
    assert result.exit_code == 0 and result.output.count(NOTICE) == 1, result.output
    assert not (tmp_path / "repo" / "imported.marker").exists()


def test_bundled_programs_and_registered_functions_need_no_trust(tmp_path):
    bundled = invoke("check", "decomp/letter_cat_symbolic")
    assert bundled.exit_code == 0 and NOTICE not in bundled.output, bundled.output
    (tmp_path / "p.decomp").write_text('handler c = python(function="capwords")\nmain c\n', encoding="utf-8")
    registered = invoke("check", tmp_path / "p.decomp")
    assert registered.exit_code == 0 and NOTICE not in registered.output, registered.output


def test_the_library_check_takes_the_policy_it_is_given(tmp_path):
    path = cloned(tmp_path / "repo")
    checked = check_file(path, trusted_folders=FolderTrust())
    assert [w.span.line for w in checked.warnings if NOTICE in w.message] == [2]
    assert checked.python_functions[0]["file"] is None and not (tmp_path / "repo" / "imported.marker").exists()
    check_file(path, trusted_folders=FolderTrust.of([tmp_path / "repo"]))
    assert (tmp_path / "repo" / "imported.marker").exists()


def test_folder_trust_reads_the_list_the_environment_and_the_flags(tmp_path):
    listed = tmp_path / "config" / "decomp" / "trusted-folders"
    listed.parent.mkdir(parents=True)
    listed.write_text(f"{tmp_path / 'a'}\n~/b\n", encoding="utf-8")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "home"),
           TRUSTED_FOLDERS_ENV: str(tmp_path / "c")}
    trust, problems = folder_trust([tmp_path / "d"], env)
    assert problems == []
    assert trust.trusts(tmp_path / "a" / "x.py") and trust.trusts(tmp_path / "c") and trust.trusts(tmp_path / "d")
    assert not trust.trusts(tmp_path / "e" / "x.py")
    assert trust_list_file({"HOME": "/h", "XDG_CONFIG_HOME": "relative"}) == Path("/h/.config/decomp/trusted-folders")


def test_a_symlink_in_a_trusted_folder_to_an_untrusted_module_is_not_imported(tmp_path):
    cloned(tmp_path / "repo")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "helpers.py").symlink_to(tmp_path / "repo" / "helpers.py")
    (mine / "p.decomp").write_text(PROGRAM, encoding="utf-8")
    with pytest.raises(DecompError):  # refused by the import policy (it leads out of the folder), unread
        check_file(mine / "p.decomp", trusted_folders=FolderTrust.of([mine]))
    assert not (tmp_path / "repo" / "imported.marker").exists()


def _decomp(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != TRUSTED_FOLDERS_ENV}
    return subprocess.run([sys.executable, "-m", "decomp", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_check_and_run_as_real_processes(tmp_path):
    """The command as a user types it: check imports nothing; run, consent to run, imports it."""
    path = cloned(tmp_path / "repo")
    checked = _decomp("check", str(path), cwd=tmp_path)
    assert checked.returncode == 0 and checked.stderr.count(NOTICE) == 1, checked.stderr
    assert not (tmp_path / "repo" / "imported.marker").exists()
    ran = _decomp("run", str(path), "-q", "hello", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "HELLO" in ran.stdout
    assert (tmp_path / "repo" / "imported.marker").read_text(encoding="utf-8") == "helpers.py ran"


# ---- symbolic links into trusted folders; every file an import runs
MARKING = '''\
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("ran", encoding="utf-8")


def f(query):
    return query
'''


def test_a_package_of_an_untrusted_folder_linking_its_init_into_a_trusted_one_is_not_imported(tmp_path):
    """The folder Python searches decides, not where its package's `__init__.py` leads: a link
    to a bundled program's `__init__.py` does not make the folder's `pkg/sub.py` trusted."""
    repo = tmp_path / "repo"
    (repo / "linkpkg").mkdir(parents=True)
    (repo / "linkpkg" / "__init__.py").symlink_to(BUNDLED_PROGRAMS / "math" / "__init__.py")
    (repo / "linkpkg" / "sub.py").write_text(MARKING, encoding="utf-8")
    (repo / "p.decomp").write_text('handler f = python(function="linkpkg.sub:f")\nmain f\n', encoding="utf-8")
    result = invoke("check", repo / "p.decomp")
    assert result.exit_code == 0 and result.output.count(NOTICE) == 1, result.output
    assert f"the folder {repo.resolve()} is not trusted" in result.output
    assert not (repo / "linkpkg" / "imported.marker").exists()


def test_a_subpackage_init_linking_out_of_a_trusted_folder_is_not_imported(tmp_path):
    """Every `__init__.py` on the way is checked, not only the top-level one and the module."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "evil.py").write_text(MARKING, encoding="utf-8")
    mine = tmp_path / "mine"
    (mine / "deep" / "inner").mkdir(parents=True)
    (mine / "deep" / "__init__.py").write_text("", encoding="utf-8")
    (mine / "deep" / "inner" / "__init__.py").symlink_to(repo / "evil.py")
    (mine / "deep" / "inner" / "mod.py").write_text("def f(query):\n    return query\n", encoding="utf-8")
    (mine / "p.decomp").write_text('handler f = python(function="deep.inner.mod:f")\nmain f\n', encoding="utf-8")
    checked = check_file(mine / "p.decomp", trusted_folders=FolderTrust.of([mine]))
    assert [w.message for w in checked.warnings if NOTICE in w.message], checked.warnings
    assert not (repo / "imported.marker").exists()


def test_a_package_that_shadows_a_module_of_the_same_name_is_checked_too(tmp_path):
    """Python imports `helpers/__init__.py` before `helpers.py`: both are looked at."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "evil.py").write_text(MARKING, encoding="utf-8")
    mine = tmp_path / "mine"
    (mine / "shadowed").mkdir(parents=True)
    (mine / "shadowed.py").write_text("def f(query):\n    return query\n", encoding="utf-8")
    (mine / "shadowed" / "__init__.py").symlink_to(repo / "evil.py")
    (mine / "p.decomp").write_text('handler f = python(function="shadowed:f")\nmain f\n', encoding="utf-8")
    checked = check_file(mine / "p.decomp", trusted_folders=FolderTrust.of([mine]))
    assert any(NOTICE in w.message for w in checked.warnings), checked.warnings
    assert not (repo / "imported.marker").exists()


# ---- --plugin on decomp check
PLUGIN_MARKING = '''\
from pathlib import Path
Path(__file__).with_name("plugin.marker").write_text(__file__, encoding="utf-8")
'''
PLAIN = 'handler w = regex(pattern="(\\\\w+)", all=true)\nmain w\n'
PLUGIN_NOTICE = "not imported: the folder"


def test_check_does_not_import_a_plugin_of_an_untrusted_folder_and_says_so_once(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "plug_untrusted.py").write_text(PLUGIN_MARKING, encoding="utf-8")
    (repo / "p.decomp").write_text(PLAIN, encoding="utf-8")
    monkeypatch.chdir(repo)  # neither the program's folder nor the working folder is trusted
    for spec in ("plug_untrusted", "plug_untrusted.py", str(repo / "plug_untrusted.py")):
        result = invoke("check", repo / "p.decomp", "--plugin", spec)
        assert result.exit_code == 0, result.output
        assert result.output.count(PLUGIN_NOTICE) == 1 and f"--trust-folder {repo.resolve()}" in result.output
        assert not (repo / "plugin.marker").exists()
    trusted = invoke("check", repo / "p.decomp", "--plugin", "plug_untrusted", "--trust-folder", repo)
    assert trusted.exit_code == 0 and PLUGIN_NOTICE not in trusted.output, trusted.output
    assert (repo / "plugin.marker").exists()  # decomp run imports it as before (test_cache_keys)


def test_check_prefers_the_import_path_plugin_to_the_untrusted_folder_one(tmp_path, monkeypatch):
    installed, repo = tmp_path / "site", tmp_path / "repo"
    for folder in (installed, repo):
        folder.mkdir()
        (folder / "plug_both.py").write_text(PLUGIN_MARKING, encoding="utf-8")
    (repo / "p.decomp").write_text(PLAIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(installed))
    result = invoke("check", repo / "p.decomp", "--plugin", "plug_both")
    assert result.exit_code == 0 and PLUGIN_NOTICE not in result.output, result.output
    assert (installed / "plugin.marker").exists() and not (repo / "plugin.marker").exists()
