"""TextCraft recipes: parsing, tags, recipe depth, the sub-task language and the symbolic solver."""
from collections import Counter

import pytest

from decomp.dsl import nodes
from decomp.dsl.parser import parse_plan
from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.programs.adapt.textcraft.recipes import (DEFAULT_MEMBERS, TAGS, Recipe, Recipes, item_name, members,
                                               parse_command, parse_task, plan_actions, plan_text)

WOOD = ["craft 4 oak planks using 1 oak logs", "craft 4 stick using 2 planks",
        "craft 1 chest using 8 planks", "craft 1 crafting table using 4 planks"]
GRANITE = ["craft 2 diorite using 2 quartz, 2 cobblestone", "craft 1 granite using 1 diorite, 1 quartz",
           "craft 4 polished granite using 4 granite", "craft 4 polished granite stairs using 6 polished granite"]


# ---------------------------------------------------------------- parse_command
def test_parse_command():
    assert parse_command("craft 4 oak planks using 1 oak logs") == Recipe("oak planks", 4, (("oak logs", 1),))
    assert parse_command("  Craft 1 Dispenser using 1 redstone, 7 cobblestone, 1 bow.") == \
        Recipe("dispenser", 1, (("redstone", 1), ("cobblestone", 7), ("bow", 1)))
    assert parse_command("craft 1 minecraft:crafting_table using 4 minecraft:oak_planks") == \
        Recipe("crafting table", 1, (("oak planks", 4),))


def test_recipe_command_round_trips_and_scales():
    recipe = parse_command("craft 4 polished granite stairs using 6 polished granite")
    assert str(recipe) == "craft 4 polished granite stairs using 6 polished granite"
    assert parse_command(str(recipe)) == recipe
    chest = parse_command("craft 1 chest using 8 planks")
    assert chest.command(2, {"planks": "oak planks"}) == "craft 2 chest using 16 oak planks"


@pytest.mark.parametrize("text, message", [
    ("craft oak planks using 1 oak logs", r"cannot read the output 'oak planks' in 'craft oak planks"),
    ("craft 4 oak planks from 1 oak logs", r"cannot read the crafting command 'craft 4 oak planks from"),
    ("craft 4 oak planks using oak logs", r"cannot read the ingredient 'oak logs'"),
    ("craft 0 oak planks using 1 oak logs", r"count of 0; counts are positive"),
    ("craft 4 oak planks using 1 oak logs, 0 stick", r"the ingredient '0 stick'.*count of 0"),
    ("craft 4 oak planks using 1 oak logs,", r"cannot read the ingredient ''"),
    ("craft 1 x using 1 a, 2 a", r"names an ingredient twice"),
    ("", r"cannot read the crafting command ''"),
])
def test_parse_command_errors_quote_the_text(text, message):
    with pytest.raises(ValueError, match=message):
        parse_command(text)


def test_parse_command_rejects_non_text():
    with pytest.raises(ValueError, match="a crafting command is a string, not int"):
        parse_command(3)


def test_from_commands_names_the_bad_command():
    with pytest.raises(ValueError, match=r"crafting command 2: cannot read the crafting command 'make a chest'"):
        Recipes.from_commands(["craft 1 chest using 8 planks", "make a chest"])


def test_recipes_by_output_keep_every_recipe():
    recipes = Recipes.from_commands(["craft 1 white dye using 1 bone meal",
                                     "craft 1 white dye using 1 lily of the valley",
                                     "craft 3 bone meal using 1 bone"])
    assert [r.ingredients for r in recipes.by_output["white dye"]] == [(("bone meal", 1),),
                                                                      (("lily of the valley", 1),)]
    assert len(recipes) == 3
    # the solver tries the shallowest first: the flower (depth 1) before the bone meal (depth 2)
    assert [r.ingredients[0][0] for r in recipes.ordered("white dye")] == ["lily of the valley", "bone meal"]
    assert plan_actions("white dye", 1, {}, recipes) == ["get 1 lily of the valley",
                                                         "craft 1 white dye using 1 lily of the valley"]


def test_item_name():
    assert item_name("minecraft:oak_planks") == "oak planks"
    assert item_name("  Oak   Planks ") == "oak planks"


# ---------------------------------------------------------------- tags
@pytest.mark.parametrize("tag, yes, no", [
    ("planks", ["oak planks", "warped planks"], ["planks", "oak logs", "oak slab"]),
    ("wool", ["white wool", "lime wool"], ["wool", "string"]),
    ("logs", ["oak logs", "crimson stems", "dark oak logs"], ["logs", "oak planks", "stems"]),
    ("wooden slabs", ["oak slab", "dark oak slab", "bamboo slab", "cherry slab"], ["stone slab", "granite slab"]),
    ("coals", ["coal", "charcoal"], ["coal block", "coals"]),
    ("stone crafting materials", ["cobblestone", "blackstone", "cobbled deepslate"], ["stone", "granite"]),
    ("stone tool materials", ["cobblestone", "blackstone", "cobbled deepslate"], ["andesite"]),
    ("soul fire base blocks", ["soul sand", "soul soil"], ["sand", "soul torch"]),
])
def test_members(tag, yes, no):
    assert all(members(tag, item) for item in yes)
    assert not any(members(tag, item) for item in no)


