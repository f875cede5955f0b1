"""Python handlers of the symbolic letter-concatenation program (letter_cat_symbolic.decomp)."""
from __future__ import annotations

import re

_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
_DELIMITERS = {
    "space": " ", "comma": ",", "semi-colon": ";", "semicolon": ";", "colon": ":", "hyphen": "-",
    "dash": "-", "period": ".", "full stop": ".", "slash": "/", "underscore": "_", "pipe": "|",
}


def position(query: str) -> int:
    """1-based letter position asked for ("position 3", "the third", "last" -> -1)."""
    found = re.search(r"position\s+(\d+)", query)
    if found:
        return int(found.group(1))
    for word, number in _ORDINALS.items():
        if re.search(rf"\b{word}\b", query):
            return number
    raise ValueError(f"no letter position in {query!r}")


def delimiter(query: str) -> str:
    """The joining text asked for ("using a space" -> " "); none asked for -> ""."""
    found = re.search(r"using (?:an? |the )?([a-z -]+?)[.?]?$", query.strip())
    if not found:
        return ""
    name = found.group(1).strip()
    if name not in _DELIMITERS:
        raise ValueError(f"unknown delimiter {name!r}")
    return _DELIMITERS[name]


def letter_at(values: list) -> str:
    """values = [position, word]: the letter of `word` at that 1-based position (-1 = last)."""
    pos, word = values
    index = pos - 1 if pos > 0 else pos
    if not -len(word) <= index < len(word):
        raise ValueError(f"{word!r} has no letter at position {pos}")
    return word[index]


def join(values: list) -> str:
    """values = [letters, delimiter]."""
    letters, sep = values
    return sep.join(letters)
