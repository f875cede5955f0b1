"""Files stay inside the program: `import "..."` and `file=` options resolve in the program's
folder (or the bundled programs) unless the user allows another root (`--allow-root DIR`,
`DECOMP_ALLOW_ROOTS`); a refused path is named as written and never read, so its contents never
reach a diagnostic, a run directory or a model."""
import os
import subprocess
import sys

import pytest

from decomp import Session
from decomp.dsl.errors import DecompError
from decomp.handlers.sandbox.trust import Trust
from decomp.runtime.cli import PROGRAMS_DIR
from tests.helpers import invoke

SECRET = "sk-decomp-test-secret-4f9a1c"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def outside(tmp_path):
    """A folder beside the program's, holding a secret that must never be echoed."""
    folder = tmp_path / "outside"
    write(folder / "secret.txt", f"Q: what is the key?\nA: {SECRET}\n")
    write(folder / "lib.decomp", f"handler {SECRET.replace('-', '_')} = nonsense kind here(\n")
    return folder


def test_import_of_proc_self_environ_is_refused_and_never_echoed(tmp_path):
    write(tmp_path / "p" / "helpers_paths.py", "def echo(query):\n    return query\n")
    path = write(tmp_path / "p" / "m.decomp", 'import "/proc/self/environ"\n'
                                              'handler h = python(function="helpers_paths:echo")\nmain h\n')
    env = {**os.environ, "DECOMP_TEST_FAKE_KEY": SECRET}
    for args in (["check", str(path)], ["run", str(path), "-q", "x"]):
        proc = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", *args], capture_output=True, text=True,
                              timeout=120, env=env)
        assert proc.returncode == 1
        out = proc.stdout + proc.stderr
        assert SECRET not in out and "DECOMP_TEST_FAKE_KEY" not in out
        assert f"{path}:1:1: import '/proc/self/environ' is outside the program's folder" in out
        assert "--allow-root" in out and "helpers_paths" not in out  # the only problem


def test_prompt_file_outside_the_folder_is_refused_by_check_and_run(tmp_path):
    path = write(tmp_path / "p" / "m.decomp", 'handler q = prompt(file="/etc/passwd")\nmain q\n')
    for args in (["check", path], ["run", path, "-q", "x", "--model", "fake:none.json"]):
        result = invoke(*args)
        assert result.exit_code == 1
        assert "the path '/etc/passwd' is outside the program's folder" in result.output
        assert "root:" not in result.output
    with pytest.raises(DecompError, match="'/etc/passwd' is outside"):
        Session().load(path)


@pytest.mark.parametrize("line", [
    'handler q = prompt(file="../outside/secret.txt")\nmain q\n',
    'handler q = decomposer(file="../outside/secret.txt")\nmain q\n',
    'handler q = program(file="../outside/lib.decomp")\nmain q\n',
    'import "../outside/lib.decomp"\nhandler q = python(function="capwords")\nmain q\n',
])
def test_relative_paths_leaving_the_folder_are_refused_unread(tmp_path, outside, line):
    path = write(tmp_path / "p" / "m.decomp", line)
    result = invoke("check", path)
    assert result.exit_code == 1
    assert "../outside/" in result.output and "is outside the program's folder" in result.output
    assert SECRET not in result.output and SECRET.replace("-", "_") not in result.output


def test_a_symlink_that_leaves_the_folder_counts_as_leaving(tmp_path, outside):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "examples.txt").symlink_to(outside / "secret.txt")
    (folder / "lib.decomp").symlink_to(outside / "lib.decomp")
    path = write(folder / "m.decomp", 'import "lib.decomp"\nhandler q = prompt(file="examples.txt")\nmain q\n')
    result = invoke("check", path)
    assert result.exit_code == 1
    assert "import 'lib.decomp' is outside" in result.output and "the path 'examples.txt' is outside" in result.output
    assert SECRET not in result.output and SECRET.replace("-", "_") not in result.output


