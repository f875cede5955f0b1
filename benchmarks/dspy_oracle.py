"""A perfect model for the DSPy version of letter_cat (benchmarks/dspy_critical_path.py).

`respond(prompt, request_json)` reads the last user message of a DSPy `ChatAdapter` request:
its input fields (`[[ ## name ## ]]` followed by the value) and the output field it asks for
(`starting with the field `[[ ## name ## ]]``), and answers in the adapter's format:

    [[ ## name ## ]]
    value

    [[ ## completed ## ]]

Output fields (the four signatures of the DSPy program):

* `next_step`: the decomposer; `split`, `letters`, `merge`, then `finish`, chosen by how many
  steps the JSON list `done_steps` already holds;
* `words`: the quoted words of `question` as a JSON list;
* `letter`: the letter of `word` at the position `question` asks for;
* `answer`: `letters` (a JSON list) joined with the delimiter `question` asks for.

The mock server imports it as `benchmarks.dspy_oracle:respond` in its child process, with the
repository root on PYTHONPATH; it needs the standard library only (no `decomp`, no `dspy`).
"""
from __future__ import annotations

import json
import re

from benchmarks.letter_cat_oracle import DELIMITERS

RESPONDER = "benchmarks.dspy_oracle:respond"
STEPS = ("split", "letters", "merge", "finish")

_QUESTION = re.compile(r'Take the (?:letters at position (\d+)|last letters) of the words in "([^"]*)" '
                       r"and concatenate them using an? ([a-z-]+)\.")
_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.S)
_OUTPUT = re.compile(r"starting with the field `\[\[ ## (\w+) ## \]\]`")


def respond(prompt: str, request_json: dict | None = None) -> str:
    """The ChatAdapter reply to a DSPy request ("" for a request it does not know)."""
    text = _last_user_message(request_json) if request_json else prompt
    wanted = _OUTPUT.search(text)
    if wanted is None:
        return ""
    name = wanted.group(1)
    value = answer(name, dict(_FIELD.findall(text[:wanted.start()])))
    return "" if value is None else f"[[ ## {name} ## ]]\n{value}\n\n[[ ## completed ## ]]"


def answer(output: str, fields: dict[str, str]) -> str | None:
    """The value of output field `output` given the input fields' texts (None: unknown)."""
    m = _QUESTION.fullmatch(fields.get("question", "").strip())
    if m is None:
        return None
    position, words, delimiter = m.groups()
    if output == "next_step":
        return STEPS[min(len(json.loads(fields.get("done_steps") or "[]")), len(STEPS) - 1)]
    if output == "words":
        return json.dumps(words.split())
    if output == "letter":
        word = fields.get("word", "").strip()
        return word[int(position) - 1 if position else -1] if word else None
    if output == "answer":
        return DELIMITERS[delimiter].join(json.loads(fields.get("letters") or "[]"))
    return None


def _last_user_message(request: dict) -> str:
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else ""
    return ""
