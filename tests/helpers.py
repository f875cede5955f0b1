"""What many test files share that is not a fixture: the papers' data the tests read
(tests/fixtures/), a registry of plain functions, the programs the counters' and trace tests run,
`untimed`, the OpenAI environment's names, headless Chromium's options, and `invoke` (the
`decomp` command line in-process) with `last_json` and `MODEL_ENV`. Test files import it as
`from tests.helpers import ...`; the fixtures built on it are in tests/conftest.py."""
import ast
import inspect
import json
from pathlib import Path
from typing import Any, Callable

from decomp import Handler, Options
from decomp.handlers.plugins import builtin_registry
from decomp.handlers.registry import Registry, handler_kind

REPO = Path(__file__).resolve().parents[1]
# Small cuts of the papers' data, with their licences: every test that needs real data reads these.
FIXTURES = REPO / "tests" / "fixtures"


def invoke(*args, env: dict[str, str] | None = None, check: bool = False, catch_exceptions: bool = True):
    """`decomp ARGS...` run in-process by click's CliRunner (each argument passed as `str`, so
    paths may be given as they are), with `env` added to the environment; its `Result`. With
    `check`, the command must exit 0 (the test fails showing its output otherwise); without
    `catch_exceptions`, an exception the command lets out is raised in the test."""
    from click.testing import CliRunner

    from decomp.runtime.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=catch_exceptions)
    if check:
        assert result.exit_code == 0, result.output
    return result


def last_json(result) -> Any:
    """The last line a command printed on stdout (a click `Result`, or the text itself), read as
    JSON: the summary line of `decomp run`, `eval`, `dry-run`..."""
    text = result if isinstance(result, str) else result.stdout
    return json.loads(text.strip().splitlines()[-1])


#: What a `decomp run` against the mock OpenAI server on 127.0.0.1 needs in its environment: a key
#: (never checked) and no proxy in the way.
MODEL_ENV = {"OPENAI_API_KEY": "dummy", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


class FnOptions(Options):
    fn: str


def registry_with(functions: dict[str, Callable[[str], Any]], calls: list | None = None) -> Registry:
    """The built-in kinds plus `fn(fn="name")`, answering `functions[name](query)` (awaited when
    it returns a coroutine) and logging (handler name, query) into `calls`."""
    reg = builtin_registry()

    @handler_kind("fn", registry=reg)
    class Fn(Handler):
        Options = FnOptions
        contained = False  # its functions share asyncio events between calls: it runs on the run's loop

        async def run(self, call):
            if calls is not None:
                calls.append((self.name, call.query))
            out = functions[self.options.fn](call.query)
            return await out if inspect.isawaitable(out) else out

    return reg


# ---- TextCraft (tests/fixtures/textcraft/: ADaPT's 40 dev tasks, MIT)
#: A program of three model calls in a row (the counters' and progress bar's tests).
THREE_CALLS = '''
handler ask = prompt(text="Q: x?\\nA: y\\n")
program p(question) {
    QS: [ask] #question
    QS: [ask] again #1
    QS: [ask] and again #2
}
main p
'''


TEXTCRAFT_DEV = FIXTURES / "textcraft" / "tasks_dev.jsonl"


def load_dev_rows() -> list[dict]:
    """The 40 TextCraft dev tasks."""
    return [json.loads(line) for line in TEXTCRAFT_DEV.read_text(encoding="utf-8").splitlines() if line.strip()]


#: A program that recurses `n` levels deep (three steps a level, so a trace three times as deep),
#: for tests of traces of any depth; its handlers `dec` and `inc` are `fn` functions.
DEEP_RECURSION = '''
handler dec = fn(fn="dec")
handler inc = fn(fn="inc")
program down(n) with max_depth = 5000 {
    if #n == 0 {
        QS: [inc] -1
    } else {
        QS: [dec] #n
        QS: [down] #2
        QS: [inc] #3
    }
}
main down
'''


_TIMED = ("seconds", "started", "mean_ms", "wall_s", "mean_s", "p50_s", "p95_s", "queued", "queue_seconds",
          "service_mean_ms", "queue_mean_ms", "service_mean_s", "queue_mean_s")


def untimed(value):
    """`value` without what differs from run to run however right it is: wall times, latencies."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in _TIMED}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


#: What the environment may hold that would change what an OpenAI client sends or where: the key,
#: base URL, organisation and project, and proxies.
OPENAI_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
              "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
              "NO_PROXY", "no_proxy")


# ---- headless Chromium (tests/runtime/views/: test_page.py, test_plan_views.py)
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def chromium_options(user_data_dir: Path):
    """Headless Chromium as benchmarks/trace_html.py starts it, with the browser's log kept."""
    from benchmarks.trace_html import chromium_options as benchmark_options

    options = benchmark_options(user_data_dir)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return options


# ---- the package's modules and their imports (test_layers.py, test_package_docs.py)
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["decomp", *parts])


def package_modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (`decomp.dsl.parser`), with its file."""
    skip = {"tests", "benchmarks", ".venv", "build", "docs", "site"}
    return {_module_name(p): p for p in REPO.rglob("*.py") if not skip & set(p.relative_to(REPO).parts)}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package that `name` imports, at any depth of its code: imports inside
    functions and under `if TYPE_CHECKING:` count like the others."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != name:
                found.add(target)
    return found
