"""Shared fixtures: the papers' data the tests read (tests/fixtures/, cut from the originals:
tests/fixtures/README.md), a private step cache per test, a registry of plain functions, and
what several test files share: the mock OpenAI server, the two OpenAI transports and a clean
environment for the model tests, a headless Chromium for the page tests, `untimed`.

They live here, not in a folder's conftest.py, because the tests folders are not packages: a
second conftest.py would take over the module name `conftest` that test files import helpers
from (`from conftest import registry_with`) and break those imports for the files collected
after it."""
import inspect
import string
from pathlib import Path
from typing import Any, Callable

import pytest

from decomp import Handler, Options
from decomp.handlers.plugins import builtin_registry
from decomp.handlers.registry import Registry, handler_kind, python_handler
from decomp.runtime.testing.mock_server import MockOpenAIServer

REPO = Path(__file__).resolve().parents[1]
# Small cuts of the papers' data, with their licences: every test that needs real data reads these.
FIXTURES = REPO / "tests" / "fixtures"


@python_handler("capwords")
def capwords(query):
    """`python(function="capwords")`: a registered function for tests (a program may not call
    `string:capwords` itself unless the user trusts `string`)."""
    return string.capwords(query)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own step-cache folder: no test reads another's cached results."""
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path_factory.mktemp("runs")))
    # the folders a user trusts (handlers/trust.py) are theirs, not the tests': none unless a test says so
    monkeypatch.delenv("DECOMP_TRUSTED_FOLDERS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    # the owner key that signs `decomp optimize`'s folders (runtime/optimize/owner_key.py): the test's own
    monkeypatch.setenv("DECOMP_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def fixture_data() -> Path:
    """tests/fixtures/: the cut datasets and the DecomP prompt files, laid out as ../shared/data."""
    return FIXTURES


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


@pytest.fixture
def fn_registry():
    """`registry_with` as a fixture, for tests that register plain functions as a kind."""
    return registry_with


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
    import json

    return [json.loads(line) for line in TEXTCRAFT_DEV.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def dev_rows() -> list[dict]:
    rows = load_dev_rows()
    assert len(rows) == 40
    return rows


@pytest.fixture(scope="session")
def dev_pool(dev_rows) -> list[str]:
    """Every crafting command of the dev tasks, once each, in order of appearance."""
    return list(dict.fromkeys(c for row in dev_rows for c in row["crafting_commands"]))


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


# ---- the mock OpenAI server and the model tests (tests/runtime/models/, tests/runtime/testing/)
@pytest.fixture(scope="module")
def server():
    """One in-process mock OpenAI server (runtime/testing/mock_server.py, default replies) per
    test module. test_resume.py and test_shards.py define their own `server`, with a responder."""
    with MockOpenAIServer() as s:
        yield s


@pytest.fixture(params=("aiohttp", "openai"))
def transport(request) -> str:
    """The two transports of `OpenAIModel`: each test that takes it runs once per transport."""
    return request.param


#: What the environment may hold that would change what an OpenAI client sends or where: the key,
#: base URL, organisation and project, and proxies.
OPENAI_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
              "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
              "NO_PROXY", "no_proxy")


@pytest.fixture
def clean_env(monkeypatch):
    """`OPENAI_ENV` unset for the test (a test sets what it needs with monkeypatch). Not autouse
    here: the model test files take it for all their tests with
    `pytestmark = pytest.mark.usefixtures("clean_env")`."""
    for name in OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)


# ---- headless Chromium (tests/runtime/views/: test_page.py, test_plan_views.py)
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def chromium_options(user_data_dir: Path):
    """Headless Chromium as benchmarks/trace_html.py starts it, with the browser's log kept."""
    from benchmarks.trace_html import chromium_options as benchmark_options

    options = benchmark_options(user_data_dir)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return options


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium driven through selenium, one per test module (skipped without Debian's
    chromium and chromium-driver)."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("Debian packages chromium and chromium-driver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)),
                              options=chromium_options(tmp_path_factory.mktemp("chromium-profile")))
    try:
        yield driver
    finally:
        driver.quit()


# ---- a tiny random Gemma 3 as a GGUF file (runtime/testing/tiny_gguf.py)
@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory) -> Path:
    """A tiny random Gemma 3 GGUF file (`write_tiny_gemma3(path)` with its defaults, seed 0:
    `build_tiny_gemma3()` rebuilds the same weights in memory), that transformers and llama.cpp
    both load, with the bundled model's tokenizer. Skipped without the tune extra (torch,
    transformers, gguf) or the bundled model's weights, whose config and tokenizer it copies."""
    for module in ("torch", "transformers", "gguf"):
        pytest.importorskip(module, reason="the tune extra is not installed")
    from decomp.dsl.errors import ModelError
    from decomp.runtime.models.local import DEFAULT, weights_path
    from decomp.runtime.testing.tiny_gguf import write_tiny_gemma3

    try:
        reference = weights_path(DEFAULT)
    except ModelError as err:
        pytest.skip(f"the bundled model's weights are not available: {err}")
    return write_tiny_gemma3(tmp_path_factory.mktemp("tiny-gguf") / "tiny-gemma3.gguf", reference=reference)
