"""Shared fixtures: the papers' data the tests read (tests/fixtures/, cut from the originals:
tests/fixtures/README.md), a private step cache per test, a registry of plain functions."""
from decomp.handlers.plugins import builtin_registry
import inspect
import string
from pathlib import Path
from typing import Any, Callable

import pytest

from decomp import Handler, Options
from decomp.handlers.registry import Registry, handler_kind, python_handler

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
