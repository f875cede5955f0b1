"""Shared fixtures: the papers' data the tests read (tests/fixtures/, cut from the originals:
tests/fixtures/README.md), a private step cache per test, a registry of plain functions, and
what several test files share: the mock OpenAI server, the two OpenAI transports and a clean
environment for the model tests, a headless Chromium for the page tests; and the one stated
exception to the per-test time limit that goes by marker (`local_model`). The helpers that are
not fixtures (`registry_with`, `untimed`, `invoke`, the shared programs) are in tests/helpers.py:
no test file imports this module."""
import string
from pathlib import Path

import pytest

from decomp.handlers.registry import python_handler
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.helpers import CHROMEDRIVER, CHROMIUM, FIXTURES, OPENAI_ENV, chromium_options, load_dev_rows, registry_with


@python_handler("capwords")
def capwords(query):
    """`python(function="capwords")`: a registered function for tests (a program may not call
    `string:capwords` itself unless the user trusts `string`)."""
    return string.capwords(query)


#: Seconds a test marked `local_model` may take, instead of pyproject's `timeout` (120 s): it loads
#: the embedded llama-cpp model and generates on the CPU, which took up to 69 s a test on a loaded
#: 2-core machine (tests/runtime/models/test_local_soft_prompts.py, test_local_prefix_reuse.py,
#: the local model benchmark's smoke test) and slows down with every process beside it.
LOCAL_MODEL_TIMEOUT = 300


def pytest_collection_modifyitems(items):
    """The stated exception to the per-test time limit by marker: a `local_model` test gets
    `LOCAL_MODEL_TIMEOUT` seconds unless it states its own `@pytest.mark.timeout`. Every other
    exception is a `timeout` mark on its test or module, with its reason beside it."""
    for item in items:
        if item.get_closest_marker("local_model") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(LOCAL_MODEL_TIMEOUT))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own step-cache folder: no test reads another's cached results."""
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path_factory.mktemp("runs")))
    # the folders a user trusts (handlers/sandbox/trust.py) are theirs, not the tests': none unless a test says so
    monkeypatch.delenv("DECOMP_TRUSTED_FOLDERS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    # the owner key that signs `decomp optimize`'s folders (learning/optimize/owner_key.py): the test's own
    monkeypatch.setenv("DECOMP_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def fixture_data() -> Path:
    """tests/fixtures/: the cut datasets and the DecomP prompt files, laid out as ../shared/data."""
    return FIXTURES


@pytest.fixture
def fn_registry():
    """`registry_with` as a fixture, for tests that register plain functions as a kind."""
    return registry_with


@pytest.fixture(scope="session")
def dev_rows() -> list[dict]:
    rows = load_dev_rows()
    assert len(rows) == 40
    return rows


@pytest.fixture(scope="session")
def dev_pool(dev_rows) -> list[str]:
    """Every crafting command of the dev tasks, once each, in order of appearance."""
    return list(dict.fromkeys(c for row in dev_rows for c in row["crafting_commands"]))


# ---- the mock OpenAI server and the model tests (tests/runtime/models/, tests/runtime/testing/)
@pytest.fixture(scope="module")
def server(request):
    """One in-process mock OpenAI server (runtime/testing/mock_server.py) per test module, on
    127.0.0.1. It answers with its default replies unless the module says otherwise in
    `MOCK_SERVER`, a dict of `MockOpenAIServer`'s keyword arguments (`responder`, `apis`, `usage`,
    `latency`...), e.g. `MOCK_SERVER = {"responder": student}`."""
    with MockOpenAIServer(**getattr(request.module, "MOCK_SERVER", {})) as s:
        yield s


@pytest.fixture(params=("aiohttp", "openai"))
def transport(request) -> str:
    """The two transports of `OpenAIModel`: each test that takes it runs once per transport."""
    return request.param


@pytest.fixture
def clean_env(monkeypatch):
    """`OPENAI_ENV` unset for the test (a test sets what it needs with monkeypatch). Not autouse
    here: the model test files take it for all their tests with
    `pytestmark = pytest.mark.usefixtures("clean_env")`."""
    for name in OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)


# ---- headless Chromium (tests/runtime/views/: test_page.py, test_plan_views.py)
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
