"""A fake model for tests, shipped in the package: queued answers, prompt->answer maps,
scripted decomposers, and the history of every request it received.

    model = FakeModel(
        answers=["first reply", "second reply"],          # consumed in order
        mapping={"What are the words in": '["a", "b"]'},  # matched against the last question
        script={"Take the last letters ...": ["[split] ...", "[EOQ]"]},  # decomposer lines
    )

Lookup order for a request: script (when the prompt asks for the next `QS:` line), mapping,
queue, `default`; when nothing matches, `ModelError` names the question it could not answer.

In the step cache a fake model stands for its answers, not only its name (`cache_identity`):
a `fake:answers.json` model by the sha256 of the file's content, an in-memory one by a hash of
its answers, mapping, script, default and scorer as they are at its first request. A callable
answer counts by its code (`code_fingerprint`), not by the values its closure holds: two
closures of one function over different data look alike, so give them different names.

Where a `fake:PATH` file may be: `--model fake:PATH` (and `run_dataset(model="fake:PATH")`) is
the user's own argument, read wherever it points, as any file named on the command line is. A
`.decomp` file's `model NAME = "fake:PATH"` is the program's: the loader resolves PATH from the
program's folder and confines it like `file=` (inside the program's folder, the bundled programs
or a folder allowed with --allow-root). Reading never echoes the file: a file that is not a fake
model's JSON object is named with what is wrong (not JSON, unknown keys), not with its text.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from decomp.handlers.kinds.python import code_fingerprint
from decomp.handlers.plugins import hookimpl
from decomp.runtime.models.base import Completion, Model, ModelError, Request, Score

Answer = str | Callable[[Request], str]
_LAST_QUESTION = re.compile(r"(?:^|\n)(?:QC|Q):[ \t]*([^\n]*)", re.S)


class FakeModel(Model):
    """Deterministic stand-in for a language model."""

    def __init__(self, answers: Iterable[Answer] = (), mapping: Mapping[str, Answer] | None = None,
                 script: Mapping[str, list[str]] | None = None, default: Answer | None = None,
                 name: str = "fake", scorer: Callable[[str, str], float] | None = None):
        self.queue: deque[Answer] = deque(answers)
        self.mapping = dict(mapping or {})
        self.script = {k.strip(): list(v) for k, v in (script or {}).items()}
        self.default = default
        self.name = name
        self.endpoint = name
        self.history: list[Request] = []
        self.replies: list[tuple[str, ...]] = []  # what each completion request got, in order
        self.scorer = scorer or (lambda prompt, continuation: -0.5 * len(continuation.split()))
        self._identity: str | None = None

    def cache_identity(self) -> str:
        """The name and a sha256 of what decides the answers (see the module's docstring),
        fixed at the first request."""
        if self._identity is None:
            what = {"answers": list(self.queue), "mapping": self.mapping, "script": self.script,
                    "default": self.default, "scorer": self.scorer}
            text = json.dumps(what, sort_keys=True, ensure_ascii=False, default=_callable_identity)
            self._identity = f"{self.name}#sha256:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"
        return self._identity

    @property
    def prompts(self) -> list[str]:
        """Every rendered prompt this model was sent, in order."""
        return [r.prompt for r in self.history]

    async def complete(self, request: Request) -> Completion:
        self.history.append(request)
        texts = tuple(self._answer(request) for _ in range(request.n)) if request.n > 1 else (self._answer(request),)
        self.replies.append(texts)
        return Completion(texts, fake_tokens(request.prompt), sum(map(fake_tokens, texts)))

    async def score(self, prompt: str, continuation: str) -> Score:
        """`scorer(prompt, continuation)`; by default -0.5 per whitespace-separated word."""
        self.history.append(Request(prompt + continuation, max_tokens=0))
        return Score(float(self.scorer(prompt, continuation)), max(1, len(continuation.split())))

    def _answer(self, request: Request) -> str:
        found = self._scripted(request) if self.script else None
        if found is None and self.mapping:
            found = self._mapped(request)
        if found is None and self.queue:
            found = self.queue.popleft()
        if found is not None:
            return _apply(found, request)
        if self.default is not None:
            return _apply(self.default, request)
        raise ModelError(f"fake model has no answer for {last_question(request.prompt)!r}")

    def _scripted(self, request: Request) -> Answer | None:
        if not self.script or not request.prompt.rstrip(" ").endswith("QS:"):
            return None
        question, done = _decomposition_state(request.prompt)
        lines = self.script.get(question)
        if lines is None or done >= len(lines):
            return None
        return " " + lines[done]

    def _mapped(self, request: Request) -> Answer | None:
        if not self.mapping:
            return None
        if request.prompt in self.mapping:
            return self.mapping[request.prompt]
        question = last_question(request.prompt)
        if question in self.mapping:
            return self.mapping[question]
        for key in sorted(self.mapping, key=len, reverse=True):
            if key and key in question:
                return self.mapping[key]
        return None

    @classmethod
    def from_file(cls, path: str | Path) -> "FakeModel":
        """Build from a JSON file: {"answers": [...], "mapping": {...}, "script": {...}, "default": ...}."""
        try:
            raw = Path(path).read_bytes()
            data: dict[str, Any] = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError) as err:
            raise ModelError(f"cannot read the fake model file {path}: {err}") from None
        if not isinstance(data, dict):
            raise ModelError(f"{path}: a fake model file holds one JSON object")
        unknown = set(data) - {"answers", "mapping", "script", "default"}
        if unknown:
            raise ModelError(f"{path}: unknown keys {sorted(unknown)} in fake model file")
        model = cls(data.get("answers", ()), data.get("mapping"), data.get("script"), data.get("default"),
                    name=f"fake:{path}")
        model._identity = f"{model.name}#sha256:{hashlib.sha256(raw).hexdigest()}"  # the file as it was read
        return model


def fake_tokens(text: str) -> int:
    """The fake model's token count: one token per 4 characters, rounded up (cheap, like the
    usual rule of thumb for English)."""
    return (len(text) + 3) // 4


def last_question(prompt: str) -> str:
    """The text of the last `Q:` or `QC:` line of a prompt (the whole prompt if none)."""
    found = _LAST_QUESTION.findall(prompt)
    return found[-1].strip() if found else prompt.strip()


def _decomposition_state(prompt: str) -> tuple[str, int]:
    """The question of the last `QC:` block and how many `QS:` lines it already has."""
    block = prompt[prompt.rfind("QC:"):] if "QC:" in prompt else prompt
    first, _, rest = block.partition("\n")
    return first[3:].strip(), len(re.findall(r"(?m)^QS:.*\S", rest))


def _callable_identity(value: Any) -> str:
    """A callable answer or scorer in a fake model's cache identity: its name and code."""
    code = getattr(value, "__code__", None)
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{name}:{code_fingerprint(code)}" if code is not None else name


