"""Generating TextCraft tasks of a chosen recipe depth from a pool of crafting commands."""
from collections import Counter

import pytest

from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.programs.adapt.textcraft.generate import generate_tasks, recipe_tree
from decomp.programs.adapt.textcraft.recipes import Recipes, plan_actions


def solve(row):
    env = TextCraft.from_row(row)
    for action in plan_actions(env.goal, 1, env.inventory, env.recipes):
        assert not env.failed(env.step(action).observation), (row, action)
    return env


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_goals_have_the_depth_and_rows_solve(dev_pool, depth):
    rows = generate_tasks(dev_pool, depth, 6, seed=depth)
    assert [r["id"] for r in rows] == [f"gen_d{depth}_{i}" for i in range(6)]
    for row in rows:
        assert set(row) == {"id", "goal", "crafting_commands"}
        assert TextCraft.from_row(row).depth == depth
        assert Recipes.from_commands(row["crafting_commands"]).recipe_depth(row["goal"]) == depth
        assert set(row["crafting_commands"]) <= set(dev_pool)
        assert len(set(row["crafting_commands"])) == len(row["crafting_commands"])
        assert solve(row).solved


def test_commands_are_the_tree_plus_distractors(dev_pool):
    recipes = Recipes.from_commands(dev_pool)
    for row in generate_tasks(dev_pool, 3, 5, seed=7, distractors=5):
        tree = recipe_tree(row["goal"], recipes, dev_pool)
        assert set(tree) <= set(row["crafting_commands"])
        assert len(row["crafting_commands"]) == len(tree) + 5


def test_tree_keeps_tag_recipes_and_the_chosen_member():
    pool = ["craft 4 oak planks using 1 oak logs", "craft 1 chest using 8 planks",
            "craft 1 hopper using 1 chest, 5 iron ingot",
            "craft 4 birch planks using 1 birch logs", "craft 1 stone axe using 3 cobblestone, 2 stick"]
    recipes = Recipes.from_commands(pool)
    assert recipe_tree("hopper", recipes, pool) == ["craft 4 oak planks using 1 oak logs",
                                                    "craft 1 chest using 8 planks",
                                                    "craft 1 hopper using 1 chest, 5 iron ingot"]
    assert recipe_tree("diamond", recipes, pool) is None
    rows = generate_tasks(pool, 3, 1, distractors=10)
    assert rows[0]["goal"] == "hopper"
    assert sorted(rows[0]["crafting_commands"]) == sorted(pool)  # the pool holds only 2 other commands


def test_deterministic_for_a_seed(dev_pool):
    assert generate_tasks(dev_pool, 3, 8, seed=5) == generate_tasks(dev_pool, 3, 8, seed=5)
    assert generate_tasks(dev_pool, 3, 8, seed=5) != generate_tasks(dev_pool, 3, 8, seed=6)


def test_goals_go_round_before_repeating(dev_pool):
    rows = generate_tasks(dev_pool, 4, 30, seed=0, distractors=0)
    goals = Counter(r["goal"] for r in rows)
    assert max(goals.values()) - min(goals.values()) <= 1


def test_the_tree_takes_the_easiest_recipe_and_distractors_keep_the_depth():
    pool = ["craft 1 white dye using 1 bone meal", "craft 3 bone meal using 1 bone",
            "craft 1 white dye using 1 lily of the valley", "craft 1 white banner using 6 white wool, 1 stick",
            "craft 1 white wool using 1 white dye, 1 wool"]
    recipes = Recipes.from_commands(pool)
    assert recipe_tree("white dye", recipes, pool) == ["craft 1 white dye using 1 lily of the valley"]
    rows = generate_tasks(pool, 1, 4, seed=1, distractors=5)
    assert {r["goal"] for r in rows} == {"white dye", "bone meal"}
    for row in rows:
        assert TextCraft.from_row(row).depth == 1
        assert solve(row).solved
    white = next(r for r in rows if r["goal"] == "white dye")
    assert "craft 1 white dye using 1 bone meal" in white["crafting_commands"]  # a distractor now


def test_no_item_of_that_depth(dev_pool):
    with pytest.raises(ValueError, match=r"no item of recipe depth 5 can be made from these \d+ commands"):
        generate_tasks(dev_pool, 5, 1)
    with pytest.raises(ValueError, match="at least 1"):
        generate_tasks(dev_pool, 0, 1)
    assert generate_tasks(dev_pool, 2, 0) == []
