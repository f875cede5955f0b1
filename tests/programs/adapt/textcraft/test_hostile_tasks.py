"""TextCraft rows an attacker writes: thousands of chained recipes, counts thousands of digits long,
long runs of spaces, goals deeper than the symbolic solver goes. Each starts in time linear in
its size and ends in a worded error or a failed attempt, never an internal error."""
import json
import random
import time

import pytest
from click.testing import CliRunner

from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.programs.adapt.textcraft.recipes import (MAX_SOLVER_DEPTH, TAGS, Recipes, parse_command, parse_task,
                                               plan_actions, plan_text)
from decomp.runtime.cli import main


def chain(n: int) -> dict:
    """A row whose goal is `n` crafts deep, its recipes listed goal first (the order that made the
    old fixpoint take one pass per recipe)."""
    commands = [f"craft 1 item{i + 1} using 1 item{i}" for i in range(n)][::-1]
    return {"id": f"chain{n}", "goal": f"item{n}", "crafting_commands": commands}


def start_seconds(n: int) -> float:
    started = time.perf_counter()
    env = TextCraft.from_row(chain(n))
    assert env.depth == n
    return time.perf_counter() - started


def test_twenty_thousand_chained_recipes_start_in_a_few_seconds():
    assert start_seconds(20_000) < 10


def test_start_time_grows_linearly():
    """4x the recipes take about 4x the time (the old fixpoint took 16x); < 8 leaves room for noise."""
    small = min(start_seconds(2_000) for _ in range(3))
    large = min(start_seconds(8_000) for _ in range(3))
    assert large / small < 8, (small, large)


def test_depths_do_not_depend_on_the_order_of_the_commands(dev_rows):
    """A tag counts as its shallowest produced member wherever that member's recipe is listed
    (the old fixpoint gave `jukebox using 8 planks` depth 1 or 2 by the order of the lines)."""
    pool = list(dict.fromkeys(c for row in dev_rows for c in row["crafting_commands"]))
    rng = random.Random(1)
    for _ in range(60):
        commands = rng.sample(pool, rng.randint(3, 40))
        shuffled = rng.sample(commands, len(commands))
        first, second = Recipes.from_commands(commands), Recipes.from_commands(shuffled)
        assert first.depths() == second.depths()
        assert {t: first.tag_depth(t) for t in TAGS} == {t: second.tag_depth(t) for t in TAGS}


def test_a_tag_counts_as_its_produced_member_even_when_a_base_one_exists():
    recipes = Recipes.from_commands(["craft 1 jukebox using 8 planks, 1 diamond",
                                     "craft 4 spruce planks using 1 spruce logs"])
    assert recipes.is_base("oak planks")  # the default member, gettable, but the solver crafts spruce
    assert recipes.recipe_depth("jukebox") == 2 and recipes.tag_depth("planks") == 1
    assert plan_actions("jukebox", 1, {}, recipes)[-1] == "craft 1 jukebox using 8 spruce planks, 1 diamond"


def test_a_tag_made_only_from_itself_counts_as_its_base_member():
    """Red wool needs wool: the only wool to start from is white wool, the tag's base member."""
    recipes = Recipes.from_commands(["craft 1 red wool using 1 wool, 1 red dye", "craft 1 red dye using 1 poppy",
                                     "craft 1 red bed using 3 wool, 3 stick", "craft 1 white bed using 1 white wool"])
    assert recipes.tag_depth("wool") == 0
    assert recipes.recipe_depth("red wool") == 2 and recipes.recipe_depth("red bed") == 1


@pytest.mark.parametrize("text, message", [
    ("craft 1 chest using " + "9" * 5000 + " planks",
     r"the ingredient '9{40}\.\.\.\(5007 characters\)' in 'craft 1 chest .*has a count of 9{40}\.\.\.\(5000 "
     r"characters\); counts are at most 1,000,000,000"),
    ("craft " + "1" * 10 + " chest using 8 planks", r"the output '1111111111 chest'.*counts are at most 1,000,000,000"),
])
def test_a_count_too_large_is_a_worded_error(text, message):
    with pytest.raises(ValueError, match=message):
        parse_command(text)


