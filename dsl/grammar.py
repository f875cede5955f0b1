"""Loads grammar.lark once (LALR, positions on) and describes its terminals in plain words."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lark import Lark

START_SYMBOLS = ("module", "fewshot", "step_line", "plan", "type_expr")

# grammar.lark sits beside the dsl package both in a checkout and when installed.
GRAMMAR_PATH = Path(__file__).resolve().parent.parent / "grammar.lark"

_WORDS = {
    "NAME": "a name",
    "STRING": "a string",
    "LONG_STRING": "a string",
    "NUMBER": "a number",
    "REF": "a reference such as #1 or #question",
    "COMPARE": "a comparison (==, !=, <, <=, >, >=, in)",
    "_EOL": "the end of the line",
    "_BLANKS": "a blank line",
    "QS_MARK": "'QS:'",
    "QC_MARK": "'QC:'",
    "Q_MARK": "'Q:'",
    "A_MARK": "'A:'",
    "META_MARK": "'# METADATA:'",
    "OPERATOR": "an operator such as (foreach)",
    "HANDLER_REF": "a handler such as [split]",
    "REST": "text",
    "STEP_MARK": "'Step N:'",
    "ORDER_MARK": "'Execution Order:'",
    "STEP_REF": "a step such as 'Step 1'",
    "_AND": "AND",
    "_OR": "OR",
    "$END": "the end of the file",
}


@lru_cache(maxsize=1)
def parser() -> Lark:
    """The one Lark parser for every entry point, built on first use and cached."""
    return Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        start=list(START_SYMBOLS),
        propagate_positions=True,
        maybe_placeholders=False,
    )


def describe_terminal(name: str) -> str:
    """A terminal's name in the words of the language, never Lark's internal name."""
    if name in _WORDS:
        return _WORDS[name]
    try:
        pattern = parser().get_terminal(name).pattern
    except KeyError:
        return name.lower()
    if pattern.type == "str":
        return f"'{pattern.value}'"
    return name.lower().strip("_")


def describe_expected(names) -> str:
    words = sorted({describe_terminal(n) for n in names})
    if not words:
        return ""
    if len(words) == 1:
        return words[0]
    return "one of: " + ", ".join(words)
