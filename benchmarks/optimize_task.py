"""The task and the test model of the `decomp optimize` benchmark (benchmarks/optimize.py, and
its DSPy side benchmarks/dspy_optimize.py). Standard library only.

**The task.** Eight word operations, each named by a fixed phrase (`OPS`). A row asks for one
of them on three words:

    Apply "reversed" to each word of "house river table" and join the results with spaces.
    -> "esuoh revir elbat"

and both programs (benchmarks/optimize/wordops.decomp, and the DSPy module) split it, in
Python, into three sub-questions answered by the model one at a time,

    What is the reversed of "house"?  ->  "esuoh"

then join the answers with spaces. Every word of `WORDS` is changed by every operation (no
palindromes, no word whose letters are already in order, each has a vowel and a consonant, all
lower case: decomp's `em` ignores case, so no operation is a change of case), so a model that
answers the word unchanged is wrong on every sub-question.

**The test model**, `respond(prompt, request_json)`, for the mock server
(`--responder benchmarks.optimize_task:respond`). It reads the LAST sub-question of the request
(`SUB_QUESTION`) and the sub-questions shown before it with their answers, the demonstrations:
in a completions prompt (decomp: the few-shot text, then `Q: <sub-question>` and `A:`) those
earlier in the prompt; in a DSPy ChatAdapter chat request (demonstrations are user/assistant
message pairs before the last user message, which holds the `[[ ## question ## ]]` input) those
of the earlier user messages that have an assistant reply. The requested model
(`request_json["model"]`) decides:

* `teacher` always answers right;
* `student` answers right only when a demonstration of the same operation is in the request,
  else it answers the word unchanged (wrong).

A completions reply is the answer as a JSON string (` "esuoh"`, what decomp's prompt handler
parses); a chat reply is in the ChatAdapter's format (`[[ ## answer ## ]]`, the value,
`[[ ## completed ## ]]`), for the output field the request asks for. Anything else: "".

A whole row asked at once (the top-level question, as DSPy's LabeledFewShot puts rows into a
sub-question predictor's demos) is no sub-question: it is neither answered nor counted as a
demonstration.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Callable

RESPONDER = "benchmarks.optimize_task:respond"
VOWELS = frozenset("aeiou")


def _consonants(word: str) -> str:
    return "".join(c for c in word if c not in VOWELS)


def _vowels(word: str) -> str:
    return "".join(c for c in word if c in VOWELS)


#: The operations, by the phrase a question names them with.
OPS: dict[str, Callable[[str], str]] = {
    "reversed": lambda w: w[::-1],
    "doubled": lambda w: w + w,
    "first letter": lambda w: w[0],
    "last letter": lambda w: w[-1],
    "length": lambda w: str(len(w)),
    "sorted letters": lambda w: "".join(sorted(w)),
    "consonants": _consonants,
    "vowels": _vowels,
}
KINDS = tuple(OPS)

#: 60 common lower-case words that every operation changes.
WORDS = (
    "apple", "house", "river", "table", "window", "garden", "letter", "market", "silver", "orange",
    "planet", "winter", "summer", "forest", "castle", "bridge", "candle", "pocket", "rabbit", "yellow",
    "purple", "mirror", "ticket", "button", "pencil", "basket", "dragon", "island", "jacket", "kitten",
    "ladder", "monkey", "needle", "parrot", "rocket", "saddle", "tunnel", "velvet", "wallet", "zipper",
    "cloud", "stone", "grape", "lemon", "tiger", "horse", "sheep", "train", "paper", "water",
    "bread", "chair", "snake", "plate", "spoon", "money", "night", "music", "story", "sugar",
)

SUB_QUESTION = re.compile(r'What is the (.+?) of "([^"]*)"\?')
_ROW_QUESTION = re.compile(r'Apply "(.+?)" to each word of "([^"]*)" and join the results with spaces\.')
_OUTPUT = re.compile(r"starting with the field `\[\[ ## (\w+) ## \]\]`")  # as in dspy_oracle.py


# ---------------------------------------------------------------- questions and rows
def sub_question(phrase: str, word: str) -> str:
    return f'What is the {phrase} of "{word}"?'


def row_question(phrase: str, words: list[str]) -> str:
    return f'Apply "{phrase}" to each word of "{" ".join(words)}" and join the results with spaces.'


def parse_row_question(question: str) -> tuple[str, list[str]]:
    """(the operation's phrase, the words) of a row's question."""
    m = _ROW_QUESTION.fullmatch(question)
    if m is None or m.group(1) not in OPS:
        raise ValueError(f"not a word-operation question: {question!r}")
    return m.group(1), m.group(2).split()


def kind_of(question: str) -> str:
    """The operation a row's question asks for."""
    return parse_row_question(question)[0]


def sub_questions(question: str) -> list[str]:
    """A row's question as its sub-questions, one per word (what wordops.py's `subquestions`
    does for decomp, and the DSPy module's Python for DSPy)."""
    phrase, words = parse_row_question(question)
    return [sub_question(phrase, w) for w in words]


def expected(question: str) -> str:
    """The right answer to a row's question."""
    phrase, words = parse_row_question(question)
    return " ".join(OPS[phrase](w) for w in words)


def make_rows(kinds: dict[str, int] | int, seed: int = 0, *, prefix: str = "row", words: int = 3,
              avoid: set[str] | None = None) -> list[dict]:
    """Rows {"id", "question", "answer"}: `kinds` rows of each kind named (phrase ->
    count), or an int n: n rows cycling through the kinds in `KINDS` order (`balanced(n)`), in
    a shuffled order (so the first rows of a file are not all of one kind). Words are drawn
    (distinct within a row) by a generator seeded with `seed`; a question in `avoid` (which is
    then updated) or already drawn is drawn again, so no question repeats."""
    counts = balanced(kinds) if isinstance(kinds, int) else kinds
    unknown = sorted(set(counts) - set(OPS))
    if unknown:
        raise ValueError(f"unknown kinds {unknown}; known: {', '.join(KINDS)}")
    rng = random.Random(seed)
    plan = [k for k, n in counts.items() for _ in range(n)]
    rng.shuffle(plan)
    seen = avoid if avoid is not None else set()
    rows = []
    for i, kind in enumerate(plan):
        while True:
            question = row_question(kind, rng.sample(WORDS, words))
            if question not in seen:
                break
        seen.add(question)
        rows.append({"id": f"{prefix}{i}", "question": question, "answer": expected(question)})
    return rows


def balanced(n: int) -> dict[str, int]:
    """n rows spread over the kinds as evenly as possible (the first kinds one more)."""
    return {k: n // len(KINDS) + (i < n % len(KINDS)) for i, k in enumerate(KINDS)}


def make_splits(train: int = 32, dev: int = 16, test: int = 32, seed: int = 0) -> dict[str, list[dict]]:
    """Train, dev and test rows, each split balanced over the kinds, no question in two splits
    (one generator for all three, seeded with `seed`)."""
    seen: set[str] = set()
    return {name: make_rows(balanced(n), seed * 1000 + i, prefix=f"{name}-", avoid=seen)
            for i, (name, n) in enumerate((("train", train), ("dev", dev), ("test", test)))}


def write_splits(folder: str | Path, train: int = 32, dev: int = 16, test: int = 32, seed: int = 0) -> dict[str, Path]:
    """`make_splits` written as FOLDER/train.jsonl, dev.jsonl, test.jsonl: {split: path}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in make_splits(train, dev, test, seed).items():
        path = paths[name] = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths


# ---------------------------------------------------------------- the test model
def respond(prompt: str, request_json: dict | None = None) -> str:
    """The test model's reply to one request to the mock server ("" for one it does not know)."""
    request = request_json or {}
    model = str(request.get("model", ""))
    messages = request.get("messages")
    if isinstance(messages, list):
        found = _chat_question(messages)
        if found is None:
            return ""
        (phrase, word), demos, text = found
        value = _answer(model, phrase, word, demos)
        wanted = _OUTPUT.search(text)
        if value is None or wanted is None:
            return ""
        return f"[[ ## {wanted.group(1)} ## ]]\n{value}\n\n[[ ## completed ## ]]"
    asked = SUB_QUESTION.findall(prompt if isinstance(prompt, str) else "")
    if not asked:
        return ""
    value = _answer(model, *asked[-1], {phrase for phrase, _ in asked[:-1]})
    return "" if value is None else " " + json.dumps(value)


def demo_kinds(request_json: dict, prompt: str = "") -> set[str]:
    """The phrases of the demonstrations in a request (for tests)."""
    messages = request_json.get("messages")
    if isinstance(messages, list):
        found = _chat_question(messages)
        return set() if found is None else found[1]
    return {phrase for phrase, _ in SUB_QUESTION.findall(prompt)[:-1]}


def _answer(model: str, phrase: str, word: str, demos: set[str]) -> str | None:
    op = OPS.get(phrase)
    if op is None:
        return None
    if model == "teacher" or (model == "student" and phrase in demos):
        return op(word)
    if model == "student":
        return word
    return None


def _chat_question(messages: list) -> tuple[tuple[str, str], set[str], str] | None:
    """(the last user message's last sub-question, the demonstrations' phrases, that message's
    text), or None when the last user message holds no sub-question."""
    texts = [(m.get("role"), _content(m)) for m in messages if isinstance(m, dict)]
    last = max((i for i, (role, _) in enumerate(texts) if role == "user"), default=None)
    if last is None:
        return None
    asked = SUB_QUESTION.findall(texts[last][1])
    if not asked:
        return None
    demos = {phrase for i, (role, text) in enumerate(texts[:last])
             if role == "user" and i + 1 < last and texts[i + 1][0] == "assistant"
             for phrase, _ in SUB_QUESTION.findall(text)}
    return asked[-1], demos, texts[last][1]


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
