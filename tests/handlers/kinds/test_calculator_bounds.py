"""The calculator on hostile input: finding the expression is linear in the text (one parse, not
one per stretch of tokens), answers the same as trying every stretch did, refuses a query over
max_chars, and runs off the event loop."""
from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest
from lark.exceptions import LarkError

from decomp import Session
from decomp.dsl.errors import HandlerError
from decomp.handlers.kinds import calculator
from decomp.handlers.base import LoadContext
from decomp.handlers.kinds.calculator import CalculatorHandler, find_expression


def make(**options):
    return CalculatorHandler("calc", CalculatorHandler.Options(**options), None, LoadContext(Path(".")))


def every_stretch(text: str):
    """The old search, as the reference: every stretch of whole tokens of each run that may start
    and end an expression, longest first (leftmost on ties), the first that parses."""
    found = []
    for run in calculator._RUN.finditer(text):
        chunk = run.group().strip()
        if not chunk:
            continue
        offset = run.start() + run.group().index(chunk[0])
        tokens = list(calculator._PARSER.lex(chunk))
        for i, first in enumerate(tokens):
            at = offset + first.start_pos
            hyphen = first.value in "+-" and at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")
            if not (first.type == "NUMBER" or first.value in "(+-") or hyphen:
                continue
            for last in tokens[i:]:
                if last.type == "NUMBER" or last.value == ")":
                    found.append((last.end_pos - first.start_pos, offset + first.start_pos,
                                  chunk[first.start_pos:last.end_pos]))
    for _, _, candidate in sorted(found, key=lambda c: (-c[0], c[1])):
        try:
            return calculator._PARSER.parse(candidate)
        except LarkError:
            continue
    return None


PIECES = ["1", "23", "4.5", "1,234", "7e3", "(", ")", "+", "-", "*", "/", "//", "%", "**", " ", " ", "x", "a-",
          "_", ",", ".", "?"]


def test_the_longest_expression_is_the_one_trying_every_stretch_found():
    rng = random.Random(14)
    for _ in range(4000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 16)))
        assert find_expression(text) == every_stretch(text), text


class CountingParser:
    """The calculator's parser, counting the candidates it is asked to parse."""

    def __init__(self, parser):
        self.parser, self.parses = parser, 0

    def parse(self, text):
        self.parses += 1
        return self.parser.parse(text)

    def lex(self, text):
        return self.parser.lex(text)


def test_finding_the_expression_parses_one_candidate_not_every_stretch(monkeypatch):
    counting = CountingParser(calculator._PARSER)
    monkeypatch.setattr(calculator, "_PARSER", counting)
    text = ("1 2 " * 30 + "x ") * 40  # runs of 60 numbers that are no expression together
    assert make().calculate(text) == 1
    assert counting.parses == 1  # trying every stretch parsed about 70,000 of them


def test_a_long_digit_and_space_text_is_answered_quickly():
    text = ("1 2 3 4 5 6 7 8 9 " * 7 + "x ") * 700  # 90 KB: runs of 63 numbers between words
    started = time.monotonic()
    assert make().calculate(text) == 1
    assert time.monotonic() - started < 5  # about 20 s before; well under a second now


def test_a_query_over_max_chars_is_refused():
    with pytest.raises(HandlerError, match=r"the query is 100,001 characters long, more than max_chars \(100,000\)"):
        make().calculate("1" + " " * 100_000)
    assert make(max_chars=10).calculate("2 + 3") == 5
    with pytest.raises(HandlerError, match="more than max_chars"):
        make(max_chars=10).calculate("2 + 3 + 4 + 5")
    assert [e.message for e in make(max_chars=0).check()] == ["max_chars must be at least 1, got 0"]


def test_the_calculation_runs_off_the_event_loop():
    seen = []
    handler = make()
    original = handler.calculate

    def calculate(text, call=None):
        import threading

        seen.append(threading.current_thread() is threading.main_thread())
        return original(text, call)

    handler.calculate = calculate
    assert asyncio.run(Session().arun_handler(handler, "2 * 21")) == 42
    assert seen == [False]
