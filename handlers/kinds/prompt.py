"""Kind `prompt`: a few-shot prompt (Q:/A: pairs or QC:/QS: examples) or a sandboxed Jinja template.

Few-shot rendering: the examples as written, a blank line, the `context` input if asked for,
then `Q: <query>` and `A:` (or `QC: <query>` and `QS:` when the examples are QC-style) and the
model completes the line. Templates see `query`, `values`, `inputs` and each input by name,
with StrictUndefined: a missing variable is an error, not an empty string. A template renders in
`decomp.handlers.sandbox.templates.JINJA` (bounded sizes, output, loops and operators) off the event
loop, within the handler's time limit (`timeout=` seconds; not written: the run's
`--handler-timeout`), where the render stops itself; and so does `answer_regex` on the model's
output. `decomp check` warns about a template whose output can grow without bound.
`soft_prompt=FILE` puts a trained soft prompt before the rendered prompt (local model only:
see `decomp.handlers.kinds.soft_prompt_option`).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import regex
from jinja2 import TemplateError
from pydantic import Field

from decomp.dsl.answer_types import ANY, Constraint, Type, decoding, infer
from decomp.dsl.errors import CheckError, CheckWarning, DecompError, HandlerError
from decomp.dsl.nodes import Span
from decomp.dsl.parser import read_text
from decomp.dsl.repair import fit
from decomp.dsl.values import Failed, json_text, parse_output
from decomp.handlers.base import Call, Handler, Options
from decomp.handlers.conversation import Message, fewshot_conversation, role_marker, split_roles, with_query, with_system
from decomp.handlers.kinds.fewshot import check_file, fewshot_error, load_fewshot
from decomp.handlers.kinds.soft_prompt_option import handler_soft_prompt, soft_prompt_problems, soft_prompt_warnings
from decomp.handlers.sandbox.template_growth import growth_warnings
from decomp.handlers.kinds.tools import with_tools
from decomp.handlers.sandbox.templates import JINJA, RENDER_GRACE

__all__ = ["JINJA", "PromptHandler", "PromptOptions"]

#: A prompt in both forms: the text a completion model continues, the messages a chat model gets.
Prompt = tuple[str, "tuple[Message, ...] | None"]


class PromptOptions(Options):
    file: str | None = None
    text: str | None = None
    template: bool | None = None
    model: str | None = None
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(200, ge=1)
    stop: list[str] = ["\n"]
    n: int = Field(1, ge=1)
    answer_regex: str | None = None
    context: str | None = None
    timeout: float | None = None
    soft_prompt: str | None = None
    #: With `returns=`: how many times to ask again, showing the model why its answer does not fit.
    retries: int = Field(0, ge=0)
    #: With `returns=` and n > 1: "majority" answers the most frequent answer that fits (ties:
    #: the one sampled first).
    vote: Literal["majority"] | None = None
    #: The system message on a chat model; on a completion model the text opens with it.
    instructions: str | None = None
    #: Handlers of this file the model may call as tools (chat models; see `decomp.handlers.kinds.tools`).
    tools: list[str] = []
    #: The most rounds of tool calls before the model must answer.
    max_tool_rounds: int = Field(4, ge=1)


def source_problems(handler: Handler, what: str = "") -> list[CheckError]:
    """The check of a kind whose text comes from `file=` or `text=`: one of them, and the file there."""
    errors = check_file(handler)
    if not handler.options.file and handler.options.text is None:
        errors.append(CheckError(f"[{handler.name}] needs file=... or text=...{what}", handler.error_span()))
    return errors


def source_text(handler: Handler) -> str:
    """The text of `file=` (from the handler's folder) or `text=`."""
    return read_text(handler.ctx.resolve(handler.options.file)) if handler.options.file else handler.options.text


def template_error(handler: Handler, err: Exception) -> list[CheckError]:
    """A template that does not compile, at its `file=` or `text=` option."""
    return [CheckError(f"template of [{handler.name}]: {err}", handler.error_span("file") or handler.error_span("text"))]


def template_warnings(handler: Handler, source: str, option: str) -> list[CheckWarning]:
    """`growth_warnings` of a template, each at its line: in the `file=` it was read from, or
    inside the `.decomp` file's `option` text."""
    found = growth_warnings(source)
    lines = source.split("\n")
    decl = handler.decl.option(option) if handler.decl is not None and option != "file" else None
    warnings = []
    for number, message in found:
        width = len(lines[number - 1]) if number <= len(lines) else 1
        if option == "file":
            span = Span(str(handler.ctx.resolve(handler.options.file)), number, 1, number, width + 1)
        elif decl is not None:  # the template's line inside the string, its quote included on the first
            at = decl.value.span
            line = min(at.line + number - 1, at.end_line)
            column = at.column if line == at.line else 1
            span = Span(at.file, line, column, line, column + width + (1 if line == at.line else 0))
        else:
            span = handler.error_span()
        warnings.append(CheckWarning(f"template of [{handler.name}], line {number}: {message}", span,
                                     expected="a value that does not double at every step: the render stops at "
                                              "1,000,000 characters or at its time limit"))
    return warnings


class PromptHandler(Handler):
    """Few-shot or template prompt; the completion is parsed as JSON where possible."""

    kind = "prompt"

    Options = PromptOptions
    cacheable = False

    def __init__(self, *args):
        super().__init__(*args)
        self._source: str | None = None
        self._fewshot = None

    def check(self) -> list[CheckError]:
        errors = source_problems(self)
        if errors:
            return errors
        try:
            self._prepare()
        except (DecompError, OSError, TemplateError) as err:
            return fewshot_error(self, err) if not isinstance(err, TemplateError) else template_error(self, err)
        if self.options.answer_regex:
            try:
                regex.compile(self.options.answer_regex)
            except regex.error as err:
                return [CheckError(f"answer_regex does not compile: {err}", self.error_span("answer_regex"))]
        return soft_prompt_problems(self) + self.timeout_problems() + self._typing_problems() + self._tool_problems()

    def _tool_problems(self) -> list[CheckError]:
        opts = self.options
        if opts.tools and opts.n > 1:
            return [CheckError("tools= takes one sample at a time (n = 1)", self.error_span("n"))]
        if opts.tools and opts.soft_prompt:
            return [CheckError("tools= needs a chat model, and soft_prompt= a local one", self.error_span("tools"))]
        return []

    def check_references(self, handlers: set[str]) -> list[CheckError]:
        """A tool that names no handler of this file."""
        return [CheckError(f"tools=: [{self.name}] offers [{name}] as a tool, but no handler is called that",
                           self.error_span("tools"), expected="one of: " + ", ".join(sorted(handlers)))
                for name in self.options.tools if name not in handlers]

    def calls(self) -> dict[str, list[Span]]:
        """The handlers named in `tools=` (checked to exist like any step's)."""
        span = self.error_span("tools")
        return {name: [span] for name in self.options.tools}

    def _typing_problems(self) -> list[CheckError]:
        opts = self.options
        if opts.vote is not None and opts.n < 2:
            return [CheckError("vote needs n > 1 samples to vote among", self.error_span("vote"))]
        if opts.returns is None and (opts.vote is not None or opts.retries):
            option = "vote" if opts.vote is not None else "retries"
            return [CheckError(f"{option} needs a declared type to fit answers to", self.error_span(option),
                               expected="returns=TYPE, e.g. returns=list[str]")]
        if opts.returns is not None and opts.n > 1 and opts.vote is None:
            return [CheckError("n > 1 samples of a typed answer need a vote to pick one", self.error_span("n"),
                               expected='vote="majority"')]
        return []

    # ---- types
    def example_values(self) -> list:
        """The `A:` answers of Q/A examples (none for a template or QC-style examples)."""
        if not self.options.file and self.options.text is None:
            return []
        try:
            self._prepare()
        except (DecompError, OSError, TemplateError, ValueError):  # its check says why
            return []
        if self.is_template or self._fewshot is None or self._head[1]:
            return []
        return [(e.answer.span, e.answer.value) for e in self._fewshot.examples if e.answer is not None]

    def inferred_type(self) -> Type:
        """What every example's answer shows (`decomp.dsl.answer_types.infer`); `any` without examples."""
        values = self.example_values()
        return infer(v for _, v in values) if values else ANY

    def warnings(self) -> list[CheckWarning]:
        self._prepare()
        soft = soft_prompt_warnings(self, self._source)
        if not self.is_template:
            return soft
        return template_warnings(self, self._source, "file" if self.options.file else "text") + soft

    @property
    def is_template(self) -> bool:
        if self.options.template is not None:
            return self.options.template
        name = self.options.file or ""
        return name.endswith((".j2", ".jinja", ".jinja2")) or "{{" in (self._source or "")

    def _prepare(self) -> None:
        if self._source is not None:
            return
        self._source = source_text(self)
        opening = f"{self.options.instructions}\n\n" if self.options.instructions else ""
        if self.is_template:
            self._template = JINJA.from_string(self._source)
            self._opening = opening
            return
        self._fewshot = load_fewshot(self)
        examples = self._source.strip("\n")
        qc_style = self._fewshot is not None and any(e.question_kind == "QC" for e in self._fewshot.examples)
        self._head = (opening + (examples + "\n\n" if examples.strip() else ""), qc_style)
        self._conversation = fewshot_conversation(self._fewshot.examples if self._fewshot is not None else (),
                                                  self.options.instructions, answer_only=True)

    def fewshot_head(self) -> tuple[str, bool] | None:
        """The few-shot text every rendered prompt starts with (the examples and a blank line)
        and whether the examples are QC-style; None for a template."""
        self._prepare()
        return None if self.is_template else self._head

    def render(self, call: Call) -> str:
        """The exact prompt text sent to a completion model for this call."""
        return self.render_both(call)[0]

    def render_both(self, call: Call) -> tuple[str, tuple[Message, ...] | None]:
        """The prompt as text (for completion models) and as the messages a chat model gets
        (None: the text as one user message); see `decomp.handlers.conversation`."""
        self._prepare()
        if self.is_template:
            return self._render_template(call)
        head, qc_style = self._head
        context = f"{call.inputs.get(self.options.context, '')}\n" if self.options.context else ""
        text = f"{head}{context}QC: {call.query}\nQS:" if qc_style else f"{head}{context}Q: {call.query}\nA:"
        return text, with_query(self._conversation, f"{context}{call.query}")

    def _render_template(self, call: Call) -> tuple[str, tuple[Message, ...] | None]:
        role, nonce = role_marker()
        # a row's own field `role` wins (templates written before role markers keep working)
        variables = {"role": role, **call.inputs, "query": call.query, "values": list(call.values),
                     "inputs": dict(call.inputs)}
        try:
            rendered = self._template.render_within(self.time_limit(call), **variables)
        except Exception as err:  # a template can fail in any way (1 // 0, bad filters, ...)
            raise HandlerError(f"template: {type(err).__name__}: {err}", call.span) from err
        text, messages = split_roles(rendered, nonce)
        if self.options.instructions:
            messages = with_system(self.options.instructions, messages or (Message("user", text),))
        return self._opening + text, messages

    async def run(self, call: Call) -> Any:
        opts = self.options
        self._prepare()
        # a template renders off the event loop, under the handler's time limit (it stops itself
        # there: see `render`); few-shot text is put together at once
        prompt = await self.offload(call, self.render_both, call, what="the template", grace=RENDER_GRACE) \
            if self.is_template else self.render_both(call)
        if self.declared_type is not None:
            return await self._typed(call, prompt, self.declared_type)
        texts, answers = await self._sample(call, prompt)
        return answers[0] if opts.n == 1 else answers

    async def _sample(self, call: Call, prompt: Prompt, constraint: Constraint | None = None) -> tuple[list, list]:
        opts = self.options
        if opts.tools:
            texts = [await with_tools(self, call, prompt, constraint)]
        else:
            texts = await call.complete(prompt[0], model=opts.model, stop=tuple(opts.stop), max_tokens=opts.max_tokens,
                                        temperature=opts.temperature, n=opts.n, soft_prompt=handler_soft_prompt(self),
                                        constraint=constraint, messages=prompt[1])
        if opts.answer_regex:
            answers = await self.offload(call, lambda: [self._extract(t, call) for t in texts], what="answer_regex")
        else:
            answers = [self._extract(t, call) for t in texts]
        return texts, answers

    async def _typed(self, call: Call, prompt: Prompt, declared: Type) -> Any:
        """Sample under the type's constraint, fit each answer to the type, vote among those that
        fit; when none does, ask again (`retries`) with the answer and why it does not fit shown
        after it. None fitting at the end: a failed outcome, with the last reason."""
        constraint = self._constraint(declared)
        for _ in range(self.options.retries + 1):
            texts, answers = await self._sample(call, prompt, constraint)
            fitted = [fit(declared, a) for a in answers]
            good = [value for value, problem in fitted if problem is None]
            if good:
                return majority(good)
            problem = fitted[0][1]
            prompt = retry_prompt(prompt, texts[0], problem, declared)
        return Failed(answers[0], problem)

    def _constraint(self, declared: Type) -> Constraint | None:
        """The constraint a model decodes under (none for an answer_regex, which reads the
        answer out of free text)."""
        how = None if self.options.answer_regex else decoding(declared)
        if how is None:
            return None
        return Constraint(schema=how[1]) if how[0] == "schema" else Constraint(regex=how[1])

    def _extract(self, text: str, call: Call) -> Any:
        if not self.options.answer_regex:
            return parse_output(text)
        try:
            match = regex.search(self.options.answer_regex, text, timeout=1.0)
        except TimeoutError:
            raise HandlerError("answer_regex took over 1 s on the model's output", call.span) from None
        if match is None:
            raise HandlerError(f"answer_regex {self.options.answer_regex!r} found nothing in "
                               f"{text.strip()[:80]!r}", call.span)
        return parse_output(match.group(1) if match.groups() else match.group(0))


def majority(values: list) -> Any:
    """The most frequent of `values` (compared by JSON text); among equally frequent ones, the
    one that came first."""
    if len(values) == 1:
        return values[0]
    counts = Counter(json_text(v) for v in values)
    best = max(counts.values())
    return next(v for v in values if counts[json_text(v)] == best)


def retry_prompt(prompt: Prompt, text: str, problem: str, declared: Type) -> Prompt:
    """`prompt` asked again: the model's answer, a line saying why it does not fit, and the
    prompt's last marker (`A:`, `QS:`) once more, so the model answers on the next line. As a
    conversation: the answer as the assistant's turn, the reason as the user's next."""
    text_prompt, messages = prompt
    why = f"(Not accepted: {problem}. Answer with a value of type {declared.text}.)"
    marker = text_prompt.rsplit("\n", 1)[-1]
    marker = marker if len(marker) <= 12 else ""
    turns = (messages or (Message("user", text_prompt),)) + (Message("assistant", text.strip()), Message("user", why))
    return f"{text_prompt} {text.strip()}\n{why}\n{marker}", turns
