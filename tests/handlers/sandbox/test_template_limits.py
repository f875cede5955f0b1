"""Logical sizes (decomp.handlers.sandbox.template_limits): shared items count each time they are reached,
sizes are remembered by what a render builds, a value holding itself is refused, and the
physical size tells real memory from sharing."""
from __future__ import annotations

import pytest
from jinja2.utils import Namespace

from decomp.handlers.sandbox.template_limits import (MAX_TEXT, TemplateLimitError, logical_size, measured, physical_size,
                                             sized)


def test_a_shared_item_counts_each_time_it_is_reached():
    text = "x" * 100
    value = [text]
    for _ in range(10):
        value = [value, value]
    assert logical_size("abc") == 3 and logical_size([text, text]) == 2 + 200
    assert logical_size(value) == (1 + 100) * 2 ** 10 + (2 ** 10 - 1) * 2  # each list: its items, one more each
    assert physical_size(value) == 1 + 100 + 10 * 2  # every object once
    for _ in range(80):
        value = [value, value]
    assert logical_size(value) > MAX_TEXT  # counted no further than the cap: a 2**90 tree measured at once


def test_a_built_value_remembers_its_size_unless_it_holds_a_namespace():
    built = sized(["ab", ("c", 1)], "a list")
    assert type(built).__name__ == "list" and built == ["ab", ("c", 1)] and built._size == 2 + 2 + 2 + 1 + 2
    ns = Namespace(v="x")
    holding = sized([ns], "a list")
    assert holding._size is None
    ns["v"] = "y" * 500
    assert logical_size(holding) > 500  # measured again: the namespace changed


def test_over_the_limit_only_what_was_there_already_passes():
    real = [f"{i:08}" * 20 for i in range(8000)]  # 1.3M characters, none of them shared
    with pytest.raises(TemplateLimitError, match="would be over 1,000,000 characters"):
        measured(list(real), "a list")  # built from nothing that was there
    assert measured(real[::-1], "a list", source=real) > MAX_TEXT  # no bigger than what it came from
    with pytest.raises(TemplateLimitError, match="an item it holds more than once counts each time"):
        measured([real, real], "a list", source=real)


def test_a_value_that_holds_itself_is_refused():
    ns = Namespace()
    ns["a"] = [ns]
    with pytest.raises(TemplateLimitError, match="holds itself"):
        logical_size([ns])