def test_members_of_what_is_no_tag():
    assert not members("sticks", "stick") and not members("oak planks", "oak planks")
    assert set(TAGS) == set(DEFAULT_MEMBERS)


def test_base_items_are_known_ingredients_no_recipe_makes():
    recipes = Recipes.from_commands(WOOD + ["craft 1 torch using 1 stick, 1 coals"])
    assert recipes.is_base("oak logs") and recipes.is_base("coal") and recipes.is_base("charcoal")
    assert not recipes.is_base("birch logs")  # no recipe uses it, nor the tag 'logs'
    assert not recipes.is_base("oak planks")  # crafted
    assert not recipes.is_base("planks") and not recipes.is_base("coals")  # tags
    assert not recipes.is_base("diamond")  # unknown to the task
    assert recipes.is_base("birch planks")  # an unproduced member of the used tag 'planks'


def test_tag_resolution_order():
    recipes = Recipes.from_commands(WOOD + ["craft 4 birch planks using 1 birch logs",
                                            "craft 1 torch using 1 stick, 1 coals",
                                            "craft 1 furnace using 8 stone crafting materials",
                                            "craft 1 campfire using 1 stick, 1 coals, 1 logs",
                                            "craft 1 x using 1 blackstone"])
    # nothing held: a member some recipe produces, the default first
    assert recipes.resolve("planks") == "oak planks"
    assert recipes.candidates("planks")[:2] == ["oak planks", "birch planks"]
    # held beats everything, when held in the amount needed
    assert recipes.resolve("planks", {"birch planks": 8}, 8) == "birch planks"
    assert recipes.resolve("planks", {"birch planks": 4}, 8) == "oak planks"
    # a base member the task names beats the default
    assert recipes.resolve("stone crafting materials") == "blackstone"
    # nothing else: the default
    assert recipes.resolve("coals") == "coal" and recipes.resolve("logs") == "oak logs"
    assert recipes.resolve("oak logs") == "oak logs"  # not a tag


def test_default_members():
    recipes = Recipes.from_commands(["craft 1 bed using 3 wool, 3 planks", "craft 1 slabby using 1 wooden slabs",
                                     "craft 1 soul torch using 1 soul fire base blocks, 1 stick",
                                     "craft 1 stone axe using 3 stone tool materials, 2 stick"])
    assert [recipes.resolve(t) for t in ("wool", "planks", "wooden slabs", "soul fire base blocks",
                                         "stone tool materials")] == \
        ["white wool", "oak planks", "oak slab", "soul sand", "cobblestone"]
    assert plan_actions("bed", 1, {}, recipes) == ["get 3 white wool", "get 3 oak planks",
                                                   "craft 1 bed using 3 white wool, 3 oak planks"]


# ---------------------------------------------------------------- depth
def test_recipe_depth_small():
    recipes = Recipes.from_commands(WOOD + GRANITE)
    assert recipes.recipe_depth("oak logs") == 0
    assert recipes.recipe_depth("oak planks") == 1
    assert recipes.recipe_depth("planks") == 1  # the tag as the member the solver picks
    assert recipes.recipe_depth("chest") == 2
    assert recipes.recipe_depth("polished granite stairs") == 4
    with pytest.raises(ValueError, match="unknown item 'diamond'"):
        recipes.recipe_depth("diamond")


def test_recipe_depth_takes_the_easiest_recipe_and_survives_cycles():
    recipes = Recipes.from_commands(["craft 9 iron ingot using 1 iron block", "craft 1 iron block using 9 iron ingot",
                                     "craft 1 iron bars using 6 iron ingot"])
    with pytest.raises(ValueError, match="'iron bars' cannot be made from these recipes"):
        recipes.recipe_depth("iron bars")
    assert plan_actions("iron bars", 1, {}, recipes) is None
    # with a way in, the cycle never lowers a depth and the solver takes the way in
    recipes = Recipes.from_commands(["craft 9 iron ingot using 1 iron block", "craft 1 iron block using 9 iron ingot",
                                     "craft 1 iron ingot using 9 iron nugget", "craft 1 iron bars using 6 iron ingot"])
    assert recipes.recipe_depth("iron ingot") == 1 and recipes.recipe_depth("iron block") == 2
    assert recipes.recipe_depth("iron bars") == 2
    assert plan_actions("iron bars", 1, {}, recipes) == ["get 54 iron nugget",
                                                         "craft 6 iron ingot using 54 iron nugget",
                                                         "craft 1 iron bars using 6 iron ingot"]


