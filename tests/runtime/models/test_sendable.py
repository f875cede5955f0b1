"""What leaves the process for a model: text UTF-8 can carry (lone surrogates as U+FFFD)."""
from __future__ import annotations

from decomp.runtime.models.base import sendable


def test_lone_surrogates_become_the_replacement_character_one_for_one():
    text = "odd \ud800 and \udfff\ud800 end"
    sent = sendable(text)
    assert sent == "odd \ufffd and \ufffd\ufffd end" and len(sent) == len(text)
    sent.encode("utf-8")


def test_other_text_is_returned_as_it_is():
    text = "caf\u00e9 \U0001F600 \\ud800 (six characters, not a surrogate)"
    assert sendable(text) is text
