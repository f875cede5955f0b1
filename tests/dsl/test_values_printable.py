"""`printable` (dsl/values.py): text that can always be printed or written, read back
unambiguously: a literal backslash-u-d800 and a lone surrogate never print alike (issue 14)."""
import json
import re

from hypothesis import given
from hypothesis import strategies as st

from decomp.dsl.values import printable, storable_json

#: The inverse of the documented scheme: `\\` is one backslash, `\uXXXX` one lone surrogate.
_ESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4})")


def read_back(shown: str) -> str:
    return _ESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)), shown)


def test_a_literal_escape_and_a_surrogate_print_differently():
    literal, surrogate = "a\\ud800b", "a\ud800b"
    assert printable(literal) == "a\\\\ud800b" and printable(surrogate) == "a\\ud800b"
    assert printable(literal) != printable(surrogate)


def test_text_without_backslash_or_surrogate_is_unchanged():
    for text in ("plain", "Lougerière", "tab\there", "", "日本語 \u2028"):
        assert printable(text) is text or printable(text) == text


PIECES = st.lists(st.sampled_from(["a", "\\", "\\\\", "u", "d800", "\\u", "\ud800", "\udfff", "\udc80", "é", "0"]))


@given(PIECES.map("".join))
def test_printable_text_is_writable_and_reads_back_exactly(text):
    shown = printable(text)
    shown.encode("utf-8")  # never a UnicodeEncodeError
    assert read_back(shown) == text


@given(PIECES.map("".join), PIECES.map("".join))
def test_two_texts_print_alike_only_when_equal(one, two):
    assert (printable(one) == printable(two)) == (one == two)


@given(st.recursive(st.none() | st.booleans() | st.integers() | PIECES.map("".join),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(PIECES.map("".join), inner, max_size=3),
                    max_leaves=10))
def test_storable_json_still_round_trips(value):
    text = storable_json(value)
    text.encode("utf-8")
    assert json.loads(text) == paired(value)


def paired(value):
    """`value` with each high surrogate followed by a low one read as the character the two
    encode: JSON has no way to tell "\\ud800\\udfff" from U+103FF (documented by storable_json)."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, list):
        return [paired(v) for v in value]
    if isinstance(value, dict):
        return {paired(k): paired(v) for k, v in value.items()}
    return value
