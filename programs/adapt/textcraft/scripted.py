"""A deterministic scripted model of capability K for TextCraft (the ADaPT reproduction):
the model spec `scripted:K` (`decomp run adapt/textcraft --model scripted:2`), K >= 1.

It reads the prompts our TextCraft programs send (programs/adapt/prompts/) and answers like an
agent that can carry out any sub-task needing at most K environment actions, and gives up on
anything longer. That is the paper's premise in its simplest form: an executor of bounded
ability, which ADaPT helps by decomposing a task until each part is within reach, while the
baselines (ReAct, Plan-and-Execute, retries, Reflexion) meet the same limit without adapting.

What it answers, by the shape of the prompt:

* an executor turn (the prompt's last line is `>` or `> `; after a bare `>` the answer starts
  with a space, as a model continuing the text would write it): the task of the last `Task:` line (a note after
  ` -- `, such as a Reflexion lesson, is ignored), the recipes of the last `Crafting commands:`
  block and the inventory of the last `Inventory:` line before the task (what the sub-task
  started with). When the exact solver (`plan_actions`) needs more than K actions from that
  inventory, or cannot do it at all, the answer is `task failed`. Otherwise the actions already
  in the transcript are replayed on a TextCraft environment holding that inventory and the
  answer is the solver's next action from there, or `task completed` once nothing is missing.
  A capable agent thus makes the K-or-fewer actions in order and then says it is done.
* a planner prompt (its last line is `Task: ...`): the symbolic planner's plan (`plan_text`)
  for that task with the last block of crafting commands: `Step n: ...` lines and an
  `Execution Order`.
* a lesson prompt (ending in `Lesson:`): one fixed lesson.
* anything else: the empty string.

Answers are cut at the first of the request's stop sequences; n samples are n copies of one
answer. Token counts are the fake model's (a token per 4 characters). In the step cache the
model stands for K and the source of this module and of the TextCraft recipes and environment
(`cache_identity`), so `scripted:1` and `scripted:2` never share entries and an edit of the
logic misses the cache.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from decomp.handlers.kinds.executor import COMPLETED, FAILED
from decomp.handlers.plugins import hookimpl
from decomp.programs.adapt.textcraft import env as textcraft_env, recipes as textcraft_recipes
from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.programs.adapt.textcraft.recipes import Recipes, item_name, parse_task, plan_actions, plan_text
from decomp.runtime.models.base import Completion, Model, ModelError, Request
from decomp.runtime.models.replay import estimated_tokens

__all__ = ["LESSON", "ScriptedModel", "executor_answer", "parse_inventory", "planner_answer", "scripted_model"]

#: The lesson a scripted model writes after a failed attempt.
LESSON = " Fetch or craft each ingredient before crafting the target."

_ITEM = re.compile(r"\[([^\]]+)\]\s*\((\d+)\)")


class ScriptedModel(Model):
    """An agent that can do any TextCraft sub-task of at most `capability` actions."""

    def __init__(self, capability: int):
        if isinstance(capability, bool) or not isinstance(capability, int) or capability < 1:
            raise ModelError(f"a scripted model's capability is an integer >= 1, not {capability!r}")
        self.capability = capability
        self.name = f"scripted:{capability}"
        self.endpoint = self.name
        self.history: list[Request] = []
        self._identity: str | None = None

    def cache_identity(self) -> str:
        if self._identity is None:
            self._identity = f"{self.name}#sha256:{_logic_fingerprint()}"
        return self._identity

    async def complete(self, request: Request) -> Completion:
        self.history.append(request)
        text = _cut(self.answer(request.prompt), request.stop)
        texts = (text,) * max(1, request.n)
        return Completion(texts, estimated_tokens(request.prompt), sum(map(estimated_tokens, texts)))

    def answer(self, prompt: str) -> str:
        """The answer to `prompt`, before stop sequences are applied."""
        if prompt.rpartition("\n")[2].strip() == ">":  # an executor turn: `>` or `> ` ends it
            line = executor_answer(prompt, self.capability)
            return line if prompt.endswith(" ") else " " + line
        body = prompt.rstrip()
        if body.endswith("Lesson:"):
            return LESSON
        last = body.rpartition("\n")[2]
        if last.startswith("Task:"):
            return planner_answer(prompt)
        return ""


# ---- reading the prompts
def parse_inventory(line: str) -> dict[str, int]:
    """`Inventory: [oak planks] (4) [stick] (2)` -> {"oak planks": 4, "stick": 2};
    `Inventory: You are not carrying anything.` -> {}."""
    held: dict[str, int] = {}
    for name, count in _ITEM.findall(line):
        item = item_name(name)
        held[item] = held.get(item, 0) + int(count)
    return held


def _last_index(lines: list[str], prefix: str, before: int | None = None) -> int | None:
    end = len(lines) if before is None else before
    for i in range(end - 1, -1, -1):
        if lines[i].startswith(prefix):
            return i
    return None


def _commands(lines: list[str], before: int | None = None) -> list[str] | None:
    """The commands of the last `Crafting commands:` block (before line `before`)."""
    start = _last_index(lines, "Crafting commands:", before)
    if start is None:
        return None
    found = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        found.append(line.strip())
    return found


def _task(line: str) -> tuple[str, int]:
    """The (item, count) of a `Task: ...` line, any ` -- note` dropped; ValueError if unreadable."""
    text = line[len("Task:"):].strip()  # parse_task leaves out a " -- " note
    return parse_task(text)


def executor_answer(prompt: str, capability: int) -> str:
    """The next line of a capability-K agent in an executor prompt (see the module's docstring)."""
    lines = prompt.split("\n")
    at = _last_index(lines, "Task:")
    if at is None:
        return FAILED
    commands = _commands(lines, at)
    inventory_at = _last_index(lines, "Inventory:", at)
    try:
        item, count = _task(lines[at])
        recipes = Recipes.from_commands(commands or [])
    except ValueError:
        return FAILED
    inventory = parse_inventory(lines[inventory_at]) if inventory_at is not None else {}
    needed = plan_actions(item, count, inventory, recipes)
    if needed is None or len(needed) > capability:
        return FAILED
    env = _replay_env(item, commands or [], recipes)
    if env is None:
        return FAILED
    env.inventory = dict(inventory)
    for line in lines[at + 1:]:
        if not line.startswith(">"):
            continue
        action = line[1:].strip()
        lowered = action.lower()
        if not action or lowered.startswith("think:") or COMPLETED in lowered or FAILED in lowered:
            continue
        env.step(action)
    remaining = plan_actions(item, count, env.inventory, recipes)
    if remaining is None:
        return FAILED
    return remaining[0] if remaining else COMPLETED


def _replay_env(item: str, commands: list[str], recipes: Recipes) -> TextCraft | None:
    """A TextCraft environment over `commands` to replay a transcript on. Its goal does not
    matter here, but the environment wants one it can make: `item`, else the first output of a
    command it accepts (`item` may be a base item that only a tag names, such as `oak slab`
    for `wooden slabs`, which the environment does not take as a goal)."""
    for goal in (item, *recipes.by_output):
        try:
            return TextCraft(goal, commands)
        except ValueError:
            continue
    return None


def planner_answer(prompt: str) -> str:
    """The symbolic plan for the last `Task:` line with the last crafting commands ('' when the
    task or the commands cannot be read, or the item cannot be made)."""
    lines = prompt.rstrip("\n").split("\n")
    at = _last_index(lines, "Task:")
    if at is None:
        return ""
    try:
        item, count = _task(lines[at])
        recipes = Recipes.from_commands(_commands(lines, at) or [])
        return plan_text(item, count, {}, recipes)
    except ValueError:
        return ""


def _cut(text: str, stops) -> str:
    """`text` up to the first of `stops` (the earliest occurrence of any)."""
    cut = len(text)
    for stop in stops or ():
        if stop:
            found = text.find(stop)
            if 0 <= found < cut:
                cut = found
    return text[:cut]


_FINGERPRINT: str | None = None


def _logic_fingerprint() -> str:
    """A sha256 of the source that decides the answers: this module and TextCraft's recipes
    and environment."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        digest = hashlib.sha256()
        for module_file in (__file__, textcraft_recipes.__file__, textcraft_env.__file__):
            digest.update(Path(module_file).read_bytes())
        _FINGERPRINT = digest.hexdigest()
    return _FINGERPRINT


def scripted_model(name: str, settings: object = None) -> ScriptedModel:
    """Factory for `scripted:K` model specs."""
    try:
        capability = int(name.strip())
    except ValueError:
        raise ModelError(f"scripted:{name}: the capability K of `scripted:K` is an integer >= 1") from None
    return ScriptedModel(capability)


@hookimpl
def register_models(register):
    register("scripted", scripted_model)
