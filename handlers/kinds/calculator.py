"""The `calculator` handler kind: safe arithmetic on the sub-query text.

    handler calc = calculator()                    # "What is 3 + 4?" -> 7
    handler exact = calculator(extract=false)      # the whole query must be an expression

Only numbers, `+ - * / // % **`, unary signs and parentheses exist: the text is parsed with a
small LALR grammar (Lark) and evaluated over the parse tree - no names, calls, eval or exec.
"""
from __future__ import annotations

import heapq
import math
import operator
from fractions import Fraction
from typing import Any, Callable, Iterator

import regex as rx
from lark import Lark, Token, Transformer_NonRecursive, Tree
from lark.exceptions import LarkError, VisitError

from decomp.dsl.answer_types import Float, Type
from decomp.dsl.errors import CheckError, HandlerError
from decomp.handlers.base import Call, Handler
from decomp.handlers.base import Options as BaseOptions

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

Number = Fraction | float


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
      max_chars     longest query (in characters) the handler reads (default 100,000); a
                    longer one is a `HandlerError`. The work is linear in the query's length.
      timeout       seconds one call may take (> 0); not written: the run's
                    `--handler-timeout` (default 10 s). The work runs off the event loop.

    Semantics are Python's (`-2**2` is -4, `2**3**2` is 512, `//` and `%` floor, `/` is true
    division). Integer literals are computed exactly (as fractions), so the answer is an int
    when every number written was an integer and the value is integral (`6/3` -> 2, `7/2` ->
    3.5); once a float literal takes part (`2.0*3`, `1e3`) the answer is a float (6.0). Float
    answers are rounded to `digits` significant digits (`1/3` -> 0.3333333333).
    Division by zero, a too-large exponent or number, a complex or non-finite result, and text
    that holds no expression are `HandlerError`s.
    """

    kind = "calculator"

    class Options(BaseOptions):
        extract: bool = True
        digits: int = 10
        max_exponent: int = 1000
        max_digits: int = 1000
        max_chars: int = 100_000
        timeout: float | None = None

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
        if o.max_chars < 1:
            errors.append(CheckError(f"max_chars must be at least 1, got {o.max_chars}", self.error_span("max_chars")))
        return errors + self.timeout_problems()

    def inferred_type(self) -> Type:
        """A number."""
        return Float()

    async def run(self, call: Call) -> Any:
        return await self.offload(call, self.calculate, call.query, call, what="the calculation")

    def calculate(self, text: str, call: Call | None = None) -> int | float:
        """The value of the expression in `text`, as the handler answers it."""
        span = call.span if call else None
        if len(text) > self.options.max_chars:
            raise HandlerError(f"the query is {len(text):,} characters long, more than max_chars "
                               f"({self.options.max_chars:,})", span)
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
    parentheses, spaces): "What is 3 + 4?" has the run " 3 + 4". Of every stretch of whole
    tokens inside a run that starts with a number, "(" or a sign and ends with a number or ")",
    the longest that is an expression (in characters, leftmost on ties) wins: "(2+3)*4." gives
    "(2+3)*4", "5-year-old 10 + 2" gives "10 + 2". A sign glued to a word is a hyphen, not a
    minus: "COVID-19" holds the expression "19".

    Linear in the length of `text`: the stretches are not parsed one by one; `_longest` finds,
    for each token, the longest expression starting there in one pass over the run (see
    `_valid_pair` for why that is exact), and only the winner is parsed.
    """
    for _, _, candidate in heapq.nsmallest(_MAX_PARSES, _candidates(text), key=lambda c: (-c[0], c[1])):
        try:
            return _PARSER.parse(candidate)
        except LarkError:  # not expected (the scan is exact); the next longest then
            continue
    return None


#: Candidates parsed at most (the first one parses: see `_valid_pair`).
_MAX_PARSES = 4
#: Tokens after which the calculator's state is "after an operand" (a binary operator or ")"
#: may follow); after any other token an operand is expected (a number, "(" or a sign).
_OPERAND_ENDS = ("NUMBER", ")")
_BINARY_ONLY = ("*", "/", "//", "%", "**", ")")