def test_counts_up_to_the_limit_stay_exact():
    recipe = parse_command("craft 1000000000 chest using 0001000000000 planks")
    assert recipe.count == 10**9 and recipe.ingredients == (("planks", 10**9),)
    recipes = Recipes.from_commands(["craft 3 stick using 2 planks"])
    assert plan_actions("stick", 10**9, {}, recipes)[-1] == "craft 1000000002 stick using 666666668 oak planks"


def test_a_task_or_action_with_a_huge_count_is_worded():
    with pytest.raises(ValueError, match=r"the task 'get 9{36}\.\.\.\(5013 characters\)'.*counts are at most 1,000,000,000"):
        parse_task("get " + "9" * 5000 + " oak logs")
    env = TextCraft("chest", ["craft 1 chest using 8 planks", "craft 4 oak planks using 1 oak logs"])
    observation = env.step("get " + "9" * 5000 + " oak logs").observation
    assert observation.startswith("Could not do that: the action has a count of 999") and env.inventory == {}


@pytest.mark.parametrize("read", [parse_command, parse_task])
def test_long_runs_of_spaces_are_read_in_linear_time(read):
    text = "craft 1 a" + " " * 200_000 + "b"  # no `using`: the command pattern fails, the task reads
    started = time.perf_counter()
    try:
        read(text)
    except ValueError as err:
        assert "cannot read the crafting command" in str(err)
    assert time.perf_counter() - started < 5


def test_a_recipe_of_thousands_of_ingredients_is_crafted_without_recursion():
    using = ", ".join(f"1 part{k}" for k in range(3000))
    env = TextCraft("goal", [f"craft 1 goal using {using}, 2 planks", "craft 4 oak planks using 1 oak logs"])
    env.inventory.update({f"part{k}": 1 for k in range(3000)}, **{"birch planks": 2})
    assert env.step(f"craft 1 goal using {using}, 2 oak planks").observation.startswith("Could not find enough")
    result = env.step(f"craft 1 goal using 2 birch planks, {using}")
    assert result.observation == "Crafted 1 minecraft:goal" and result.done and env.inventory == {"goal": 1}


def test_the_solver_refuses_an_item_deeper_than_it_goes_in_words():
    deep = Recipes.from_commands(chain(MAX_SOLVER_DEPTH + 1)["crafting_commands"])
    message = rf"'item101' is 101 crafts deep; the symbolic solver plans items at most {MAX_SOLVER_DEPTH}"
    with pytest.raises(ValueError, match=message):
        plan_actions("item101", 1, {}, deep)
    with pytest.raises(ValueError, match=message):
        plan_text("item101", 1, {}, deep)
    at_limit = Recipes.from_commands(chain(MAX_SOLVER_DEPTH)["crafting_commands"])
    assert len(plan_actions("item100", 1, {}, at_limit)) == MAX_SOLVER_DEPTH + 1


def test_hostile_rows_through_decomp_run_end_in_words(tmp_path):
    rows = [chain(20_000), chain(MAX_SOLVER_DEPTH + 1),
            {"id": "big", "goal": "item1", "crafting_commands": ["craft " + "9" * 5000 + " item1 using 1 item0"]},
            {"id": "big goal", "goal": "craft " + "9" * 5000 + " item1",
             "crafting_commands": ["craft 1 item1 using 1 item0"]},
            {"id": "ok", "goal": "item1", "crafting_commands": ["craft 1 item1 using 1 item0"]}]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    started = time.perf_counter()
    result = CliRunner().invoke(main, ["run", "adapt/textcraft_symbolic", "--input", str(data), "--run-dir",
                                       str(tmp_path / "run"), "--field", "dmax=4", "--cache", "off"])
    assert time.perf_counter() - started < 60
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    records = {r["id"]: r for r in map(json.loads, (tmp_path / "run" / "results.jsonl").read_text().splitlines())}
    assert records["ok"]["outcome"] == "ok"
    assert records["chain20000"]["outcome"] == "failed"  # the solver says too deep; ADaPT gives up
    assert records["chain20000"]["environment"]["env"]["recipe_depth"] == 20_000
    assert "counts are at most 1,000,000,000" in records["big"]["error"]
    assert "counts are at most 1,000,000,000" in records["big goal"]["error"]
    assert not any("internal error" in r.get("error", "") for r in records.values())
