"""The `regex` handler kind."""
from pathlib import Path

import pytest
from pydantic import ValidationError

from decomp.dsl.nodes import HandlerDecl, Option, Span, Value
from decomp.dsl.errors import HandlerError
from decomp import Session
from decomp.handlers.base import LoadContext
from decomp.handlers.plugins import load as load_plugins
from decomp.handlers.kinds.regex import RegexHandler


def make(decl=None, **options):
    return RegexHandler("rx", RegexHandler.Options(**options), decl, LoadContext(Path(".")))


def run(handler, query):
    return Session().run_handler(handler, query)


def test_registered_as_regex():
    assert load_plugins().kind("regex") is RegexHandler


def test_whole_match_without_groups():
    assert run(make(pattern=r"\d+"), "abc 123 def 45") == "123"


def test_first_group_by_default_when_pattern_has_groups():
    assert run(make(pattern=r"(\w+)@(\w+)"), "mail bob@example now") == "bob"


def test_explicit_group_number_and_name():
    assert run(make(pattern=r"(\w+)@(\w+)", group=2), "bob@example") == "example"
    assert run(make(pattern=r"(?P<user>\w+)@(\w+)", group="user"), "bob@example") == "bob"
    assert run(make(pattern=r"(\w+)@(\w+)", group=0), "x bob@example") == "bob@example"


def test_all_returns_every_match():
    assert run(make(pattern=r"\w+", all=True), "the quick  fox") == ["the", "quick", "fox"]
    assert run(make(pattern=r"(\w)(\w*)", all=True), "ab cd") == ["a", "c"]


def test_flags():
    assert run(make(pattern=r"^b\w+", flags="im"), "apple\nBanana") == "Banana"
    assert run(make(pattern=r"a.b", flags="s"), "a\nb") == "a\nb"
    assert run(make(pattern=r"\d+  # digits", flags="x"), "ab 42") == "42"


def test_default_when_nothing_matches():
    assert run(make(pattern=r"\d+", default="none"), "no digits") == "none"
    assert run(make(pattern=r"\d+", all=True, default=[]), "no digits") == []
    assert run(make(pattern=r"\d+", default=None), "no digits") is None


def test_no_match_without_default_is_an_error():
    with pytest.raises(HandlerError, match=r"pattern '\\\\d\+' did not match 'no digits'"):
        run(make(pattern=r"\d+"), "no digits")
    with pytest.raises(HandlerError, match="did not match"):
        run(make(pattern=r"\d+", all=True), "no digits")


def test_json_parses_matches_when_possible():
    h = make(pattern=r"\[.*?\]|\d+|[a-z]+", all=True, json=True)
    assert run(h, '[1, 2] 7 abc') == [[1, 2], 7, "abc"]


def test_catastrophic_pattern_times_out_quickly():
    # `(a+)+$` is optimised by the regex package; `(a|aa)+$` still backtracks exponentially: on
    # 60 a's the search alone would run for hours, so only the timeout can end this test (and no
    # wall-clock bound is needed to show that it did).
    h = make(pattern=r"(a|aa)+$", timeout=0.2)
    with pytest.raises(HandlerError, match=r"^\[rx\] regex: timed out after 0.2 s"):
        run(h, "a" * 60 + "b")


def test_bad_pattern_is_a_check_error_with_position():
    (err,) = make(pattern=r"a(b").check()
    assert "missing )" in err.message and "position 3" in err.message


def test_bad_pattern_span_points_into_the_source(tmp_path):
    src = 'handler rx = regex(pattern=r"a(b")\n'
    path = tmp_path / "m.decomp"
    path.write_text(src)
    col = src.index('r"') + 1
    value = Value(Span(str(path), 1, col, 1, col + 6), "a(b", "string")
    decl = HandlerDecl(Span(str(path), 1, 1, 1, len(src)), "rx", "regex", (Option(value.span, "pattern", value),))
    (err,) = make(decl, pattern="a(b").check()
    assert (err.span.line, err.span.column) == (1, src.index("a(b") + 1 + 3)


def test_check_timeout_flags_and_group():
    assert "timeout must be > 0" in make(pattern="a", timeout=0.0).check()[0].message
    assert "unknown regex flag" in make(pattern="a", flags="iq").check()[0].message
    assert "out of range" in make(pattern="(a)", group=2).check()[0].message
    assert "no group named 'x'" in make(pattern="(a)", group="x").check()[0].message
    assert make(pattern=r"(\w+)", flags="i").check() == []


def test_options_are_validated():
    with pytest.raises(ValidationError):
        RegexHandler.Options(pattern="a", colour="red")
    with pytest.raises(ValidationError):
        RegexHandler.Options(pattern="a", all="yes")
    with pytest.raises(ValidationError):
        RegexHandler.Options(all=True)


# ---- bounds: matches capped, matching off the event loop
def test_all_matches_are_capped_by_max_matches():
    assert run(make(pattern=r"\d", all=True, max_matches=3), "a1b2c3") == ["1", "2", "3"]
    with pytest.raises(HandlerError, match=r"more than max_matches \(3\) matches: raise max_matches=N"):
        run(make(pattern=r"\d", all=True, max_matches=3), "1234")
    with pytest.raises(HandlerError, match=r"more than max_matches \(1000\)"):
        run(make(pattern=r".", all=True), "x" * 5000)  # the default
    assert "max_matches must be at least 1" in make(pattern="a", max_matches=0).check()[0].message


def test_a_long_regex_timeout_blocks_its_own_row_only():
    import asyncio

    h = make(pattern=r"(a|aa)+$", timeout=1.0)
    ticks = 0

    async def tick(stop):
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    async def main():
        stop = asyncio.Event()
        ticker = asyncio.ensure_future(tick(stop))
        try:
            await Session().arun_handler(h, "a" * 60 + "b")
        finally:
            stop.set()
            await ticker

    # the regex engine stops itself at 1 s; on a starved machine the backstop may come first
    with pytest.raises(HandlerError, match=r"timed out after 1 s|time limit of 1 s"):
        asyncio.run(main())
    assert ticks >= 20  # the loop went on while the search ran (blocked, it ticks once)


def test_the_runs_handler_timeout_shortens_the_search():
    h = make(pattern=r"(a|aa)+$")
    session = Session(handler_timeout=0.2)
    with pytest.raises(HandlerError, match=r"timed out after 0.2 s"):
        session.run_handler(h, "a" * 60 + "b")
