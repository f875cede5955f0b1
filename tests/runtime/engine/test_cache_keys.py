"""Cache keys that cannot go stale: each way an answer's key once missed what decided it.

Every test runs a program twice on one real `StepCache` with an edit in between, and the second
run must answer what a fresh process would. Also here: `.decomp` files reaching Python modules
in their own folder, `--plugin`, and a Python handler's traceback in the trace.
"""
import json
import sys
import textwrap
from pathlib import Path

import pytest

from decomp import FakeModel, Session
from decomp.handlers.kinds.python import function_sources
from decomp.handlers.sandbox.imports import forget_folder
from decomp.handlers.plugins import load as load_plugins
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.loader import load_plugin
from decomp.runtime.models.base import ModelSettings
from decomp.runtime.models.local import LocalModel
from tests.helpers import invoke

ONE_STEP = '''{decls}
program p(question) {{
    QS: [h] #question
}}
main p
'''


@pytest.fixture(autouse=True)
def isolated_imports(monkeypatch, tmp_path):
    """Kinds and functions the plugins register, and the modules the tests import from their
    folders, are gone afterwards."""
    monkeypatch.setattr(load_plugins(), "kinds", dict(load_plugins().kinds))
    monkeypatch.setattr(load_plugins(), "functions", dict(load_plugins().functions))
    yield
    forget_folder(tmp_path.resolve())


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def program(folder: Path, decls: str, name: str = "p.decomp") -> Path:
    return write(folder / name, ONE_STEP.format(decls=textwrap.dedent(decls).strip()))


def run_once(path: Path, cache: Path, question: str = "a", model=None):
    session = Session(cache=StepCache(cache), model=model, default_model=None)
    result = session.run(session.load(path), {"question": question})
    return result


def hits(result) -> int:
    return result.usage.cache_hits


