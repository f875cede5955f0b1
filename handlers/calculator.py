"""The `calculator` handler kind: safe arithmetic on the sub-query text.

    handler calc = calculator()                    # "What is 3 + 4?" -> 7
    handler exact = calculator(extract=false)      # the whole query must be an expression

Only numbers, `+ - * / // % **`, unary signs and parentheses exist: the text is parsed with a
small LALR grammar (Lark) and evaluated over the parse tree - no names, calls, eval or exec.
"""
from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any, Callable, Iterator

import regex as rx
from lark import Lark, Token, Transformer_NonRecursive, Tree
from lark.exceptions import LarkError, VisitError

from decomp.dsl.errors import CheckError, HandlerError
from decomp.handlers.base import Call, Handler
from decomp.handlers.base import Options as BaseOptions
from decomp.handlers.registry import handler_kind

#: A number: digits with optional comma thousands separators in groups of exactly three
#: (1,234,567), an optional fraction (.5 needs a digit after the point) and exponent (1e3).
NUMBER_PATTERN = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?"

GRAMMAR = r"""
?start: sum
?sum: product
    | sum "+" product      -> add
    | sum "-" product      -> sub
?product: unary
    | product "*" unary    -> mul
    | product "/" unary    -> div
    | product "//" unary   -> floordiv
    | product "%" unary    -> mod
?unary: power
    | "-" unary            -> neg
    | "+" unary            -> pos
?power: atom
    | atom "**" unary      -> pow
?atom: NUMBER              -> number
    | "(" sum ")"
NUMBER: /@NUMBER@/
%import common.WS
%ignore WS
""".replace("@NUMBER@", NUMBER_PATTERN)

_PARSER = Lark(GRAMMAR, parser="lalr", lexer="basic")
#: Maximal stretches of text made only of calculator tokens (numbers, operators, parentheses).
_RUN = rx.compile(r"(?:" + NUMBER_PATTERN + r"|[-+*/%()]|\s)+")
_IDENT = r"\b[^\W\d]\w*"
#: An operator joining a word and a number, or a call: `x + 1`, `2*x`, `3 apples * 2`, `f(2)`.
#: A sign spaced like a unary one (`is -3`) or a hyphen (`COVID-19`, `3-day`) does not count.
_NAME_USE = rx.compile(
    _IDENT + r"\s*(?:\*\*|//|[*/%])\s*[\d.(]"
    r"|[\d.)]\s*(?:\*\*|//|[*/%])\s*" + _IDENT
    + "|" + _IDENT + r"(?:\s*\+|\s+-\s)\s*[\d.(]"
    r"|[\d.)](?:\s*\+|\s+-|-\s)\s*" + _IDENT
    + "|" + _IDENT + r"\("
)
#: Runs of more tokens than this are only tried whole, not window by window.
_MAX_WINDOW_TOKENS = 64

Number = Fraction | float


@handler_kind("calculator")
class CalculatorHandler(Handler):
    """Evaluates arithmetic in the sub-query and answers with the number.

    Options:
      extract       true: answer for the longest arithmetic expression found in the text (see
                    `find_expression`); text where an operator joins a word and a number
                    (`x + 1`, `3 apples * 2`) or that calls something (`f(2)`) is refused
                    rather than guessed at. false: the whole stripped query must be one
                    expression.
      digits        significant digits a float answer is rounded to (1..17).
      max_exponent  largest absolute exponent `**` accepts.
      max_digits    largest number of decimal digits any number (literal, intermediate or
                    result; numerator or denominator of an exact fraction) may have (<= 4000).

    Semantics are Python's (`-2**2` is -4, `2**3**2` is 512, `//` and `%` floor, `/` is true
    division). Integer literals are computed exactly (as fractions), so the answer is an int
    when every number written was an integer and the value is integral (`6/3` -> 2, `7/2` ->
    3.5); once a float literal takes part (`2.0*3`, `1e3`) the answer is a float (6.0). Float
    answers are rounded to `digits` significant digits (`1/3` -> 0.3333333333).
    Division by zero, a too-large exponent or number, a complex or non-finite result, and text
    that holds no expression are `HandlerError`s.
    """

    class Options(BaseOptions):
        extract: bool = True
        digits: int = 10
        max_exponent: int = 1000
        max_digits: int = 1000

    def check(self) -> list[CheckError]:
        o = self.options
        errors = []
        if not 1 <= o.digits <= 17:
            errors.append(CheckError(f"digits must be between 1 and 17, got {o.digits}", self.error_span("digits")))
        if o.max_exponent < 1:
            errors.append(CheckError("max_exponent must be at least 1", self.error_span("max_exponent")))
        if not 1 <= o.max_digits <= 4000:  # CPython refuses to print ints of more than 4300 digits
            errors.append(CheckError(f"max_digits must be between 1 and 4000, got {o.max_digits}",
                                     self.error_span("max_digits")))
        return errors

    async def run(self, call: Call) -> Any:
        return self.calculate(call.query, call)

    def calculate(self, text: str, call: Call | None = None) -> int | float:
        """The value of the expression in `text`, as the handler answers it."""
        span = call.span if call else None
        tree = self._parse(text, span)
        try:
            value = _Evaluator(self, span).transform(tree)
        except VisitError as err:
            raise err.orig_exc from err.orig_exc.__cause__
        return self._answer(value, span)

    def _parse(self, text: str, span) -> Tree:
        if self.options.extract:
            name_use = _NAME_USE.search(text)
            if name_use:
                raise HandlerError(f"names and calls are not arithmetic: "
                                   f"{name_use.group()!r} in {text!r}", span)
            tree = find_expression(text)
            if tree is None:
                raise HandlerError(f"no arithmetic expression in {text!r}", span)
            return tree
        try:
            return _PARSER.parse(text.strip())
        except LarkError as err:
            raise HandlerError(f"not an arithmetic expression: {text!r}", span) from err

    def _answer(self, value: Number, span) -> int | float:
        if isinstance(value, Fraction) and value.denominator == 1:
            return int(value)
        try:
            number = float(value)
        except OverflowError as err:
            raise HandlerError("result too large for a float", span) from err
        return float(f"{number:.{self.options.digits}g}")

    def fail(self, message: str, span) -> HandlerError:
        return HandlerError(message, span)