def _apply(answer: Answer, request: Request) -> str:
    return answer(request) if callable(answer) else answer


class ReplayModel(FakeModel):
    """Answers every prompt from its own few-shot examples, for `decomp run --dry-run`.

    A decomposer prompt (ending in `QS:`) gets the next line of its first example program, then
    `[EOQ]`; a Q/A prompt gets its first example's answer. The calls a row makes this way
    estimate what it costs on a real model. A decomposer asked again, within one row, about
    another question (a recursive program calling itself on a part) replays its shortest
    example instead (the base case), so recursion ends as it would on a real model. Call
    `new_row()` between rows.
    """

    def __init__(self):
        super().__init__(name="dry-run")
        self._first: dict[str, str] = {}  # examples' text -> the row's first question for them

    def new_row(self) -> None:
        """Forget the questions of the row before."""
        self._first.clear()

    def _answer(self, request: Request) -> str:
        from decomp.dsl.errors import DecompError
        from decomp.dsl.parser import parse_fewshot

        head = request.prompt[: max(request.prompt.rfind("\nQC:"), request.prompt.rfind("\nQ:"))]
        try:
            examples = parse_fewshot(head).examples
        except DecompError:
            examples = ()
        if request.prompt.rstrip(" ").endswith("QS:"):
            question, done = _decomposition_state(request.prompt)
            programs = [e for e in examples if e.steps]
            first = self._first.setdefault(head, question)
            program = (programs[0] if first == question else min(programs, key=lambda e: len(e.steps))) \
                if programs else None
            lines = [s.step.text for s in program.steps] if program else []
            return " " + (lines[done] if done < len(lines) else "[EOQ]")
        answer = next((e.answer for e in examples if e.answer is not None), None)
        return " " + (answer.text if answer is not None else '""')


def fake_model(name: str, settings: object = None) -> FakeModel:
    """Factory for `fake:answers.json` model specs (`fake:` alone: a model with no answers)."""
    return FakeModel.from_file(name) if name else FakeModel()


@hookimpl
def register_models(register):
    register("fake", fake_model)
