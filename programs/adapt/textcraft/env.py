"""The TextCraft environment (ADaPT): craft a goal item from a task's crafting commands.

    handler craft = environment(name="textcraft")

A row holds `goal` (the item to craft) and `crafting_commands` (the recipes). The inventory
starts empty; the actions are

    get 2 oak logs                                    -> Got 2 oak logs
    craft 8 oak planks using 2 oak logs               -> Crafted 8 minecraft:oak_planks
    inventory                                         -> Inventory: [oak planks] (8)

`get` fetches base items only; `craft` needs exact counts (c crafts at once: c times the
recipe's output and c times each ingredient), concrete items (a tag's member in place of the
tag) and the ingredients in the inventory. The episode is solved (reward 1) once the goal is held.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from decomp.handlers.environment import Environment, StepResult
from decomp.programs.adapt.textcraft.recipes import (TAGS, Recipe, Recipes, item_name, members, parse_command,
                                               parse_task, read_count)

__all__ = ["TextCraft"]

_GET = re.compile(r"get\s+(?:(\d+)\s+)?(\S.*)", re.IGNORECASE | re.DOTALL)


def minecraft_id(item: str) -> str:
    """`oak planks` -> `minecraft:oak_planks` (how the environment names what it crafted)."""
    return "minecraft:" + item.replace(" ", "_")


class TextCraft(Environment):
    """One TextCraft episode: the task's recipes, the goal and the inventory."""

    def __init__(self, goal: str, commands: list[str]):
        self.goal_text = goal.strip()
        self.commands = list(commands)
        self.recipes = Recipes.from_commands(self.commands)
        words = self.goal_text if re.match(r"(?i)(craft|fetch|get|obtain)\b", self.goal_text) \
            else f"craft {self.goal_text}"
        self.goal, self.goal_count = parse_task(words)
        self.depth = self.recipes.recipe_depth(self.goal)  # ValueError: the goal cannot be made
        #: What the agent holds, in the order items first arrived.
        self.inventory: dict[str, int] = {}
        self.actions = 0
        self.solved = False

    @classmethod
    def from_row(cls, fields: Mapping[str, Any]) -> "TextCraft":
        """The environment of a dataset row: `goal` (non-empty text) and `crafting_commands`
        (a list of `craft N item using ...` strings); ValueError naming what is wrong."""
        goal = fields.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            raise ValueError(f"the row's 'goal' must be non-empty text, not {goal!r}")
        commands = fields.get("crafting_commands")
        if not isinstance(commands, list):
            raise ValueError("the row's 'crafting_commands' must be a list of strings, not "
                             f"{type(commands).__name__}")
        for i, command in enumerate(commands):
            if not isinstance(command, str):
                raise ValueError(f"the row's 'crafting_commands': command {i + 1} is "
                                 f"{type(command).__name__} {command!r}, not a string")
        try:
            Recipes.from_commands(commands)
        except ValueError as err:
            raise ValueError(f"the row's 'crafting_commands': {err}") from None
        try:
            return cls(goal, commands)
        except ValueError as err:
            raise ValueError(f"the row's 'goal' {goal!r}: {err}") from None

    # ---- the Environment interface
    def start(self) -> str:
        return "Crafting commands:\n" + "\n".join(self.commands) + f"\n\nGoal: craft {self.goal_text}."

    def failed(self, observation: str) -> bool:
        return observation.startswith("Could not")

    def summary(self) -> dict[str, Any]:
        return {"goal": self.goal_text, "success": self.solved, "reward": 1.0 if self.solved else 0.0,
                "actions": self.actions, "recipe_depth": self.depth, "group": f"depth {self.depth}"}

    def step(self, action: str) -> StepResult:
        self.actions += 1
        observation, acted = self._act(action)
        if acted and self.inventory.get(self.goal, 0) >= self.goal_count:
            self.solved = True
            return StepResult(observation, 1.0, True)
        return StepResult(observation, 0.0, False)

    # ---- actions
    def _act(self, action: str) -> tuple[str, bool]:
        """The observation, and whether the inventory gained something."""
        text = action.strip()
        if text.startswith(">"):
            text = text[1:].strip()
        text = text.rstrip(".").strip()
        lower = text.lower()
        if lower == "inventory":
            return self.describe_inventory(), False
        if lower.startswith("craft ") and " using " in lower:
            try:
                wanted = parse_command(text)
            except ValueError:
                return self._not_understood(action), False
            return self._craft(wanted)
        match = _GET.fullmatch(text)
        if match:
            try:
                count = read_count(match.group(1), "the action") if match.group(1) else 1
            except ValueError as err:
                return f"Could not do that: {err}", False
            return self._get(item_name(match.group(2)), count)
        return self._not_understood(action), False

    @staticmethod
    def _not_understood(action: str) -> str:
        return f'Could not understand the action "{action.strip()}"; use get, craft or inventory.'

    def describe_inventory(self) -> str:
        held = [f"[{item}] ({count})" for item, count in self.inventory.items() if count > 0]
        return "Inventory: " + (" ".join(held) if held else "You are not carrying anything.")

    def _get(self, item: str, count: int) -> tuple[str, bool]:
        if count <= 0 or not self.recipes.is_base(item):
            return f"Could not find {count} {item}", False
        self.inventory[item] = self.inventory.get(item, 0) + count
        return f"Got {count} {item}", True

    def _craft(self, wanted: Recipe) -> tuple[str, bool]:
        target = wanted.output
        for recipe in self.recipes.by_output.get(target, ()):
            match = self._match(recipe, wanted)
            if match is None:
                continue
            if any(self.inventory.get(name, 0) < amount for name, amount in wanted.ingredients):
                return f"Could not find enough items to craft {minecraft_id(target)}", False
            for name, amount in wanted.ingredients:
                self.inventory[name] -= amount
                if self.inventory[name] == 0:
                    del self.inventory[name]
            self.inventory[target] = self.inventory.get(target, 0) + wanted.count
            return f"Crafted {wanted.count} {minecraft_id(target)}", True
        return f"Could not find a valid recipe for {target}", False

    @staticmethod
    def _match(recipe: Recipe, wanted: Recipe) -> int | None:
        """How many crafts `wanted` is of `recipe` (exact counts, each recipe ingredient named by
        exactly one concrete item: itself or, for a tag, a member), or None when it is not one.
        A concrete ingredient can only be named by itself, so only the (at most eight) tags are
        matched by trying: a recipe of thousands of ingredients is matched without recursion."""
        if wanted.count % recipe.count or len(wanted.ingredients) != len(recipe.ingredients):
            return None
        crafts = wanted.count // recipe.count
        left = dict(wanted.ingredients)
        if any(name in TAGS for name in left):
            return None
        tags = []
        for ingredient, amount in recipe.ingredients:
            if ingredient in TAGS:
                tags.append((ingredient, amount * crafts))
            elif left.pop(ingredient, None) != amount * crafts:
                return None
        return crafts if _assign_tags(tags, left) else None


def _assign_tags(tags: list[tuple[str, int]], left: dict[str, int]) -> bool:
    """Whether each (tag, amount) of `tags` can take a different item of `left` (item -> amount)
    that is one of its members, with that amount, using up every item of `left`."""
    if not tags:
        return not left
    (tag, amount), rest = tags[0], tags[1:]
    for name, given in list(left.items()):
        if given == amount and members(tag, name):
            del left[name]
            found = _assign_tags(rest, left)
            left[name] = given
            if found:
                return True
    return False


def make_textcraft(fields: Mapping[str, Any]) -> TextCraft:
    """The factory the `textcraft` environment is registered with (`decomp.programs.adapt.textcraft.plugin`):
    `TextCraft.from_row`."""
    return TextCraft.from_row(fields)
