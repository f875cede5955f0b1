"""Tests of decomp.programs.adapt.textcraft.scripted: the `scripted:K` model of capability K on TextCraft,
turn by turn on the real prompt templates, then end to end through programs/adapt/textcraft."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from decomp.dsl import nodes
from decomp.dsl.plans import read_plan
from decomp.handlers.kinds.prompt import JINJA
from decomp.handlers.plugins import load as load_plugins
from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.runtime.models.base import ModelError, Request
from decomp.runtime.runs.api import RunOptions, run_dataset
from decomp.programs.adapt.textcraft.scripted import LESSON, ScriptedModel, parse_inventory

REPO = Path(__file__).resolve().parents[4]
ADAPT = REPO / "programs" / "adapt"
TASKS = REPO / "tests" / "fixtures" / "textcraft" / "tasks_dev.jsonl"

COMMANDS = [
    "craft 4 oak planks using 1 oak logs",
    "craft 4 stick using 2 planks",
    "craft 1 wooden pickaxe using 3 planks, 2 stick",
    "craft 1 crafting table using 4 planks",
]


def ask(model: ScriptedModel, prompt: str, stop=("\n",), n: int = 1) -> tuple[str, ...]:
    return asyncio.run(model.complete(Request(prompt, stop=tuple(stop), n=n))).texts


def executor_prompt(env: TextCraft, task: str) -> str:
    """What the executor handler sends on its first turn (executor.j2, as handlers/executor.py
    renders it), without the final `>`."""
    template = JINJA.from_string((ADAPT / "prompts" / "executor.j2").read_text())
    text = template.render(task=task, start=env.start(), state=env.describe_inventory(), inputs={})
    return text.rstrip("\n") + "\n"


def run_attempt(model: ScriptedModel, env: TextCraft, task: str, turns: int = 12) -> list[str]:
    """The lines the model writes in one executor attempt, stepping `env` as the executor does."""
    prompt, lines = executor_prompt(env, task), []
    for _ in range(turns):
        line = ask(model, prompt + ">")[0].strip()
        lines.append(line)
        if line in ("task completed", "task failed"):
            break
        observation = env.step(line).observation
        prompt += f"> {line}\n{observation}\n"
    return lines


# --- executor turns ------------------------------------------------------------------------------

def test_executor_within_capability_solves_the_task():
    env = TextCraft("wooden pickaxe", COMMANDS)
    lines = run_attempt(ScriptedModel(6), env, "craft 1 wooden pickaxe")
    # the solver's 6 actions (it sets the planks for the pickaxe aside before making the sticks)
    assert lines == ["get 1 oak logs", "craft 4 oak planks using 1 oak logs",
                     "get 1 oak logs", "craft 4 oak planks using 1 oak logs",
                     "craft 4 stick using 2 oak planks", "craft 1 wooden pickaxe using 3 oak planks, 2 stick",
                     "task completed"]
    assert env.inventory.get("wooden pickaxe") == 1


def test_executor_beyond_capability_says_failed_at_once():
    env = TextCraft("wooden pickaxe", COMMANDS)
    assert run_attempt(ScriptedModel(5), env, "craft 1 wooden pickaxe") == ["task failed"]
    assert env.inventory == {}


def test_executor_counts_from_the_inventory_the_sub_task_starts_with():
    env = TextCraft("wooden pickaxe", COMMANDS)
    env.inventory = {"oak planks": 8, "stick": 2}
    assert run_attempt(ScriptedModel(1), env, "Craft 1 wooden pickaxe using 3 oak planks, 2 stick") == [
        "craft 1 wooden pickaxe using 3 oak planks, 2 stick", "task completed"]


def test_executor_fetch_step_of_a_plan():
    env = TextCraft("wooden pickaxe", COMMANDS)
    assert run_attempt(ScriptedModel(2), env, "Fetch 3 oak planks") == [
        "get 1 oak logs", "craft 4 oak planks using 1 oak logs", "task completed"]
    assert run_attempt(ScriptedModel(1), TextCraft("wooden pickaxe", COMMANDS), "Fetch 3 oak planks") == [
        "task failed"]


def test_executor_ignores_a_note_after_the_task_and_reads_the_transcript():
    env = TextCraft("wooden pickaxe", COMMANDS)
    prompt = executor_prompt(env, "craft 4 stick -- lesson: craft the planks first")
    prompt += ("> think: sticks need planks\nOK.\n> get 4 stick\nCould not find 4 stick\n"
               "> get 1 oak logs\nGot 1 oak logs\n")
    model = ScriptedModel(3)
    assert ask(model, prompt + ">") == (" craft 4 oak planks using 1 oak logs",)
    assert ask(model, prompt + "> ") == ("craft 4 oak planks using 1 oak logs",)


def test_executor_unreadable_task_or_unknown_item_fails():
    model = ScriptedModel(5)
    env = TextCraft("wooden pickaxe", COMMANDS)
    assert ask(model, executor_prompt(env, "dance a little") + ">") == (" task failed",)
    assert ask(model, executor_prompt(env, "craft 1 diamond sword") + ">") == (" task failed",)


def test_executor_base_item_only_a_tag_names():
    """`oak slab` is fetched for the tag `wooden slabs` although no command names it."""
    commands = ["craft 1 lectern using 4 wooden slabs, 1 bookshelf", "craft 1 bookshelf using 6 planks, 3 book"]
    env = TextCraft("lectern", commands)
    assert run_attempt(ScriptedModel(1), env, "Get 4 oak slab") == ["get 4 oak slab", "task completed"]


def test_parse_inventory():
    assert parse_inventory("Inventory: [oak planks] (4) [stick] (2)") == {"oak planks": 4, "stick": 2}
    assert parse_inventory("Inventory: You are not carrying anything.") == {}


# --- planner, lesson, anything else -------------------------------------------------------------

def planner_prompt(commands: list[str], task: str) -> str:
    template = JINJA.from_string((ADAPT / "prompts" / "planner.j2").read_text())
    return template.render(crafting_commands=commands, query=task)


def test_planner_writes_an_and_plan():
    text = ask(ScriptedModel(1), planner_prompt(COMMANDS, "craft 1 wooden pickaxe"), stop=("\n\n", "Task:"))[0]
    plan, note = read_plan(text)
    assert note is None
    assert isinstance(plan.order, nodes.PlanAnd)
    steps = [step.text for step in plan.steps]
    assert steps[-1] == "Craft 1 wooden pickaxe using 3 oak planks, 2 stick"
    assert {"Fetch 3 oak planks", "Fetch 2 stick"} <= set(steps)


def test_lesson_and_other_prompts():
    model = ScriptedModel(2)
    template = JINJA.from_string((ADAPT / "prompts" / "reflect.j2").read_text())
    assert ask(model, template.render(query='{"task": "craft 1 x"}')) == (LESSON,)
    assert ask(model, "Q: what is 2 + 2?\nA:") == ("",)


def test_stop_sequences_and_samples():
    model = ScriptedModel(2)
    text = ask(model, planner_prompt(COMMANDS, "craft 4 stick"), stop=("\n",), n=3)
    assert text == ("Step 1: Fetch 2 oak planks",) * 3


# --- the backend -------------------------------------------------------------------------------

def test_spec_and_cache_identity():
    factory = load_plugins().model_backend("scripted")
    one, two = factory("1", None), factory("2", None)
    assert (one.name, two.name) == ("scripted:1", "scripted:2")
    assert one.cache_identity().startswith("scripted:1#") and two.cache_identity().startswith("scripted:2#")
    assert one.cache_identity() != two.cache_identity()
    for bad in ("0", "x", "", "-1"):
        with pytest.raises(ModelError):
            factory(bad, None)


# --- end to end through programs/adapt/textcraft.decomp ----------------------------------------

SUBSET = ("env_0", "env_9", "env_20", "env_30")  # depth 4, 4 (a tag's base member), 3, 3


@pytest.fixture
def subset(tmp_path) -> Path:
    rows = [line for line in TASKS.read_text().splitlines() if json.loads(line)["id"] in SUBSET]
    assert len(rows) == len(SUBSET)
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def run(subset: Path, tmp_path: Path, k: int, main: str | None = None, **fields):
    name = f"{main or 'adapt'}-{k}"
    done = run_dataset(ADAPT / "textcraft.decomp", subset, model=f"scripted:{k}", main=main, fields=fields,
                       run_dir=tmp_path / name, output=tmp_path / f"{name}.jsonl",
                       options=RunOptions(cache_mode="off"))
    records = done.records()
    solved = [r["environment"]["env"]["success"] for r in records]
    return done, records, solved


def test_react_solves_with_a_capable_model(subset, tmp_path):
    done, records, solved = run(subset, tmp_path, 100, "react")
    assert done.failed == 0 and all(solved) and done.summary["success_rate"] == 1.0
    assert all(r["usage"]["calls"] == len(r["answer"]["actions"]) for r in records)  # no "task completed" turn


def test_adapt_solves_with_capability_one_where_react_cannot(subset, tmp_path):
    done, records, solved = run(subset, tmp_path, 1, dmax=5)
    assert done.failed == 0 and all(solved) and done.summary["success_rate"] == 1.0
    assert done.summary["calls_per_row"] > 5
    assert all(r["usage"]["calls"] > 5 for r in records)
    react, _, react_solved = run(subset, tmp_path, 1, "react")
    assert not any(react_solved) and react.summary["success_rate"] == 0.0
    assert react.summary["calls_per_row"] == 1.0  # "task failed" at once


def test_adapt_depth_limit_with_capability_one(subset, tmp_path):
    """With one action per attempt a task of recipe depth D needs dmax >= D + 1."""
    done, records, solved = run(subset, tmp_path, 1, dmax=4)
    by_id = {r["id"]: ok for r, ok in zip(records, solved)}
    assert by_id == {"env_0": False, "env_9": False, "env_20": True, "env_30": True}
