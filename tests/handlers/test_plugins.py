"""The one plugin table (`decomp.plugins` at the top of the package, loaded by
`decomp.handlers.plugins`): built-ins and third parties registered the same way; a broken or
clashing plugin is named and refused, and the rest goes on; a session imports no command
module, and the command line only the ones it needs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import decomp.plugins
from decomp.handlers import hooks, plugins
from decomp.handlers.base import Handler
from decomp.handlers.registry import Registry, RegistryConflict
from decomp.plugins import builtin_plugins, command_plugins
from tests.handlers.plugin_helpers import DECOMP, plugin_package

REPO = Path(__file__).resolve().parents[2]
LETTER_CAT = REPO / "programs" / "decomp" / "letter_cat.decomp"
COMMAND_MODULES = ["decomp.editors.lsp.command", "decomp.learning.optimize.command", "decomp.learning.tuning.command",
                   "decomp.programs.tasklama.taskgraph.commands"]


def test_every_builtin_is_registered_by_a_builtin_plugin():
    reg = plugins.builtin_registry()
    assert {"prompt", "decomposer", "program", "python", "regex", "calculator", "score", "retrieve",
            "environment", "executor", "textcraft_executor", "textcraft_planner"} <= set(reg.kinds)
    assert {"local", "openai", "fake", "scripted"} <= set(reg.model_backends)
    assert "textcraft" in reg.environments
    owners = {owner for owner in reg.owners.values()}
    assert owners >= {"decomp.handlers.kinds", "decomp.programs.adapt.textcraft.plugin", "decomp.runtime.models.local"}
    assert owners <= {module.__name__ for module in builtin_plugins()} | {p.name for p in plugins.plugins()}


def test_the_table_at_the_top_is_handed_down_to_the_hooks():
    assert hooks.table() is decomp.plugins.TABLE
    names = [module.__name__ for module in builtin_plugins()]
    assert names[0] == "decomp.handlers.kinds" and "decomp.runtime.testing.fake" in names
    assert sorted(module.__name__ for module in command_plugins()) == COMMAND_MODULES
    assert not set(names) & set(COMMAND_MODULES)
    assert not hasattr(plugins, "fail")  # the command line's (decomp.runtime.cli.fail)


def _loaded_after(code: str, cwd: Path, env: dict | None = None) -> dict:
    """What `code` (which sets `result`) leaves, with the command modules and the CLI it imported."""
    code = textwrap.dedent(code) + textwrap.dedent(f'''
        import json, sys
        result["imported"] = sorted(m for m in sys.modules if m in {COMMAND_MODULES + ["decomp.runtime.cli"]!r})
        print(json.dumps(result))
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_session_imports_no_command_module(tmp_path):
    found = _loaded_after(f'''
        import decomp
        from decomp.runtime.engine.session import Session
        session = Session(python_workers=False)
        session.load({str(LETTER_CAT)!r})
        decomp.load({str(LETTER_CAT)!r})
        result = {{"kinds": "decomposer" in session.registry.kinds, "fake": "fake" in session.registry.model_backends}}
    ''', tmp_path)
    assert found == {"kinds": True, "fake": True, "imported": []}


def test_the_command_line_imports_a_command_module_only_when_it_needs_one(tmp_path):
    found = _loaded_after('''
        import sys
        from click.testing import CliRunner
        from decomp.runtime.cli import main
        programs = CliRunner().invoke(main, ["programs"])
        before = sorted(m for m in sys.modules if m.endswith((".command", ".commands")))
        steps = CliRunner().invoke(main, ["eval", "steps", "--help"])
        result = {"programs": programs.exit_code, "before": before, "steps": [steps.exit_code, "--gold" in steps.output]}
    ''', tmp_path)
    assert found["programs"] == 0 and found["before"] == [] and found["steps"] == [0, True]
    assert found["imported"] == sorted(COMMAND_MODULES + ["decomp.runtime.cli"])


def test_a_taken_name_is_refused_naming_both_owners():
    reg = Registry()

    class A(Handler):
        kind = "same"

    class B(Handler):
        kind = "same"

    reg.add_kind(A, owner="first")
    with pytest.raises(RegistryConflict, match="'same' is already registered by 'first'; 'second' may not"):
        reg.add_kind(B, owner="second")
    assert reg.kinds["same"] is A
    reg.add_kind(A, owner="first")  # the same registration again is no conflict


def _plugin_module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(textwrap.dedent(source), module.__dict__)
    return module


def test_a_plugin_taking_a_builtin_kind_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(plugins, "_loaded", None)
    reg = plugins.builtin_registry()
    module = _plugin_module("usurper", '''
        from decomp import Handler, hookimpl
        class Prompt(Handler):
            kind = "prompt"
        @hookimpl
        def register_kinds(register):
            register(Prompt)
    ''')
    found = plugins.plugin_set()
    plugins._add_module(found, "usurper", "test", lambda: module)
    fresh = Registry()
    plugins.load(fresh)
    assert fresh.kinds["prompt"] is reg.kinds["prompt"]          # the built-in stands
    assert any("plugin 'usurper'" in p and "'prompt' is already registered by 'decomp.handlers.kinds'" in p
               for p in plugins.problems())


def test_a_hook_that_raises_is_named_and_the_rest_registers(monkeypatch):
    monkeypatch.setattr(plugins, "_loaded", None)
    module = _plugin_module("clumsy", '''
        from decomp import hookimpl
        @hookimpl
        def register_models(register):
            raise RuntimeError("oops")
    ''')
    plugins._add_module(plugins.plugin_set(), "clumsy", "test", lambda: module)
    reg = plugins.load(Registry())
    assert "prompt" in reg.kinds and "fake" in reg.model_backends
    assert "plugin 'clumsy': register_models failed: RuntimeError: oops" in plugins.problems()


# ---- a third-party package, installed, used through the CLI
PLUGIN = '''
"""A third-party decomp plugin: a kind, a model scheme, an environment and a command."""
import click
from decomp import Completion, Environment, Handler, Model, StepResult, hookimpl


class Shout(Handler):
    kind = "shout"

    async def run(self, call):
        return call.query.upper() + "!"


class Echo(Model):
    def __init__(self, name, settings=None):
        self.name = f"echo:{name}"
        self.endpoint = "echo"

    async def complete(self, request):
        return Completion((request.prompt.splitlines()[-1][::-1],))


class Counter(Environment):
    def __init__(self, fields):
        self.count = 0

    def start(self):
        return "count 0"

    def step(self, action):
        self.count += int(action)
        return StepResult(f"count {self.count}")


@hookimpl
def register_kinds(register):
    register(Shout)


@hookimpl
def register_models(register):
    register("echo", Echo)


@hookimpl
def register_environments(register):
    register("counter", Counter)


@hookimpl
def register_commands(cli):
    @cli.command()
    @click.argument("name")
    def hello(name):
        """Greet NAME."""
        click.echo(f"hello, {name}")
'''

PROGRAM = '''
handler loud = shout
handler ask = prompt(text="Q: {{ query }}", max_tokens=16)
handler tally = environment(name="counter")
program main(question) {
    QS: [loud] #question
    QS: [ask] #1
    QS: [tally] 2
    QS: [tally] 3
}
main main
'''


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Three packages pip-installed into one folder: a working plugin, one that fails to import,
    one that takes the built-in kind name `regex`."""
    root = tmp_path_factory.mktemp("plugins")
    target = root / "site"
    packages = [
        plugin_package(root, "decomp-shout", "decomp_shout", PLUGIN),
        plugin_package(root, "decomp-broken", "decomp_broken", "import no_such_module_anywhere\n"),
        plugin_package(root, "decomp-usurper", "decomp_usurper", textwrap.dedent('''
            from decomp import Handler, hookimpl
            class Regex(Handler):
                kind = "regex"
            @hookimpl
            def register_kinds(register):
                register(Regex)
        ''')),
    ]
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--target", str(target), *map(str, packages)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root, target


