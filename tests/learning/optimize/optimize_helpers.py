"""Small programs for the optimiser's tests: a decomposer over few-shot prompts with a foreach
step, written into a folder, and a fake model that answers all of it."""
from __future__ import annotations

from pathlib import Path

from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

PROMPTS = {
    "split.txt": 'Q: What are the words in "ant bee"?\nA: ["ant", "bee"]\n',
    "letter.txt": 'Q: What is the first letter of "owl"?\nA: "o"\n',
    "join.txt": 'Q: Join ["o", "w"].\nA: "ow"\n',
    "top.txt": ('QC: Take the first letters of "ant bee".\n'
                'QS: [split] What are the words in "ant bee"?\nA: ["ant", "bee"]\n'
                'QS: (foreach) [letter] What is the first letter of "#1"?\nA: ["a", "b"]\n'
                'QS: [join] Join #2.\nA: "ab"\nQS: [EOQ]\n'),
}

DECOMPOSER = """
handler split  = prompt(file="prompts/split.txt")
handler letter = prompt(file="prompts/letter.txt", max_tokens=8)
handler join   = prompt(file="prompts/join.txt")
handler top    = decomposer(file="prompts/top.txt", max_steps=5)
main top
"""

STEPS = [r'[split] What are the words in "\1"?', '(foreach) [letter] What is the first letter of "#1"?',
         "[join] Join #2.", "[EOQ]"]


def patterns() -> list[dict]:
    """A model that decomposes and answers every sub-question right."""
    return [
        {"match": r'^Take the first letters of "([^"]*)"\.', "steps": STEPS},
        {"match": r'words in "(\w+) (\w+)"', "answer": r'["\1", "\2"]'},
        {"match": r'first letter of "(\w)\w*"', "answer": r'"\1"'},
        {"match": r'Join \["(\w)", "(\w)"\]', "answer": r'"\1\2"'},
    ]


def write_program(folder: Path, source: str = DECOMPOSER, prompts: dict[str, str] | None = None,
                  name: str = "prog.decomp") -> Path:
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    for file, text in (prompts or PROMPTS).items():
        (folder / "prompts" / file).write_text(text)
    path = folder / name
    path.write_text(source)
    return path


def traced(path: Path, question: str, model: FakeModel | None = None):
    """The loaded module and the row's trace of one question on the fake model."""
    session = Session(model=model or FakeModel(patterns=patterns()), python_workers=False)
    loaded = session.load(path)
    result = session.run(loaded, {"id": "r1", "question": question})
    assert result.error is None, result.error
    return loaded, result


# ---- a student whose answers depend on the demonstrations it is shown (for letter_cat_llm)
import json  # noqa: E402
import re  # noqa: E402

from benchmarks.letter_cat_oracle import make_rows, respond as oracle  # noqa: E402

_KIND = re.compile(r'What is the (letter at position \d+|last letter) of "')


def student(prompt: str, request: dict) -> str:
    """letter_cat_llm's perfect model for the model "teacher"; for any other, a student that
    answers a str_position question right only when its prompt shows at least two examples of
    the same kind (the same position, or the last letter), else with a wrong letter."""
    answer = oracle(prompt, request)
    if request.get("model") == "teacher" or not prompt.rstrip().endswith("A:"):
        return answer
    questions = [line for line in prompt.splitlines() if line.startswith("Q: ")]
    kind = _KIND.search(questions[-1]) if questions else None
    if kind is None:
        return answer
    shown = sum(1 for line in questions[:-1] if kind.group(1) + " of" in line)
    return answer if shown >= 2 else ' "?"'


def letter_rows(folder: Path, train: int = 10, dev: int = 6, seed: int = 3) -> tuple[Path, Path]:
    rows = make_rows(train + dev, words=3, seed=seed)
    paths = []
    for name, part in (("train", rows[:train]), ("dev", rows[train:])):
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
        paths.append(path)
    return paths[0], paths[1]
