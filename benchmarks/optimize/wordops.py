"""Python handlers of wordops.decomp (the `decomp optimize` benchmark, benchmarks/optimize.py):
the row's question into its sub-questions, and the answers joined. Standard library only, and
nothing imported from beside it, so the program folder can be copied anywhere."""
from __future__ import annotations

import re

_QUESTION = re.compile(r'Apply "(.+?)" to each word of "([^"]*)" and join the results with spaces\.')


def subquestions(query: str) -> list[str]:
    """'Apply "reversed" to each word of "a b c" and join ...' -> one sub-question per word:
    ['What is the reversed of "a"?', ...]."""
    m = _QUESTION.fullmatch(query.strip())
    if m is None:
        raise ValueError(f"not a word-operation question: {query!r}")
    phrase, words = m.groups()
    return [f'What is the {phrase} of "{word}"?' for word in words.split()]


def join(values: list) -> str:
    """values = [the sub-questions' answers]: those answers joined with spaces."""
    answers = values[0] if values else []
    if not isinstance(answers, list):
        answers = [answers]
    return " ".join(str(a) for a in answers)