def test_dev_goals_are_depth_3_and_4(dev_rows):
    depths = Counter(Recipes.from_commands(r["crafting_commands"]).recipe_depth(r["goal"]) for r in dev_rows)
    assert depths == {3: 29, 4: 11}


def test_first_recipe_depth_would_not_match_the_split(dev_rows):
    """Why depth takes each item's easiest recipe: the first one gives other numbers (the
    docstring of `recipe_depth` says so)."""
    def first_depth(recipes, item):
        if item in TAGS:
            return recipes.recipe_depth(item)
        if item not in recipes.by_output:
            return 0
        return 1 + max(first_depth(recipes, name) for name, _ in recipes.by_output[item][0].ingredients)

    depths = Counter(first_depth(Recipes.from_commands(r["crafting_commands"]), r["goal"]) for r in dev_rows)
    assert depths != {3: 29, 4: 11}


# ---------------------------------------------------------------- parse_task
@pytest.mark.parametrize("text, expected", [
    ("craft 1 polished granite stairs", ("polished granite stairs", 1)),
    ("Craft 4 polished granite stairs using 6 polished granite", ("polished granite stairs", 4)),
    ("fetch 6 polished granite", ("polished granite", 6)),
    ("Fetch 6 polished granite.", ("polished granite", 6)),
    ("get 2 oak logs", ("oak logs", 2)),
    ("Get 2 oak logs", ("oak logs", 2)),
    ("obtain minecraft:oak_planks", ("oak planks", 1)),
    ("OBTAIN 3 minecraft:oak_planks.", ("oak planks", 3)),
    ("craft polished granite stairs", ("polished granite stairs", 1)),
    ("craft a chest", ("chest", 1)),
    ("> get 1 stick", ("stick", 1)),
    ("  fetch 12 string  ", ("string", 12)),
])
def test_parse_task(text, expected):
    assert parse_task(text) == expected


@pytest.mark.parametrize("text", ["", "craft", "fetch 3", "look around", "go to the mine", "craft 0 stick",
                                  "inventory", "get 2", "oak planks"])
def test_parse_task_errors(text):
    with pytest.raises(ValueError, match="task"):
        parse_task(text)


def test_parse_task_rejects_non_text():
    with pytest.raises(ValueError, match="a task is text, not NoneType"):
        parse_task(None)


# ---------------------------------------------------------------- plan_actions
def test_plan_actions_counts_crafts_in_one_command():
    recipes = Recipes.from_commands(GRANITE)
    actions = plan_actions("polished granite stairs", 1, {}, recipes)
    # 1 stairs craft needs 6 polished granite -> 2 crafts of 4 -> 8 granite -> 8 diorite + 8 quartz
    assert actions == ["get 8 quartz", "get 8 cobblestone", "craft 8 diorite using 8 quartz, 8 cobblestone",
                       "get 8 quartz", "craft 8 granite using 8 diorite, 8 quartz",
                       "craft 8 polished granite using 8 granite",
                       "craft 4 polished granite stairs using 6 polished granite"]


def test_plan_actions_uses_held_items_first():
    recipes = Recipes.from_commands(WOOD)
    assert plan_actions("chest", 1, {"oak planks": 8}, recipes) == ["craft 1 chest using 8 oak planks"]
    assert plan_actions("chest", 1, {"oak planks": 5}, recipes) == ["get 1 oak logs",
                                                                    "craft 4 oak planks using 1 oak logs",
                                                                    "craft 1 chest using 8 oak planks"]
    assert plan_actions("chest", 1, {"birch planks": 8}, recipes) == ["craft 1 chest using 8 birch planks"]
    assert plan_actions("chest", 1, {"chest": 1}, recipes) == []
    assert plan_actions("chest", 3, {"chest": 1, "oak planks": 16}, recipes) == ["craft 2 chest using 16 oak planks"]
    assert plan_actions("oak logs", 3, {"oak logs": 1}, recipes) == ["get 2 oak logs"]


def test_plan_actions_keeps_what_one_ingredient_needs_from_the_next():
    """Fetched ingredients are set aside: making the stick must not use the planks the chest-like
    recipe needs, so both are counted."""
    recipes = Recipes.from_commands(WOOD + ["craft 1 sign using 6 planks, 1 stick"])
    actions = plan_actions("sign", 1, {}, recipes)
    assert actions == ["get 2 oak logs", "craft 8 oak planks using 2 oak logs",
                       "craft 4 stick using 2 oak planks", "craft 1 sign using 6 oak planks, 1 stick"]
    env = TextCraft("sign", WOOD + ["craft 1 sign using 6 planks, 1 stick"])
    for action in actions:
        assert not env.failed(env.step(action).observation)
    assert env.solved


