"""Python handlers of the letter-concatenation programs: the symbolic program (letter_cat_symbolic.decomp)
and the answers to the sub-questions the letter_cat decomposer writes (letter_cat.decomp)."""
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


# ---- the sub-questions of the letter_cat decomposer's programs (prompts/letter_cat_decomp.txt)
_QUOTED = re.compile(r'"([^"]*)"')


def _quoted(query: str) -> str:
    found = _QUOTED.search(query)
    if found is None:
        raise ValueError(f"no quoted text in {query!r}")
    return found.group(1)


def words(query: str) -> list[str]:
    """'What are the words in "Ada King"?' -> ["Ada", "King"]."""
    return _quoted(query).split()


def letter(query: str) -> str:
    """'What is the letter at position 2 of "Ada"?' -> "d"; 'What is the last letter of "Ada"?' -> "a"."""
    return letter_at([position(query), _quoted(query)])


def concatenate(query: str, values: list) -> str:
    """'Concatenate #2 using a comma.' with #2 = ["a", "b"] -> "a,b" (no delimiter named: "ab")."""
    letters = values[0] if values and isinstance(values[0], list) else words(query)
    return delimiter(query).join(str(item) for item in letters)