def test_subfolders_and_the_bundled_programs_are_inside(tmp_path):
    write(tmp_path / "p" / "prompts" / "qa.txt", 'Q: a?\nA: "b"\n')
    write(tmp_path / "p" / "lib" / "more.decomp", 'handler q = prompt(file="../prompts/qa.txt")\n')
    bundled = PROGRAMS_DIR / "decomp" / "reverse_symbolic.decomp"
    path = write(tmp_path / "p" / "m.decomp", f'import "lib/more.decomp"\nhandler r = program(file="{bundled}")\n'
                                              'main r\n')
    result = invoke("check", path)
    assert result.exit_code == 0, result.output
    ran = invoke("run", path, "-q", 'Reverse the sequence "a, b, c".')
    assert ran.exit_code == 0, ran.output
    assert ran.stdout.strip() == "c, b, a"


def test_allow_root_option_and_environment_variable(tmp_path, outside, monkeypatch):
    path = write(tmp_path / "p" / "m.decomp", 'handler q = prompt(file="../outside/secret.txt")\nmain q\n')
    assert invoke("check", path).exit_code == 1
    result = invoke("check", path, "--allow-root", outside)
    assert result.exit_code == 0, result.output
    assert invoke("check", path).exit_code == 1  # for that command only
    monkeypatch.setenv("DECOMP_ALLOW_ROOTS", os.pathsep.join([str(tmp_path / "nothing"), str(outside)]))
    assert invoke("check", path).exit_code == 0
    monkeypatch.delenv("DECOMP_ALLOW_ROOTS")
    assert Session(trust=Trust.of(roots=[outside])).load(path).handlers["q"] is not None
    with pytest.raises(DecompError):  # another session's trust is its own
        Session().load(path)


def test_a_refused_import_adds_no_warning_from_the_file(tmp_path, outside):
    write(outside / "warned.decomp", f'handler h = python(function="capwords")\n'
                                     f'program p(question) {{\n    QS: [h] #question # {SECRET}\n}}\n')
    path = write(tmp_path / "p" / "m.decomp", 'import "../outside/warned.decomp"\n'
                                              'handler q = python(function="capwords")\nmain q\n')
    result = invoke("run", path, "-q", "x")
    assert result.exit_code == 1
    assert SECRET not in result.output


def test_the_run_directory_never_copies_a_refused_file(tmp_path, outside):
    path = write(tmp_path / "p" / "m.decomp", 'handler q = prompt(file="../outside/secret.txt")\nmain q\n')
    data = write(tmp_path / "rows.jsonl", '{"id": "1", "question": "x"}\n')
    result = invoke("run", path, "--input", data, "--run-dir", tmp_path / "run", "--model", "fake:none.json")
    assert result.exit_code == 1
    assert SECRET not in result.output
    for file in (tmp_path / "run").rglob("*") if (tmp_path / "run").exists() else ():
        assert not file.is_file() or SECRET.encode() not in file.read_bytes()


def test_any_kind_resolving_a_path_is_confined(tmp_path):
    path = write(tmp_path / "p" / "m.decomp", 'handler r = retrieve(index="/etc")\nmain r\n')
    result = invoke("check", path)
    assert result.exit_code == 1
    assert f"{path}:1:28: the path '/etc' is outside the program's folder" in result.output


def test_a_fake_model_file_outside_the_folder_is_refused_and_never_read(tmp_path, outside):
    fake = write(outside / "answers.json", f'{{"default": "{SECRET}"}}')
    path = write(tmp_path / "p" / "m.decomp", f'model default = "fake:{fake}"\nhandler q = prompt(text="Q: x\\nA: y\\n")\n'
                                              'main q\n')
    for args in (["check", path], ["run", path, "-q", "x"]):
        result = invoke(*args)
        assert result.exit_code == 1, result.output
        assert f"the fake model file '{fake}' is outside the program's folder" in result.output
        assert SECRET not in result.output
    result = invoke("run", path, "-q", "x", "--allow-root", outside)
    assert result.exit_code == 0 and SECRET in result.output


def test_a_fake_model_file_beside_the_program_is_read(tmp_path):
    write(tmp_path / "p" / "answers.json", '{"default": "yes"}')
    path = write(tmp_path / "p" / "m.decomp", 'model default = "fake:answers.json"\n'
                                              'handler q = prompt(text="Q: x\\nA: y\\n")\nmain q\n')
    result = invoke("run", path, "-q", "x")
    assert result.exit_code == 0 and "yes" in result.output, result.output
