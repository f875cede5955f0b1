"""Kind `decomposer`: an LLM writes the program one `QS:` line at a time (DecomP).

Loop: render the few-shot examples, `QC: <question>` and the steps so far (`QS: ...` and
`A: <json>`), end with `QS:`, ask the model for one line, parse it with the grammar, run it,
append its answer; stop at `[EOQ]` (the answer is the last step's) or after `max_steps`.
"""
from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from decomp.dsl import nodes
from decomp.dsl.answer_types import Constraint
from decomp.dsl.checker import check_fewshot
from decomp.dsl.errors import CheckError, DecompError, HandlerError
from decomp.dsl.parser import parse_step_line
from decomp.dsl.values import Failed, json_text, outcome
from decomp.handlers.base import Call, Handler, Options, step_calls
from decomp.handlers.conversation import Message, decomposer_turns, fewshot_conversation
from decomp.handlers.kinds.fewshot import check_file, examples_text, fewshot_error, load_fewshot, nearest_examples


#: How many choices of `nearest` examples a decomposer keeps the turns of.
_KEPT_CHOICES = 1024


class DecomposerOptions(Options):
    file: str | None = None
    examples: str | None = None
    model: str | None = None
    max_steps: int = Field(10, ge=1)
    max_depth: int | None = Field(None, ge=1)
    max_tokens: int = Field(200, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    #: Show only the `nearest` examples most similar to the question, the closest last.
    nearest: int | None = Field(None, ge=1)
    #: Decode each line under `line_constraint` (false: freely; the line is still parsed).
    constrain: bool = True
    #: The system message on a chat model; on a completion model the text opens with it.
    instructions: str | None = None


class DecomposerHandler(Handler):
    """Few-shot decomposer: the model emits the next sub-query until `[EOQ]`."""

    kind = "decomposer"

    Options = DecomposerOptions
    nests = True
    calls_any = True
    cacheable = False

    def __init__(self, *args):
        super().__init__(*args)
        self._fewshot: nodes.FewShot | None = None
        self._head: str | None = None
        self._conversation: tuple[Message, ...] | None = None
        #: the turns of each choice of `nearest` examples made so far (by the examples' ids)
        self._nearest_turns: dict[tuple[int, ...], tuple[Message, ...]] = {}
        self._last_choice: tuple[str, list[nodes.Example]] | None = None
        #: the line constraint by answers so far (the examples and the module are fixed once loaded)
        self._lines: dict[int, Constraint] = {}

    @property
    def fewshot(self) -> nodes.FewShot:
        if self._fewshot is None:
            self._fewshot = load_fewshot(self)
        return self._fewshot

    def check(self) -> list[CheckError]:
        errors = check_file(self)
        if not self.options.file and not self.options.examples:
            errors.append(CheckError(f"[{self.name}] needs file=... or examples=...", self.error_span()))
        if errors:
            return errors
        try:
            examples = self.fewshot
        except (DecompError, OSError) as err:
            return fewshot_error(self, err)
        if not examples.is_decomposition:
            return [CheckError(f"the examples of [{self.name}] have no QC:/QS: programs", self.error_span("file"))]
        return []

    def _examples_or_none(self) -> nodes.FewShot | None:
        """The examples, or None when they cannot be read (check() says why)."""
        try:
            return self.fewshot
        except (DecompError, OSError):
            return None

    def check_references(self, handlers: set[str]) -> list[CheckError]:
        examples = self._examples_or_none()
        return [] if examples is None else check_fewshot(examples, handlers)

    def calls(self) -> dict[str, list[nodes.Span]]:
        examples = self._examples_or_none()
        return {} if examples is None else step_calls(s.step for e in examples.examples for s in e.steps)

    def render(self, question: str, history: list[tuple[nodes.Step, Any]]) -> str:
        """The prompt asking for the next `QS:` line."""
        lines = [f"QC: {question}"]
        for step, answer in history:
            lines += [f"QS: {step.text}", f"A: {json_text(answer)}"]
        return self._examples_for(question) + "\n".join(lines) + "\nQS:"

    def render_messages(self, question: str, history: list[tuple[nodes.Step, Any]]) -> tuple[Message, ...]:
        """The same prompt as a conversation (`decomp.handlers.conversation`): the examples'
        turns, then the question and the steps so far."""
        return decomposer_turns(self._conversation_for(question), question,
                                [(step.text, json_text(answer)) for step, answer in history])

    def _chosen(self, question: str) -> list[nodes.Example] | None:
        """The `nearest` examples for `question`, or None (all of them). The last question's
        are kept: the text and the turns of one row ask for them both."""
        if self.options.nearest is None:
            return None
        last = self._last_choice
        if last is None or last[0] != question:
            last = self._last_choice = (question, nearest_examples(self.fewshot.examples, question,
                                                                   self.options.nearest))
        return last[1]

    def _examples_for(self, question: str) -> str:
        """The examples shown before the question: all of them as written, or the `nearest`."""
        opening = f"{self.options.instructions}\n\n" if self.options.instructions else ""
        chosen = self._chosen(question)
        if chosen is not None:
            return opening + examples_text(chosen)
        if self._head is None:
            self._head = opening + self.fewshot.text.strip("\n") + "\n\n"
        return self._head

    def _conversation_for(self, question: str) -> tuple[Message, ...]:
        chosen = self._chosen(question)
        if chosen is not None:  # the same examples come back for similar questions: made once
            key = tuple(id(example) for example in chosen)
            found = self._nearest_turns.get(key)
            if found is None:
                if len(self._nearest_turns) >= _KEPT_CHOICES:
                    self._nearest_turns.clear()
                found = self._nearest_turns[key] = fewshot_conversation(chosen, self.options.instructions)
            return found
        if self._conversation is None:
            self._conversation = fewshot_conversation(self.fewshot.examples, self.options.instructions)
        return self._conversation

    def _render_next(self, prompt: str, step: nodes.Step, answer: Any) -> str:
        """`prompt` extended by one answered step (the same text `render` would give)."""
        return f"{prompt} {step.text}\nA: {json_text(answer)}\nQS:"

    async def run(self, call: Call) -> Any:
        """Ask for `QS:` lines and run each until `[EOQ]`; the answer (and outcome) is the last step's."""
        answers: dict[int, Any] = {}
        ok = True
        prompt = self.render(call.query, [])
        turns = self.render_messages(call.query, [])  # sent instead of the text to a chat model
        limit = min(self.options.max_steps, call.max_steps or self.options.max_steps)
        for number in range(1, limit + 1):
            step = await self._next_step(call, (prompt, turns), number)
            if step.is_end:
                last = answers[number - 1] if answers else None
                return last if ok else Failed(last)
            answers[number], ok = outcome(await call.run_step(step, answers))
            prompt = self._render_next(prompt, step, answers[number])
            turns += (Message("assistant", step.text), Message("user", json_text(answers[number])))
        raise HandlerError(f"took {limit} steps without [EOQ] (raise max_steps?)", call.span)

    def line_constraint(self, number: int) -> Constraint | None:
        """What the model's next `QS:` line may be (`constrain=true`, the default): `[EOQ]`, or
        an operator its examples use, then a handler of its module that its examples name, then
        a sub-query that does not open like another handler or operator (`[name` or `(name`;
        `[#1, #2]` is fine) and refers only to answers so far (`#1`..`#n-1`; up to nine are told
        apart). A regular expression, so every backend that
        takes one can apply it."""
        if not self.options.constrain:
            return None
        answers = min(number - 1, 9)  # the regex tells #1..#9 apart, so ten constraints at most
        if answers not in self._lines:
            self._lines[answers] = Constraint(regex=step_line_regex(self._operators(), self._handlers(), answers))
        return self._lines[answers]

    def _operators(self) -> list[str]:
        examples = self._examples_or_none()
        steps = [] if examples is None else [s.step for e in examples.examples for s in e.steps]
        return sorted({s.operator for s in steps if s.operator})

    def _handlers(self) -> list[str]:
        module = self.ctx.module
        names = set(self.calls())
        return sorted(names & set(module.handlers)) if module is not None else sorted(names)

    async def _next_step(self, call: Call, prompt: tuple[str, tuple[Message, ...] | None], number: int) -> nodes.Step:
        opts = self.options
        texts = await call.complete(prompt[0], model=opts.model, stop=("\n",), max_tokens=opts.max_tokens,
                                    temperature=opts.temperature, constraint=self.line_constraint(number),
                                    messages=prompt[1])
        line = texts[0].strip()
        try:
            step = parse_step_line(line, f"<[{self.name}] step {number}>")
        except DecompError as err:
            raise HandlerError(f"step {number}: the model's line does not parse ({err.message}): {line!r}",
                               call.span) from err
        if step.handler is None:
            raise HandlerError(f"step {number}: the model's line names no handler: {line!r}", call.span)
        return step


def step_line_regex(operators: list[str], handlers: list[str], answers: int) -> str:
    """The regular expression of a decomposer's next line after `QS:` (see `line_constraint`):
    `answers` answers exist so far."""
    ops = "|".join(re.escape(f"({o})") for o in operators)
    names = "|".join(re.escape(f"[{h}]") for h in handlers)
    ref = f"#[1-{min(answers, 9)}]" if answers else None
    refs = f"|{ref}" if ref else ""
    # a bracket may open the text, but not as a handler or operator would: `[#1, #2]`, `("a")`
    opened = rf"[^A-Za-z_\]\n#]{refs}"
    first = rf"[^\n#(\[]{refs}|\[(?:{opened})|\((?:{opened})"
    text = rf"(?:{first})(?:[^\n#]{refs})*"
    step = (rf"(?:(?:{ops}) )?" if ops else "") + (rf"(?:{names}) {text}" if names else "")
    return r" ?(?:\[EOQ\]" + (f"|{step})" if step else ")")