def test_plan_actions_impossible():
    recipes = Recipes.from_commands(WOOD)
    assert plan_actions("diamond", 1, {}, recipes) is None
    assert plan_actions("iron pickaxe", 1, {}, recipes) is None


def test_plan_actions_for_a_tag_gives_a_member():
    recipes = Recipes.from_commands(WOOD)
    assert plan_actions("planks", 4, {}, recipes) == ["get 1 oak logs", "craft 4 oak planks using 1 oak logs"]
    assert plan_actions("planks", 4, {"spruce planks": 4}, recipes) == []


def test_plan_actions_does_not_touch_the_inventory():
    recipes = Recipes.from_commands(WOOD)
    inventory = {"oak planks": 3}
    plan_actions("chest", 1, inventory, recipes)
    assert inventory == {"oak planks": 3}


def test_plan_actions_solve_every_dev_task(dev_rows):
    for row in dev_rows:
        env = TextCraft.from_row(row)
        actions = plan_actions(env.goal, 1, env.inventory, env.recipes)
        assert actions, row["id"]
        for action in actions:
            result = env.step(action)
            assert not env.failed(result.observation), (row["id"], action, result.observation)
        assert env.solved and result.reward == 1.0 and result.done, row["id"]
        assert env.summary()["reward"] == 1.0


# ---------------------------------------------------------------- plan_text
def test_plan_text_format():
    recipes = Recipes.from_commands(GRANITE)
    text = plan_text("polished granite stairs", 4, {}, recipes)
    assert text == ("Step 1: Fetch 6 polished granite\n"
                    "Step 2: Craft 4 polished granite stairs using 6 polished granite\n"
                    "Execution Order: (Step 1 AND Step 2)")
    plan = parse_plan(text + "\n")
    assert [s.text for s in plan.steps] == ["Fetch 6 polished granite",
                                            "Craft 4 polished granite stairs using 6 polished granite"]
    assert isinstance(plan.order, nodes.PlanAnd) and [r.number for r in plan.order.items] == [1, 2]


def test_plan_text_counts_crafts_and_resolves_tags():
    recipes = Recipes.from_commands(WOOD)
    assert plan_text("chest", 2, {}, recipes) == ("Step 1: Fetch 16 oak planks\n"
                                                  "Step 2: Craft 2 chest using 16 oak planks\n"
                                                  "Execution Order: (Step 1 AND Step 2)")
    assert plan_text("stick", 6, {"birch planks": 4}, recipes).splitlines()[0] == "Step 1: Fetch 4 birch planks"
    assert plan_text("planks", 4, {}, recipes).splitlines()[-2] == "Step 2: Craft 4 oak planks using 1 oak logs"


def test_plan_text_base_item():
    recipes = Recipes.from_commands(WOOD)
    assert plan_text("oak logs", 2, {}, recipes) == "Step 1: Get 2 oak logs\nExecution Order: (Step 1)"
    plan = parse_plan("Step 1: Get 2 oak logs\nExecution Order: (Step 1)\n")
    assert isinstance(plan.order, nodes.PlanRef)
    with pytest.raises(ValueError, match="unknown item 'diamond'"):
        plan_text("diamond", 1, {}, recipes)


def test_plan_text_fetches_crafted_ingredients_first():
    recipes = Recipes.from_commands(WOOD + ["craft 1 torch using 1 stick, 1 coals",
                                            "craft 1 lantern using 8 iron nugget, 1 torch"])
    lines = plan_text("lantern", 1, {}, recipes).splitlines()
    assert lines == ["Step 1: Fetch 1 torch", "Step 2: Fetch 8 iron nugget",
                     "Step 3: Craft 1 lantern using 8 iron nugget, 1 torch",
                     "Execution Order: (Step 1 AND Step 2 AND Step 3)"]


def test_plan_text_steps_are_tasks(dev_rows):
    """Every step a plan writes reads as a task, naming the concrete item it means."""
    for row in dev_rows:
        recipes = Recipes.from_commands(row["crafting_commands"])
        plan = parse_plan(plan_text(row["goal"], 1, {}, recipes) + "\n")
        assert isinstance(plan.order, nodes.PlanAnd)
        for step in plan.steps:
            item, count = parse_task(step.text)
            assert count >= 1 and item not in TAGS and recipes.known(item), step.text
        assert parse_task(plan.steps[-1].text)[0] == row["goal"]


def test_a_base_member_of_a_used_tag_that_no_recipe_names_has_depth_0(dev_rows):
    """env_9 uses `wooden slabs`: its default member `oak slab` is a base item (gettable) though no
    command names it, so it has a depth, and an environment can have it as goal."""
    recipes = Recipes.from_commands(dev_rows[9]["crafting_commands"])
    assert recipes.is_base("oak slab") and recipes.recipe_depth("oak slab") == 0
