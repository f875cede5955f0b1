"""`cache_key` takes JSON only (issue 14): a part that is not JSON is refused with its type named,
never hashed through its `repr`, where two different objects (or one object's address reused by
another) would share a key and be served each other's answers."""
import pytest

from decomp.runtime.engine.cache import cache_key


class Opaque:
    """An object whose repr says nothing about what it holds."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return "Opaque()"


@pytest.mark.parametrize("part", [Opaque(1), {1, 2}, b"bytes", object(), 1j])
def test_a_part_that_is_not_json_is_refused_naming_its_type(part):
    with pytest.raises(TypeError, match=f"a part of type {type(part).__qualname__} is not JSON"):
        cache_key({"values": [part]})


def test_objects_that_print_alike_no_longer_share_a_key():
    with pytest.raises(TypeError):
        cache_key({"v": Opaque(1)})  # before: the same key as Opaque(2), both hashed as "Opaque()"


def test_json_parts_still_make_distinct_stable_keys():
    parts = {"kind": "python", "query": "x\ud800", "values": [1, 1.0, True, None, "1", [1], {"a": 1}]}
    assert cache_key(parts) == cache_key(dict(reversed(list(parts.items()))))
    assert len({cache_key({"v": x}) for x in (1, 1.0, True, "1", [1], None, float("nan"))}) == 7
    assert cache_key({"v": (1, 2)}) == cache_key({"v": [1, 2]})  # a tuple is the list JSON makes of it
