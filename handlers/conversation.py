"""Prompts as conversations, for chat models: the messages a handler sends beside its text.

A model-backed kind renders two forms of one prompt: the text a completion model continues
(the few-shot file as written, then `Q: <query>` and `A:`), which completion endpoints and the
local model get exactly as before, and the `Message`s a chat model gets. The one mapping every
kind follows (docs/chat.md shows it side by side):

  * system: the handler's `instructions=` option, then the text before the first example of
    its few-shot file (the chunks that ask no question); no system message when neither says
    anything (on a completion model, `instructions=` opens the text, a blank line after it);
  * each example: a user turn (its context lines, then the text after its `Q:` or `QC:`) and
    an assistant turn (the text after its `A:`, or after its first `QS:` for a prompt with
    QC-style examples); a decomposition example (a decomposer's) is a conversation of its own:
    each `QS:` line's text an assistant turn, each `A:` an answer in a user turn, `[EOQ]` the
    last assistant turn;
  * the query: the last user turn (with the `context=` input before it, as in the text);
  * a decomposer's steps so far: its `QS:` lines as assistant turns, their answers (as JSON)
    as user turns.

The markers (`Q:`, `A:`, `QC:`, `QS:`) are left out of the turns: the roles say what they said.
A Jinja template marks roles with `{{ role("system") }}` (`"user"`, `"assistant"`) on lines
of their own: the text after a marker, up to the next, is that role's message (text before the
first marker is the system message). Each render's markers carry a random nonce, so text
that comes from data cannot forge one. (A row with a field of its own named `role` keeps it:
such a template cannot mark roles.) A template without markers is one user message, as
before; on a completion model the markers are dropped and the text sent as it reads.
"""
from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any, Iterable

from decomp.dsl import nodes

__all__ = ["ROLES", "Message", "Reply", "Tool", "ToolCall", "decomposer_turns", "fewshot_conversation",
           "role_marker", "split_roles", "with_query", "with_system"]