#: One token of a run (what the grammar's lexer would give, spaces skipped): a number or an operator.
_TOKEN = rx.compile(r"\s*(?:(" + NUMBER_PATTERN + r")|(\*\*|//|[-+*/%()]))")


def _tokens(chunk: str) -> tuple[list[str], list[int], list[int]]:
    """The kinds ("NUMBER" or the operator), starts and ends of the tokens of `chunk`."""
    kinds, starts, ends = [], [], []
    for match in _TOKEN.finditer(chunk):
        group = 1 if match.group(1) is not None else 2
        kinds.append("NUMBER" if group == 1 else match.group(2))
        starts.append(match.start(group))
        ends.append(match.end(group))
    return kinds, starts, ends


def _valid_pair(before: str, after: str) -> bool:
    """Whether token kind `after` may follow `before` inside an expression.

    The grammar's expressions are exactly the token sequences that start with a number, "(" or
    a sign, end with a number or ")", have balanced parentheses and only such pairs: a number
    or "(" where an operand is expected (at the start, after an operator or "("), ")" or a
    binary-only operator (`* / // % **`) after an operand (a number or ")"), a sign (+ -)
    anywhere (binary after an operand, unary elsewhere)."""
    operand_before = before in _OPERAND_ENDS
    if after in ("NUMBER", "("):
        return not operand_before
    if after in _BINARY_ONLY:
        return operand_before
    return True


def _candidates(text: str) -> Iterator[tuple[int, int, str]]:
    """(length, start, text) of the longest expression starting at each token of each run."""
    for run in _RUN.finditer(text):
        chunk = run.group().strip()
        if not chunk:
            continue
        offset = run.start() + run.group().index(chunk[0])
        kinds, starts, ends = _tokens(chunk)
        for first, last in _longest(kinds, [_may_start(text, offset + at, kind) for kind, at in zip(kinds, starts)]):
            yield ends[last] - starts[first], offset + starts[first], chunk[starts[first]:ends[last]]


def _longest(kinds: list[str], starts: list[bool]) -> Iterator[tuple[int, int]]:
    """(first, last) token of the longest expression starting at each token that may start one
    (`starts`), by token kinds.

    Within a segment of valid pairs, tokens i..j are an expression when token i may start one,
    token j may end one, and the parenthesis depth before i equals the depth after j without
    going below it in between. Walking from the right, `ends[d]` holds the farthest place at
    depth d that an expression may end at; a place left of which the depth drops below d
    ends it for every token further left."""
    start = 0
    for stop in range(1, len(kinds) + 1):
        if stop < len(kinds) and _valid_pair(kinds[stop - 1], kinds[stop]):
            continue
        yield from _segment(kinds, starts, start, stop)
        start = stop


def _segment(kinds: list[str], starts: list[bool], start: int, stop: int) -> Iterator[tuple[int, int]]:
    depth = [0] * (stop - start + 1)  # depth[k - start]: before token k
    for k in range(start, stop):
        depth[k - start + 1] = depth[k - start] + (kinds[k] == "(") - (kinds[k] == ")")
    ends: dict[int, int] = {}
    for k in range(stop, start - 1, -1):
        here = depth[k - start]
        ends.pop(here + 1, None)  # the depth fell below those: no expression spans this place
        if k < stop and starts[k] and kinds[k] not in _BINARY_ONLY:
            end = ends.get(here)
            if end is not None:
                yield k, end - 1
        if k > start and kinds[k - 1] in _OPERAND_ENDS:
            ends.setdefault(here, k)


def _may_start(text: str, at: int, kind: str) -> bool:
    """Whether an expression may begin with a token of `kind` at `at`: a number, "(" or a sign
    that is no hyphen."""
    if kind in ("NUMBER", "("):
        return True
    return kind in ("-", "+") and not (at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"))