class _Evaluator(Transformer_NonRecursive):
    """Folds the parse tree into a number (no recursion, so deep parentheses are fine)."""

    def __init__(self, handler: CalculatorHandler, span):
        super().__init__()
        self.h, self.span, self.opts = handler, span, handler.options

    def number(self, children: list[Token]) -> Number:
        text = children[0].replace(",", "")
        if any(c in text for c in ".eE"):
            return self._checked(float(text))
        if len(text) > self.opts.max_digits:
            raise self.h.fail(f"number has more than {self.opts.max_digits} digits", self.span)
        return Fraction(int(text))

    def neg(self, c): return self._apply(operator.neg, *c)
    def pos(self, c): return c[0]
    def add(self, c): return self._apply(operator.add, *c)
    def sub(self, c): return self._apply(operator.sub, *c)
    def mul(self, c): return self._apply(operator.mul, *c)
    def div(self, c): return self._apply(operator.truediv, *c)
    def floordiv(self, c): return self._apply(operator.floordiv, *c)
    def mod(self, c): return self._apply(operator.mod, *c)

    def pow(self, c: list[Number]) -> Number:
        base, exponent = c
        if abs(exponent) > self.opts.max_exponent:
            raise self.h.fail(f"exponent {_show(exponent)} exceeds max_exponent {self.opts.max_exponent}", self.span)
        if isinstance(base, Fraction) and isinstance(exponent, Fraction) and exponent.denominator == 1 and base:
            if _digits(base) * abs(exponent) > self.opts.max_digits:
                raise self.h.fail(f"result would have more than {self.opts.max_digits} digits", self.span)
        return self._apply(operator.pow, base, exponent)

    def _apply(self, op: Callable[..., Any], *args: Number) -> Number:
        try:
            return self._checked(op(*args))
        except ZeroDivisionError as err:
            raise self.h.fail("division by zero", self.span) from err
        except OverflowError as err:
            raise self.h.fail("result too large", self.span) from err

    def _checked(self, value: Any) -> Number:
        if isinstance(value, int):  # Fraction // Fraction gives an int
            value = Fraction(value)
        if isinstance(value, complex):
            raise self.h.fail("result is a complex number", self.span)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.h.fail("result too large", self.span)
        if isinstance(value, Fraction) and _digits(value) > self.opts.max_digits:
            raise self.h.fail(f"result has more than {self.opts.max_digits} digits", self.span)
        return value


def _digits(value: Fraction) -> float:
    """About how many decimal digits the larger of numerator and denominator has."""
    bits = max(abs(value.numerator).bit_length(), value.denominator.bit_length())
    return bits * math.log10(2)


def _show(value: Number) -> str:
    return str(int(value)) if isinstance(value, Fraction) and value.denominator == 1 else str(float(value))


def find_expression(text: str) -> Tree | None:
    """The parse tree of the longest arithmetic expression inside `text`, or None.

    The text is cut into maximal runs of calculator characters (numbers, operators,
    parentheses, spaces): "What is 3 + 4?" has the run " 3 + 4". Each run is tried whole;
    then every stretch of whole tokens inside it that starts with a number, "(" or a sign and
    ends with a number or ")". The longest stretch (in characters, leftmost on ties) that
    parses wins: "(2+3)*4." gives "(2+3)*4", "5-year-old 10 + 2" gives "10 + 2". A sign
    glued to a word is a hyphen, not a minus: "COVID-19" holds the expression "19".
    """
    for _, _, candidate in sorted(_candidates(text), key=lambda c: (-c[0], c[1])):
        try:
            return _PARSER.parse(candidate)
        except LarkError:
            continue
    return None


def _candidates(text: str) -> Iterator[tuple[int, int, str]]:
    """(length, start, text) of every stretch of `text` that may be an expression."""
    for run in _RUN.finditer(text):
        chunk = run.group().strip()
        if not chunk:
            continue
        offset = run.start() + run.group().index(chunk[0])
        tokens = list(_PARSER.lex(chunk))
        if len(tokens) > _MAX_WINDOW_TOKENS:
            tokens = [tokens[0], tokens[-1]]  # only the whole run
        for i, first in enumerate(tokens):
            if not _may_start(text, offset + first.start_pos, first):
                continue
            for last in tokens[i:]:
                if last.type == "NUMBER" or last.value == ")":
                    yield last.end_pos - first.start_pos, offset + first.start_pos, chunk[first.start_pos:last.end_pos]


def _may_start(text: str, at: int, token: Token) -> bool:
    """Whether an expression may begin with `token`: a number, "(" or a sign that is no hyphen."""
    if token.type == "NUMBER" or token.value == "(":
        return True
    return token.value in ("-", "+") and not (at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"))
