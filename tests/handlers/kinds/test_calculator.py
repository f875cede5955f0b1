"""The `calculator` handler kind."""
from pathlib import Path

import pytest
from pydantic import ValidationError

from decomp.dsl.errors import HandlerError
from decomp import Session
from decomp.handlers.base import LoadContext
from decomp.handlers.kinds.calculator import CalculatorHandler
from decomp.handlers.plugins import load as load_plugins


def make(**options):
    return CalculatorHandler("calc", CalculatorHandler.Options(**options), None, LoadContext(Path(".")))


def calc(query, **options):
    return Session().run_handler(make(**options), query)


def test_registered_as_calculator():
    assert load_plugins().kind("calculator") is CalculatorHandler


@pytest.mark.parametrize("text, value", [
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("2 ** 3 ** 2", 512),
    ("-2 ** 2", -4),
    ("2 ** -1", 0.5),
    ("-(3 - 5)", 2),
    ("--3", 3),
    ("+4 - -1", 5),
    ("10 - 4 - 3", 3),
    ("7 // 2", 3),
    ("-7 // 2", -4),
    ("-7 % 3", 2),
    ("((((((1 + 1))))))", 2),
])
def test_precedence_unary_and_parentheses(text, value):
    result = calc(text, extract=False)
    assert result == value and type(result) is type(value)


def test_integer_results_stay_integers():
    assert calc("6 / 3") == 2 and isinstance(calc("6 / 3"), int)
    assert calc("(1 / 3) * 3") == 1 and isinstance(calc("(1 / 3) * 3"), int)
    assert calc("1,234 + 1") == 1235


def test_floats_are_rounded_to_significant_digits():
    assert calc("7 / 2") == 3.5
    assert calc("1 / 3") == 0.3333333333
    assert calc("1 / 3", digits=3) == 0.333
    assert calc("0.1 + 0.2") == 0.3
    assert calc("2.0 * 3") == 6.0 and isinstance(calc("2.0 * 3"), float)
    assert calc("1e3") == 1000.0 and isinstance(calc("1e3"), float)
    assert calc(".5 * 4") == 2.0


def test_division_by_zero():
    for text in ("1 / 0", "1 // 0", "5 % 0", "0 ** -1", "1.5 / 0"):
        with pytest.raises(HandlerError, match="division by zero"):
            calc(text)


def test_huge_exponent_and_results_are_rejected():
    with pytest.raises(HandlerError, match="exceeds max_exponent 1000"):
        calc("2 ** 1001")
    with pytest.raises(HandlerError, match="exceeds max_exponent 10"):
        calc("2 ** 11", max_exponent=10)
    with pytest.raises(HandlerError, match="more than 1000 digits"):
        calc("9 ** 999")
    with pytest.raises(HandlerError, match="more than 1000 digits"):
        calc("(10 ** 900) * (10 ** 900)")
    with pytest.raises(HandlerError, match="too large"):
        calc("10.0 ** 400")
    with pytest.raises(HandlerError, match="complex"):
        calc("(-8) ** 0.5")
    assert calc("2 ** 100") == 2 ** 100


@pytest.mark.parametrize("text", ['__import__("os")', "x + 1", "1 + x", "2*x", "3 apples * 2",
                                  "__import__('os') + 1", "abs(-3)"])
def test_names_and_calls_are_rejected(text):
    with pytest.raises(HandlerError):
        calc(text)
    with pytest.raises(HandlerError, match="not an arithmetic expression"):
        calc(text, extract=False)


def test_extracts_the_longest_expression_from_text():
    assert calc("What is 3 + 4?") == 7
    assert calc("What is -3 + 4?") == 1
    assert calc("Is 5 - 3 more than 1?") == 2
    assert calc("Compute (2 + 3) * 4.") == 20
    assert calc("A 5-day trip costs 100 * 3 dollars") == 300
    with pytest.raises(HandlerError, match="no arithmetic expression"):
        calc("no numbers here")
    with pytest.raises(HandlerError, match="not an arithmetic expression"):
        calc("What is 3 + 4?", extract=False)


def test_check_bounds_options():
    assert make().check() == []
    assert "digits" in make(digits=0).check()[0].message
    assert "max_digits" in make(max_digits=10_000).check()[0].message


def test_options_are_validated():
    with pytest.raises(ValidationError):
        CalculatorHandler.Options(precision=3)
    with pytest.raises(ValidationError):
        CalculatorHandler.Options(digits="10")
