"""New TextCraft tasks from a pool of crafting commands, with goals of a chosen recipe depth.

    rows = generate_tasks(commands, depth=2, n=20, seed=1)

Each row is laid out as ADaPT's task files are (`id`, `goal`, `crafting_commands`): the goal's
recipe tree (the recipes the solver crafts with, written as in the pool, tags included) plus
`distractors` other commands of the pool, shuffled. The tree takes each item's easiest recipe in
the pool, so the row's goal has exactly `depth` whatever the distractors (a row's solver may still
craft with a distractor recipe of the same depth).
"""
from __future__ import annotations

import random
from typing import Any

from decomp.dsl.errors import InputError
from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.programs.adapt.textcraft.recipes import Recipes, parse_command, plan_actions

__all__ = ["generate_tasks", "recipe_tree"]


def recipe_tree(goal: str, recipes: Recipes, commands: list[str]) -> list[str] | None:
    """The commands (as written in `commands`) of the recipes the solver crafts with to make one
    `goal` from an empty inventory, in the order it crafts; None when it cannot make it."""
    actions = plan_actions(goal, 1, {}, recipes)
    if actions is None:
        return None
    written = {id(recipe): command for recipe, command in zip(recipes.all, commands)}
    tree: list[str] = []
    for action in actions:
        if not action.startswith("craft "):
            continue
        wanted = parse_command(action)
        recipe = next(r for r in recipes.ordered(wanted.output) if TextCraft._match(r, wanted) is not None)
        if written[id(recipe)] not in tree:
            tree.append(written[id(recipe)])
    return tree


def generate_tasks(commands: list[str], depth: int, n: int, seed: int = 0,
                   distractors: int = 8) -> list[dict[str, Any]]:
    """`n` rows whose goal has recipe depth `depth` in the row's own commands, drawn from
    `commands` with `random.Random(seed)` (the same arguments give the same rows). Goals go
    round the eligible items in a shuffled order, so they repeat only when `n` exceeds them.
    `InputError` (a `ValueError`) for a command of the pool that is none, or when no item of that
    depth exists in the pool."""
    if depth < 1:
        raise InputError(f"a goal is crafted, so its depth is at least 1, not {depth}")
    if n < 0 or distractors < 0:
        raise InputError("n and distractors must not be negative")
    pool = list(dict.fromkeys(c.strip() for c in commands))
    try:
        recipes = Recipes.from_commands(pool)
    except ValueError as err:  # a command of the pool that is not one, in words
        raise InputError(str(err)) from None
    rng = random.Random(seed)
    goals = []
    for item in recipes.by_output:
        if recipes.depths().get(item) != depth:
            continue
        tree = recipe_tree(item, recipes, pool)
        if tree is not None and Recipes.from_commands(tree).depths().get(item) == depth:
            goals.append((item, tree))
    if not goals:
        raise InputError(f"no item of recipe depth {depth} can be made from these {len(pool)} commands")
    rng.shuffle(goals)
    rows = []
    for i in range(n):
        goal, tree = goals[i % len(goals)]
        chosen = _distractors(goal, depth, tree, pool, distractors, rng)
        listed = tree + chosen
        rng.shuffle(listed)
        rows.append({"id": f"gen_d{depth}_{i}", "goal": goal, "crafting_commands": listed})
    return rows


def _distractors(goal: str, depth: int, tree: list[str], pool: list[str], wanted: int,
                 rng: random.Random) -> list[str]:
    """Up to `wanted` commands of the pool outside `tree`, at random. The tree already takes each
    item's easiest recipe in the pool, so no distractor can make the goal shallower; each is
    checked all the same (the depth is what the row promises)."""
    others = [c for c in pool if c not in tree]
    rng.shuffle(others)
    chosen: list[str] = []
    for command in others:
        if len(chosen) == wanted:
            break
        if Recipes.from_commands(tree + chosen + [command]).depths().get(goal) == depth:
            chosen.append(command)
    return chosen
