"""Property tests of the parser: step lines round-trip, JSON answers come back equal, and no
input makes a Lark exception (or any other non-DecompError) escape."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from decomp.dsl.errors import DecompError
from decomp.dsl.parser import parse_fewshot, parse_module, parse_plan, parse_step_line

pytestmark = pytest.mark.slow  # hundreds to thousands of examples per test

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

operators = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)

# what may sit between [ and ]: anything but `]` and line breaks, not blank
handlers = st.text(
    st.characters(blacklist_characters="]\n\r", blacklist_categories=("Cs",)), min_size=1, max_size=20,
).filter(lambda s: s.strip() != "")

_text_chars = st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",))
# the query: no line break, no surrounding whitespace, not starting like an operator or handler
texts = st.text(_text_chars, min_size=1, max_size=60).map(str.strip).filter(
    lambda s: s != "" and s[0] not in "([" and s == s.strip())
refs_in_text = st.lists(
    st.one_of(st.integers(0, 10_000).map(lambda n: f"#{n}"),
              st.from_regex(r"#[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True),
              st.text(st.characters(whitelist_categories=("L", "N", "P", "Zs")), max_size=8)),
    min_size=1, max_size=6,
).map(lambda parts: " ".join(parts).strip()).filter(lambda s: s != "" and s[0] not in "([")
gaps = st.sampled_from([" ", "  ", "\t", " \t "])

REF = re.compile(r"#(?:[0-9]+|[A-Za-z_][A-Za-z0-9_]*)")


@SETTINGS
@given(op=st.none() | operators, handler=st.none() | handlers, text=st.none() | texts | refs_in_text,
       prefix=st.booleans(), gap=gaps, lead=st.sampled_from(["", " ", "\t"]), trail=st.sampled_from(["", " ", "\n"]))
def test_step_line_round_trips(op, handler, text, prefix, gap, lead, trail):
    parts = [f"({op})" if op else None, f"[{handler}]" if handler is not None else None, text]
    body = gap.join(p for p in parts if p)
    if not prefix:
        assume(not body.startswith("QS:"))
    line = lead + ("QS:" + gap if prefix else "") + body + trail
    step = parse_step_line(line)
    assert step.operator == op
    assert step.handler == (handler.strip() if handler is not None else None)
    assert step.query == (text or "")
    assert step.is_end == (step.handler == "EOQ")
    written = [m.group() for m in REF.finditer(text or "")]
    assert [r.text for r in step.refs] == written
    if prefix:  # spans cut the written line exactly
        for r in step.refs:
            assert line[r.span.column - 1: r.span.end_column - 1] == r.text
        if handler is not None:
            hs = step.handler_span
            assert line[hs.column - 1: hs.end_column - 1] == f"[{handler}]"


@SETTINGS
@given(op=st.none() | operators, handler=handlers, text=texts)
def test_step_line_text_property_reassembles(op, handler, text):
    step = parse_step_line(" ".join(p for p in [f"({op})" if op else "", f"[{handler}]", text] if p))
    again = parse_step_line(step.text)
    assert (again.operator, again.handler, again.query) == (step.operator, step.handler, step.query)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20,
)


# pieces that sit on the edges of the step-line terminals (marks, brackets, blanks, refs)
_pieces = st.sampled_from(["QS:", "QS", "(", ")", "(foreach)", "(a_1)", "(1)", "[", "]", "[split]", "[ x ]",
                           "[]", "#", "#1", "#q", " ", "\t", "  ", "a", "Q:", ":", "\u00a0", "\x0b", "é", "]["])
step_like = st.lists(_pieces | st.text(_text_chars, max_size=4), max_size=10).map("".join)


@settings(max_examples=2000, deadline=None)
@given(line=step_like)
def test_step_line_fast_reader_agrees_with_lark(line):
    """Lines without line breaks are read by a regular expression built from the grammar's
    terminals; it must give exactly the Step (spans included) that Lark gives."""
    from decomp.dsl import lexicon
    from decomp.dsl.parser import _fast_step, _parse

    assume(line.strip())
    fast = _fast_step(lexicon.STEP_LINE.fullmatch(line), "p")
    try:
        slow = _parse(line, "p", "step_line", None)
    except DecompError:
        assert fast is None
        return
    assert fast == slow


@SETTINGS
@given(value=json_values, ascii_only=st.booleans(), gap=st.sampled_from([" ", "  ", "\t", ""]))
def test_json_answers_come_back_equal(value, ascii_only, gap):
    dumped = json.dumps(value, ensure_ascii=ascii_only)
    fs = parse_fewshot(f"Q: what?\nA:{gap}{dumped}\n\nQC: q\nQS: [h] x\nA: {dumped}\nQS: [EOQ]\n", "t.txt")
    qa, decomp = fs.examples
    for answer in (qa.answer, decomp.steps[0].answer):
        assert answer.is_json
        assert answer.text == dumped
        assert answer.value == value
        assert json.dumps(answer.value, ensure_ascii=ascii_only) == dumped  # types kept (1 vs 1.0 vs true)
    assert decomp.answer.value == value


TOKENS = ["QS:", "QC:", "Q:", "A:", "# METADATA:", "(foreach)", "[h]", "[EOQ]", "#1", "#x", "\n", "\n\n",
          "\r\n", " ", "\t", "program", "handler", "model", "import", "main", "if", "else", "with", "len",
          "not", "and", "or", "in", "==", "=", "(", ")", "{", "}", "[", "]", ",", '"', "'", '"""', "r\"",
          "true", "null", "1.5e3", "-2", "name", "Step 1:", "Execution Order:", "Step 2", "AND", "OR", ".",
          "\\", "#", "é", "\x00", "\x0c", "\u2028"]
structured = st.lists(st.sampled_from(TOKENS) | st.text(max_size=4), max_size=40).map("".join)
anything = st.text(max_size=200) | structured


@SETTINGS
@given(text=anything)
def test_parse_module_raises_only_decomp_errors(text):
    try:
        parse_module(text, "fuzz.decomp")
    except DecompError as err:
        _check_error(err, text)


@SETTINGS
@given(text=anything)
def test_parse_fewshot_raises_only_decomp_errors(text):
    try:
        parse_fewshot(text, "fuzz.txt")
    except DecompError as err:
        _check_error(err, text)


@SETTINGS
@given(text=anything)
def test_parse_plan_and_step_line_raise_only_decomp_errors(text):
    for parse in (parse_plan, parse_step_line):
        try:
            parse(text)
        except DecompError as err:
            _check_error(err, text)


def _check_error(err: DecompError, source: str = "") -> None:
    errors = getattr(err, "errors", None) or [err]
    for e in errors:
        assert e.span is not None and e.span.line >= 1 and e.span.column >= 1
        text = e.format()
        for internal in ("Token(", "Traceback", "$END"):
            assert internal not in text or internal in source  # quoting the user's own text is fine