# ------------------------------------------------------------------ python handlers
def test_module_level_data_edit_misses_the_cache(tmp_path, monkeypatch):
    """The function's own code is unchanged; only a module-level table is edited (same size,
    within the same second: a stale .pyc must not bring the old table back)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    write(tmp_path / "helpers.py", '''
        TABLE = {"a": "one"}
        def f(query):
            return TABLE[query]
    ''')
    path = program(tmp_path, 'handler h = python(function="helpers:f")')
    cache = tmp_path / "cache.sqlite"
    first = run_once(path, cache)
    assert first.ok, first.error
    assert first.answer == "one"
    assert hits(run_once(path, cache)) == 1

    write(tmp_path / "helpers.py", '''
        TABLE = {"a": "uno"}
        def f(query):
            return TABLE[query]
    ''')
    second = run_once(path, cache)
    assert second.answer == "uno", "the edited module's answer, not the cached one"
    assert hits(second) == 0
    third = run_once(path, cache)
    assert third.answer == "uno" and hits(third) == 1


def test_edit_of_an_imported_project_module_misses_the_cache(tmp_path):
    write(tmp_path / "words.py", 'WORDS = {"a": "alpha"}\n')
    write(tmp_path / "helpers.py", '''
        from words import WORDS
        def f(query):
            return WORDS[query]
    ''')
    path = program(tmp_path, 'handler h = python(function="helpers:f")')
    cache = tmp_path / "cache.sqlite"
    assert run_once(path, cache).answer == "alpha"
    assert hits(run_once(path, cache)) == 1

    write(tmp_path / "words.py", 'WORDS = {"a": "ALPHA"}\n')
    second = run_once(path, cache)
    assert second.answer == "ALPHA" and hits(second) == 0


def test_a_package_in_the_program_folder_and_its_relative_imports(tmp_path):
    (tmp_path / "tools").mkdir()
    write(tmp_path / "tools" / "__init__.py", "")
    write(tmp_path / "tools" / "data.py", 'SUFFIX = "!"\n')
    write(tmp_path / "tools" / "text.py", '''
        from .data import SUFFIX
        def shout(query):
            return query.upper() + SUFFIX
    ''')
    path = program(tmp_path, 'handler h = python(function="tools.text:shout")')
    cache = tmp_path / "cache.sqlite"
    assert run_once(path, cache).answer == "A!"
    write(tmp_path / "tools" / "data.py", 'SUFFIX = "?"\n')
    assert run_once(path, cache).answer == "A?"


def test_function_sources_name_the_module_and_its_project_imports(tmp_path):
    write(tmp_path / "words.py", "WORDS = {}\n")
    write(tmp_path / "helpers_src.py", '''
        import json
        from words import WORDS
        def f(query):
            return json.dumps(WORDS)
    ''')
    load_plugin(str(tmp_path / "helpers_src.py"))
    import helpers_src

    sources = function_sources(helpers_src.f, tmp_path)
    assert [s.module for s in sources] == ["helpers_src", "words"]  # not json: installed code
    assert all(len(s.sha256) == 64 for s in sources)


def test_two_programs_with_helpers_of_the_same_name(tmp_path):
    paths = {}
    for name in ("x", "y"):
        folder = tmp_path / name
        folder.mkdir()
        write(folder / "helpers.py", f'def f(query):\n    return "{name}"\n')
        paths[name] = program(folder, 'handler h = python(function="helpers:f")')
    cache = tmp_path / "cache.sqlite"
    assert run_once(paths["x"], cache).answer == "x"
    assert run_once(paths["y"], cache).answer == "y"
    assert run_once(paths["x"], cache, question="b").answer == "x"


def test_a_registered_function_of_an_edited_plugin_module(tmp_path):
    plugin = write(tmp_path / "greet_plugin.py", '''
        from decomp import python_handler
        GREETING = "hello "
        @python_handler("test_cache_keys_greet")
        def greet(query):
            return GREETING + query
    ''')
    load_plugin(str(plugin))
    path = program(tmp_path, 'handler h = python(function="test_cache_keys_greet")')
    cache = tmp_path / "cache.sqlite"
    assert run_once(path, cache).answer == "hello a"
    write(plugin, plugin.read_text().replace("hello ", "howdy "))
    second = run_once(path, cache)
    assert second.answer == "howdy a" and hits(second) == 0


def test_helpers_next_to_the_program_are_files_of_the_program(tmp_path):
    write(tmp_path / "words.py", "WORDS = {}\n")
    write(tmp_path / "helpers.py", "from words import WORDS\ndef f(query):\n    return query\n")
    path = program(tmp_path, 'handler h = python(function="helpers:f")')
    loaded = Session(default_model=None).load(path)
    assert {tmp_path / "helpers.py", tmp_path / "words.py"} <= {Path(f).resolve() for f in loaded.files}


# ------------------------------------------------------------------ models
def test_fake_model_file_edit_misses_the_cache(tmp_path):
    answers = write(tmp_path / "answers.json", json.dumps({"mapping": {"a": "first"}}))
    path = program(tmp_path, '''
        model default = "fake:answers.json"
        handler h = prompt(text="Q: 1\\nA: 2")
    ''')
    cache = tmp_path / "cache.sqlite"
    assert run_once(path, cache).answer == "first"
    assert hits(run_once(path, cache)) == 1
    write(answers, json.dumps({"mapping": {"a": "other"}}))
    second = run_once(path, cache)
    assert second.answer == "other" and hits(second) == 0


def test_in_memory_fake_models_with_other_answers_miss(tmp_path):
    path = program(tmp_path, 'handler h = prompt(text="Q: 1\\nA: 2")')
    cache = tmp_path / "cache.sqlite"
    assert run_once(path, cache, model=FakeModel(mapping={"a": "first"})).answer == "first"
    again = run_once(path, cache, model=FakeModel(mapping={"a": "first"}))
    assert again.answer == "first" and hits(again) == 1
    other = run_once(path, cache, model=FakeModel(mapping={"a": "second"}))
    assert other.answer == "second" and hits(other) == 0


def test_cache_identity_of_a_fake_model():
    assert FakeModel(answers=["x"]).cache_identity() == FakeModel(answers=["x"]).cache_identity()
    assert FakeModel(answers=["x"]).cache_identity() != FakeModel(answers=["y"]).cache_identity()
    assert FakeModel(default=lambda r: "a").cache_identity() != FakeModel(default=lambda r: "b").cache_identity()
    assert FakeModel().cache_identity().startswith("fake#sha256:")


def test_local_model_identity_follows_its_weights_file(tmp_path):
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF" + b"\0" * 100)
    model = LocalModel(str(weights), ModelSettings())
    try:
        first = model.cache_identity()
        assert first.startswith(f"local:{weights}@") and first == model.cache_identity()
        weights.write_bytes(b"GGUF" + b"\1" * 200)
        assert model.cache_identity() != first
    finally:
        model.unload()


def test_local_model_identity_holds_the_prompt_batch_and_not_prefix_reuse(tmp_path):
    """llama.cpp's CPU kernels give other logits in batches of another size; prefix reuse gives
    the same ones (tests/runtime/models/test_local_prefix_reuse.py)."""
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF" + b"\0" * 100)
    models = [LocalModel(str(weights), ModelSettings(options=options))
              for options in ((), (("reuse_prefix", False),), (("n_batch", 64),))]
    try:
        default, fresh, batch64 = (model.cache_identity() for model in models)
        assert default == fresh != batch64 and batch64.endswith(";n_batch=64")
    finally:
        for model in models:
            model.unload()


# ------------------------------------------------------------------ prompt, template, score
def echo_model() -> FakeModel:
    """Answers the first line of the prompt it was sent: an edited prompt shows."""
    return FakeModel(default=lambda request: json.dumps(request.prompt.splitlines()[0]))


def test_prompt_file_edit_misses_the_cache(tmp_path):
    prompt = write(tmp_path / "examples.txt", "Q: one\nA: 1\n")
    path = program(tmp_path, 'handler h = prompt(file="examples.txt")')
    cache = tmp_path / "cache.sqlite"
    assert run_once(path, cache, model=echo_model()).answer == "Q: one"
    assert hits(run_once(path, cache, model=echo_model())) == 1
    write(prompt, "Q: two\nA: 2\n")
    second = run_once(path, cache, model=echo_model())
    assert second.answer == "Q: two" and hits(second) == 0


def test_template_file_edit_misses_the_cache(tmp_path):
    template = write(tmp_path / "ask.j2", "Say {{ query }}\n")
    path = program(tmp_path, 'handler h = prompt(file="ask.j2")')
    cache = tmp_path / "cache.sqlite"
    assert run_once(path, cache, model=echo_model()).answer == "Say a"
    write(template, "Tell {{ query }}\n")
    second = run_once(path, cache, model=echo_model())
    assert second.answer == "Tell a" and hits(second) == 0


def test_score_prefix_is_in_the_key(tmp_path):
    def scorer():
        return FakeModel(scorer=lambda prompt, continuation: -float(len(prompt)))

    cache = tmp_path / "cache.sqlite"
    short = program(tmp_path, 'handler h = score(prefix="ab")')
    assert run_once(short, cache, model=scorer()).answer == -2.0
    assert hits(run_once(short, cache, model=scorer())) == 1
    longer = program(tmp_path, 'handler h = score(prefix="abcd")')
    second = run_once(longer, cache, model=scorer())
    assert second.answer == -4.0 and hits(second) == 0


# ------------------------------------------------------------------ a Python handler's traceback
def test_the_trace_holds_the_users_traceback(tmp_path):
    write(tmp_path / "helpers.py", '''
        def parse(text):
            return int(text)

        def f(query):
            return parse(query) + 1
    ''')
    path = program(tmp_path, 'handler h = python(function="helpers:f")')
    result = run_once(path, tmp_path / "cache.sqlite", question="not a number")
    assert not result.ok and "ValueError" in result.error
    failed = [n for n in result.trace.walk() if n.kind == "call" and n.details]
    assert len(failed) == 1
    details = failed[0].details
    helpers = str((tmp_path / "helpers.py").resolve())
    assert f'File "{helpers}", line 5, in f' in details
    assert f'File "{helpers}", line 2, in parse' in details
    assert "return int(text)" in details and details.rstrip().endswith("'not a number'")
    assert "handlers/python.py" not in details and "engine" not in details
    assert failed[0].to_dict()["details"] == details


# ------------------------------------------------------------------ through the CLI
def test_cli_reaches_helpers_next_to_the_program_without_pythonpath(tmp_path):
    write(tmp_path / "helpers_cli.py", "def f(query):\n    return query[::-1]\n")
    path = program(tmp_path, 'handler h = python(function="helpers_cli:f")')
    result = invoke("run", path, "-q", "abc", "--cache", "off")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "cba"


SHOUT = '''
from decomp import Handler, Options, handler_kind

class ShoutOptions(Options):
    suffix: str = "!"

@handler_kind("shout")
class Shout(Handler):
    Options = ShoutOptions
    async def run(self, call):
        return call.query.upper() + self.options.suffix
'''


def test_cli_plugin_registers_the_readme_shout_kind(tmp_path, monkeypatch):
    write(tmp_path / "shout.py", SHOUT)
    path = program(tmp_path, 'handler h = shout(suffix="!!")')
    for plugin in (tmp_path / "shout.py", "shout"):  # a path; a module name found in the program's folder
        result = invoke("run", path, "-q", "hi", "--plugin", plugin, "--cache", "off")
        assert result.exit_code == 0, result.output
        assert result.output.strip() == "HI!!"
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "p.decomp", "-q", "hi", "--plugin", "shout.py", "--cache", "off")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "HI!!"


def test_check_knows_the_kinds_a_plugin_registers(tmp_path):
    write(tmp_path / "whisper_kind.py", SHOUT.replace('"shout"', '"whisper"').replace("Shout", "Whisper"))
    path = program(tmp_path, 'handler h = whisper(suffix="?")')
    unknown = invoke("check", path)
    assert unknown.exit_code == 1 and "unknown handler kind 'whisper'" in unknown.output
    assert "--plugin MODULE" in unknown.output and "entry-point group" in unknown.output  # how to get it
    known = invoke("check", path, "--plugin", "whisper_kind", "--trust-folder", tmp_path)  # a check imports it from a trusted folder only
    assert known.exit_code == 0, known.output
    assert known.output.strip().endswith(": ok")


def test_cli_plugin_that_fails_names_its_line(tmp_path):
    write(tmp_path / "broken_plugin.py", "X = 1\nraise RuntimeError('no')\n")
    path = program(tmp_path, 'handler h = regex(pattern="a")')
    result = invoke("run", path, "-q", "a", "--plugin", tmp_path / "broken_plugin.py")
    assert result.exit_code == 1
    assert "cannot load the plugin" in result.output and "RuntimeError: no" in result.output
    assert "broken_plugin.py\", line 2" in result.output
    missing = invoke("run", path, "-q", "a", "--plugin", tmp_path / "nope.py")
    assert missing.exit_code == 1 and "plugin file not found" in missing.output


def test_trace_diff_of_a_cached_run_after_an_edit_shows_the_change(tmp_path):
    folder = tmp_path / "prog"
    folder.mkdir()
    write(folder / "helpers_diff.py", 'LABEL = "old"\ndef f(query):\n    return LABEL + " " + query\n')
    path = program(folder, 'handler h = python(function="helpers_diff:f")')
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": f"q{i}"}) + "\n" for i in range(2)))
    cache = tmp_path / "cache"

    def run_into(name, *extra):
        result = invoke("run", path, "--input", data, "--run-dir", tmp_path / name, "--cache-dir", cache, *extra)
        assert result.exit_code == 0, result.output
        return tmp_path / name

    before = run_into("before")
    write(folder / "helpers_diff.py", 'LABEL = "new"\ndef f(query):\n    return LABEL + " " + query\n')
    cached = run_into("cached")
    fresh = run_into("fresh", "--cache", "off")

    diff = invoke("trace", "diff", before, cached, "--json")
    assert diff.exit_code == 0, diff.output
    lines = [json.loads(line) for line in diff.output.splitlines() if line.strip()]
    assert len(lines) == 2
    assert "old q0" in diff.output and "new q0" in diff.output
    same = invoke("trace", "diff", cached, fresh)
    assert same.exit_code == 0 and "no differences" in same.output.lower()
