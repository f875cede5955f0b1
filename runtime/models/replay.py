"""The replay model: a stand-in that answers every prompt from the prompt's own few-shot
examples, offline and at once. `decomp run --dry-run` and `decomp optimize`'s projection run on
it to count the model calls a real run would make and estimate their tokens.

Tokens are estimated, never counted by a tokenizer: `estimated_tokens` is the text's characters
/ 4, rounded up (the usual rule of thumb for English text).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from decomp.dsl.errors import DecompError
from decomp.dsl.parser import parse_fewshot
from decomp.runtime.models.base import Completion, Model, Request, Score

if TYPE_CHECKING:  # pragma: no cover
    from decomp.handlers.soft_prompts import SoftPrompt

_STEP_LINE = re.compile(r"(?m)^QS:.*\S")


def estimated_tokens(text: str) -> int:
    """The tokens `text` is taken to cost: one per 4 characters, rounded up."""
    return (len(text) + 3) // 4


def decomposition_state(prompt: str) -> tuple[str, int]:
    """The question of a decomposer prompt's last `QC:` block and how many `QS:` lines it
    already has."""
    block = prompt[prompt.rfind("QC:"):] if "QC:" in prompt else prompt
    first, _, rest = block.partition("\n")
    return first[3:].strip(), len(_STEP_LINE.findall(rest))


class ReplayModel(Model):
    """Answers every prompt from its own few-shot examples, for `decomp run --dry-run`.

    A decomposer prompt (ending in `QS:`) gets the next line of its first example program, then
    `[EOQ]`; a Q/A prompt gets its first example's answer. The calls a row makes this way
    estimate what it costs on a real model. A decomposer asked again, within one row, about
    another question (a recursive program calling itself on a part) replays its shortest
    example instead (the base case), so recursion ends as it would on a real model. Call
    `new_row()` between rows. `history` holds every request, `replies` what each got.
    """

    def __init__(self):
        self.name = self.endpoint = "dry-run"
        self.history: list[Request] = []
        self.replies: list[tuple[str, ...]] = []
        self._first: dict[str, str] = {}  # examples' text -> the row's first question for them

    def new_row(self) -> None:
        """Forget the questions of the row before."""
        self._first.clear()

    async def complete(self, request: Request) -> Completion:
        self.history.append(request)
        texts = (self._answer(request),) * max(1, request.n)
        self.replies.append(texts)
        return Completion(texts, estimated_tokens(request.prompt), sum(map(estimated_tokens, texts)))

    async def score(self, prompt: str, continuation: str, soft_prompt: SoftPrompt | None = None) -> Score:
        """-0.5 per whitespace-separated word of `continuation`."""
        self.history.append(Request(prompt + continuation, max_tokens=0))
        words = len(continuation.split())
        return Score(-0.5 * words, max(1, words))

    def _answer(self, request: Request) -> str:
        head = request.prompt[: max(request.prompt.rfind("\nQC:"), request.prompt.rfind("\nQ:"))]
        try:
            examples = parse_fewshot(head).examples
        except DecompError:
            examples = ()
        if request.prompt.rstrip(" ").endswith("QS:"):
            return " " + self._next_step(head, request.prompt, examples)
        answer = next((e.answer for e in examples if e.answer is not None), None)
        return " " + (answer.text if answer is not None else '""')

    def _next_step(self, head: str, prompt: str, examples) -> str:
        """The next line of the example program this row's decomposer replays, else `[EOQ]`."""
        question, done = decomposition_state(prompt)
        programs = [e for e in examples if e.steps]
        first = self._first.setdefault(head, question)
        program = (programs[0] if first == question else min(programs, key=lambda e: len(e.steps))) \
            if programs else None
        lines = [s.step.text for s in program.steps] if program else []
        return lines[done] if done < len(lines) else "[EOQ]"