ROLES = ("system", "user", "assistant")
_MARK = re.compile(r"^(QC|QS|Q|A):[ \t]?(.*)$")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call a model asked for: its id (echoed back with the result), the tool's name and
    its arguments as the JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def wire(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of a conversation: `role` is system, user, assistant or tool; an assistant turn
    may carry `tool_calls`, a tool turn answers the call `tool_call_id`."""

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def wire(self) -> dict:
        """The message as the chat API takes it (and as cache keys hold it)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass(frozen=True, slots=True)
class Tool:
    """A function a chat model may call: its name, what it does and its arguments' JSON Schema
    (as canonical JSON text, so the tool is hashable and its key stable)."""

    name: str
    description: str
    parameters: str

    def wire(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": json.loads(self.parameters)}}


@dataclass(frozen=True, slots=True)
class Reply:
    """One sample of a model's reply: its text and the tool calls it asked for (if any)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


# ---- few-shot files
def _turns(example: nodes.Example) -> list[tuple[str, str]]:
    """(marker, text) of an example's marked lines, each with the unmarked lines after it
    (continuations) joined on; the lines before the first marker as ("", context)."""
    turns: list[tuple[str, str]] = []
    for line in example.lines:
        found = _MARK.match(line)
        if found:
            turns.append((found.group(1), found.group(2)))
        elif turns:
            turns[-1] = (turns[-1][0], f"{turns[-1][1]}\n{line}")
        elif line.strip():
            turns.append(("", line))
    return [(mark, text.rstrip("\n") if mark else text) for mark, text in turns]


def _example_messages(example: nodes.Example, pending: str, answer_only: bool) -> list[Message]:
    """The turns of one example (see the module docstring); `pending`: question-less text
    that goes before its question; `answer_only`: a prompt's example (one assistant turn)."""
    marked = _turns(example)
    context = "\n".join(text for mark, text in marked if mark == "")
    question = next((text for mark, text in marked if mark in ("Q", "QC")), "")
    user = "\n".join(part for part in (pending, context, question) if part)
    messages = [Message("user", user)]
    after = [(mark, text) for mark, text in marked if mark in ("QS", "A")]
    if example.steps and not answer_only:  # a decomposer's example: its own conversation
        for mark, text in after:
            messages.append(Message("assistant" if mark == "QS" else "user", text))
    elif after:
        messages.append(Message("assistant", after[0][1]))
    return messages


def fewshot_conversation(examples: Iterable[nodes.Example], instructions: str | None = None, *,
                         answer_only: bool = False) -> tuple[Message, ...]:
    """The messages that stand for a few-shot file's `examples` before the query: a system
    message (`instructions`, then the question-less text before the first example), then each
    example's turns. `answer_only` (a prompt's examples, whose model answers one turn): each
    example's assistant turn is the text after its `A:` or its first `QS:`; else (a
    decomposer's) a QC/QS example is a conversation of its own."""
    messages: list[Message] = []
    preamble: list[str] = []
    pending: list[str] = []
    seen_example = False
    for example in examples:
        if example.question is None and not example.steps and example.answer is None:
            text = "\n".join(example.lines).strip("\n")
            if text.strip():
                (pending if seen_example else preamble).append(text)
            continue
        seen_example = True
        for message in _example_messages(example, "\n\n".join(pending), answer_only):
            _append(messages, message)
        pending = []
    if pending:  # text after the last example: it goes before the query (see `with_query`)
        _append(messages, Message("user", "\n\n".join(pending)))
    system = "\n\n".join(part for part in (instructions, *preamble) if part and part.strip())
    head = [Message("system", system)] if system else []
    return tuple(head + messages)


def _append(messages: list[Message], message: Message) -> None:
    """Add `message`, joined to the last one when both are plain user turns (an example with
    no answer, text between examples): chat templates want the roles to alternate."""
    last = messages[-1] if messages else None
    if last is not None and last.role == message.role == "user" and not last.tool_call_id:
        messages[-1] = Message("user", f"{last.content}\n\n{message.content}")
    else:
        messages.append(message)


def with_query(conversation: tuple[Message, ...], query: str) -> tuple[Message, ...]:
    """`conversation` with `query` as its last user turn (joined to a user turn it ends with)."""
    if conversation and conversation[-1].role == "user":
        return conversation[:-1] + (Message("user", f"{conversation[-1].content}\n\n{query}"),)
    return conversation + (Message("user", query),)


def decomposer_turns(examples: tuple[Message, ...], question: str,
                     history: Iterable[tuple[str, str]]) -> tuple[Message, ...]:
    """A decomposer's examples' turns, its question and its steps so far: (the `QS:` line's
    text, the answer as JSON) pairs, as assistant and user turns."""
    messages = list(with_query(examples, question))
    for line, answer in history:
        messages += [Message("assistant", line), Message("user", answer)]
    return tuple(messages)


# ---- templates
def role_marker() -> tuple[Any, str]:
    """A `role(name)` function for one template render and the nonce its markers carry."""
    nonce = secrets.token_hex(8)

    def role(name: str) -> str:
        if name not in ROLES:
            raise ValueError(f"role() takes {', '.join(map(repr, ROLES))}, not {name!r}")
        return f"\x00{nonce}:{name}\x00"

    return role, nonce


def with_system(instructions: str | None, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """`messages` with `instructions` opening the system message (one system message: joined
    to the one they start with, if any)."""
    if not instructions:
        return messages
    if messages and messages[0].role == "system":
        return (Message("system", f"{instructions}\n\n{messages[0].content}"),) + messages[1:]
    return (Message("system", instructions),) + messages


def split_roles(text: str, nonce: str) -> tuple[str, tuple[Message, ...] | None]:
    """A rendered template's text without its role markers, and its messages (None when it
    marks no role: the text is then one user message, as it always was)."""
    marker = re.compile(rf"[ \t]*\x00{re.escape(nonce)}:({'|'.join(ROLES)})\x00[ \t]*\n?")
    parts = marker.split(text)
    if len(parts) == 1:
        return text, None
    messages = []
    head = parts[0].strip()
    if head:
        messages.append(Message("system", head))
    for role, body in zip(parts[1::2], parts[2::2]):
        body = body.strip("\n")
        if body.strip():
            messages.append(Message(role, body))
    return "".join(parts[0::2]), tuple(messages)