def _decomp(installed, *args):
    root, target = installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([str(DECOMP), *args], capture_output=True, text=True, cwd=root, env=env, timeout=120)


@pytest.mark.slow
def test_an_installed_plugin_adds_a_kind_a_model_an_environment_and_a_command(installed):
    hello = _decomp(installed, "hello", "world")
    assert hello.returncode == 0 and hello.stdout == "hello, world\n"
    program = installed[0] / "uses.decomp"
    program.write_text(PROGRAM)
    run = _decomp(installed, "run", str(program), "-q", "abc", "--model", "echo:x", "--cache", "off")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "count 5"
    trace = _decomp(installed, "run", str(program), "-q", "abc", "--model", "echo:x", "--cache", "off", "--trace")
    assert "ABC!" in trace.stderr and "!CBA" in trace.stderr  # the tree goes to stderr
    listed = _decomp(installed, "plugins")
    assert ("decomp_shout (entry point decomp_shout): commands: hello; kinds: shout; model backends: echo; "
            "environments: counter") in listed.stdout


@pytest.mark.slow
def test_broken_and_clashing_plugins_are_named_and_the_cli_still_works(installed):
    proc = _decomp(installed, "programs")
    assert proc.returncode == 0 and "decomp/letter_cat" in proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert any(line.startswith("warning: plugin 'decomp_broken'") and "ModuleNotFoundError" in line for line in lines)
    assert any(line.startswith("warning: plugin 'decomp_usurper'")
               and "'regex' is already registered by 'decomp.handlers.kinds'" in line for line in lines)
    check = _decomp(installed, "check", "--json", str(Path(__file__).parents[2] / "programs/decomp/letter_cat.decomp"))
    assert check.returncode == 0, check.stderr
    json.loads(check.stdout)


def test_a_plugin_file_taking_a_builtin_name_is_refused_in_one_line(tmp_path):
    (tmp_path / "usurp.py").write_text('from decomp import Handler, handler_kind\n'
                                       '@handler_kind("prompt")\nclass P(Handler):\n    pass\n')
    from click.testing import CliRunner
    from decomp.runtime.cli import main

    result = CliRunner().invoke(main, ["check", "--plugin", str(tmp_path / "usurp.py"), "--trust-folder", str(tmp_path),
                                       str(Path(__file__).parents[2] / "programs/decomp/letter_cat.decomp")])
    assert result.exit_code == 1
    assert "plugin" in result.output and "refused: the handler kind 'prompt' is already registered by " \
        "'decomp.handlers.kinds'" in result.output
    assert "Traceback" not in result.output
    assert plugins.load().kinds["prompt"].__module__ == "decomp.handlers.kinds.prompt"


# ---- a package on the import path with entry points (no pip: its metadata written by hand)
MODERN = '''
import click
from decomp import Handler, hookimpl
from decomp.dsl.errors import DecompError


class Modern(Handler):
    kind = "modern"


@hookimpl
def register_kinds(register):
    register(Modern)


@hookimpl
def register_commands(cli):
    @cli.command()
    def boom():
        """Fail the way a plugin's command does."""
        raise DecompError("the boom went off")
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder for PYTHONPATH with a distribution naming a module in the group `decomp` and, in the
    two groups of before (`decomp.handlers`, `decomp.environments`), a kind and an environment."""
    site = tmp_path_factory.mktemp("site")
    (site / "modern_plugin.py").write_text(MODERN)
    (site / "legacy_plugin.py").write_text('from decomp import Handler\n\nclass Legacy(Handler):\n    kind = "legacy"\n\n'
                                           'def environment(fields):\n    return None\n')
    info = site / "decomp_mixed-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: decomp-mixed\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[decomp]\nmodern_plugin = modern_plugin\n\n"
                                           "[decomp.handlers]\nlegacy = legacy_plugin:Legacy\n\n"
                                           "[decomp.environments]\nold_env = legacy_plugin:environment\n")
    return site


def _with(site: Path) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_only_the_decomp_group_is_read(site, tmp_path):
    found = _loaded_after('''
        from decomp.handlers.plugins import builtin_registry, problems
        registry = builtin_registry()
        result = {"modern": "modern" in registry.kinds, "legacy": "legacy" in registry.kinds,
                  "old_env": "old_env" in registry.environments, "problems": problems()}
    ''', tmp_path, _with(site))
    assert found == {"modern": True, "legacy": False, "old_env": False, "problems": [], "imported": []}


def test_a_plugins_command_ends_on_a_decomp_error_in_its_words(site, tmp_path):
    done = subprocess.run([str(DECOMP), "boom"], capture_output=True, text=True, cwd=tmp_path, env=_with(site),
                          timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "error: the boom went off\n")
