"""The TextCraft environment: rows, every observation, exact counts, tags, reward and summary."""
import pytest

from decomp.handlers.environment import Environment
from decomp.handlers.plugins import load as load_plugins
from decomp.programs.adapt.textcraft.env import TextCraft, make_textcraft

COMMANDS = ["craft 4 oak planks using 1 oak logs", "craft 4 stick using 2 planks", "craft 1 chest using 8 planks",
            "craft 1 torch using 1 stick, 1 coals", "craft 1 wooden pickaxe using 2 stick, 3 planks"]
ROW = {"id": "t", "goal": "chest", "crafting_commands": COMMANDS}


@pytest.fixture
def env():
    return TextCraft.from_row(ROW)


def step(env, action):
    return env.step(action).observation


# ---------------------------------------------------------------- rows
def test_registered_as_textcraft():
    import decomp  # noqa: F401  (registers every built-in kind and environment)

    assert load_plugins().environment("textcraft") is make_textcraft
    assert isinstance(make_textcraft(ROW), TextCraft) and isinstance(make_textcraft(ROW), Environment)


@pytest.mark.parametrize("fields, message", [
    ({"crafting_commands": COMMANDS}, r"the row's 'goal' must be non-empty text, not None"),
    ({"goal": "  ", "crafting_commands": COMMANDS}, r"the row's 'goal' must be non-empty text, not '  '"),
    ({"goal": 3, "crafting_commands": COMMANDS}, r"'goal' must be non-empty text, not 3"),
    ({"goal": "chest"}, r"the row's 'crafting_commands' must be a list of strings, not NoneType"),
    ({"goal": "chest", "crafting_commands": "craft 1 chest using 8 planks"},
     r"'crafting_commands' must be a list of strings, not str"),
    ({"goal": "chest", "crafting_commands": ["craft 1 chest using 8 planks", 7]},
     r"'crafting_commands': command 2 is int 7, not a string"),
    ({"goal": "chest", "crafting_commands": ["craft 1 chest using 8 planks", "chest please"]},
     r"the row's 'crafting_commands': crafting command 2: cannot read the crafting command 'chest please'"),
    ({"goal": "diamond sword", "crafting_commands": COMMANDS},
     r"the row's 'goal' 'diamond sword': unknown item 'diamond sword'"),
    ({"goal": "make it so", "crafting_commands": COMMANDS}, r"the row's 'goal' 'make it so'"),
])
def test_bad_rows(fields, message):
    with pytest.raises(ValueError, match=message):
        TextCraft.from_row(fields)


def test_start(env):
    assert env.start() == "Crafting commands:\n" + "\n".join(COMMANDS) + "\n\nGoal: craft chest."


def test_attributes(env):
    assert env.goal == "chest" and env.goal_count == 1 and env.inventory == {}
    assert set(env.recipes.by_output) == {"oak planks", "stick", "chest", "torch", "wooden pickaxe"}


def test_goal_with_a_count():
    env = TextCraft.from_row({"goal": "2 chest", "crafting_commands": COMMANDS})
    assert (env.goal, env.goal_count) == ("chest", 2)
    env.inventory["oak planks"] = 16
    assert env.step("craft 1 chest using 8 oak planks").reward == 0.0
    assert env.step("craft 1 chest using 8 oak planks").reward == 1.0


# ---------------------------------------------------------------- get
def test_get(env):
    assert step(env, "get 2 oak logs") == "Got 2 oak logs"
    assert step(env, "> Get 1 Oak Logs.") == "Got 1 oak logs"
    assert step(env, "get coal") == "Got 1 coal"
    assert step(env, "get 1 charcoal") == "Got 1 charcoal"  # a member of a tag a recipe uses
    assert step(env, "get 2 minecraft:oak_logs") == "Got 2 oak logs"
    assert env.inventory == {"oak logs": 5, "coal": 1, "charcoal": 1}


@pytest.mark.parametrize("action, observation", [
    ("get 1 chest", "Could not find 1 chest"),        # craftable
    ("get 4 oak planks", "Could not find 4 oak planks"),
    ("get 4 planks", "Could not find 4 planks"),      # a tag
    ("get 1 coals", "Could not find 1 coals"),
    ("get 1 diamond", "Could not find 1 diamond"),    # unknown to the task
    ("get 0 oak logs", "Could not find 0 oak logs"),
])
def test_get_fails(env, action, observation):
    assert step(env, action) == observation
    assert env.failed(observation) and env.inventory == {}


# ---------------------------------------------------------------- craft
def test_craft(env):
    step(env, "get 2 oak logs")
    assert step(env, "craft 8 oak planks using 2 oak logs") == "Crafted 8 minecraft:oak_planks"
    assert step(env, "Craft 4 stick using 2 oak planks.") == "Crafted 4 minecraft:stick"
    assert env.inventory == {"oak planks": 6, "stick": 4}
    assert step(env, "> craft 1 wooden pickaxe using 3 oak planks, 2 stick") == "Crafted 1 minecraft:wooden_pickaxe"
    assert env.inventory == {"oak planks": 3, "stick": 2, "wooden pickaxe": 1}


def test_craft_with_a_tag_member(env):
    env.inventory.update({"birch planks": 4, "oak planks": 4, "stick": 1, "charcoal": 1})
    assert step(env, "craft 4 stick using 2 birch planks") == "Crafted 4 minecraft:stick"
    assert step(env, "craft 1 torch using 1 stick, 1 charcoal") == "Crafted 1 minecraft:torch"
    # the tag itself is not an item
    assert step(env, "craft 4 stick using 2 planks") == "Could not find a valid recipe for stick"
    # a member of another tag does not stand in
    assert step(env, "craft 4 stick using 2 oak logs") == "Could not find a valid recipe for stick"


@pytest.mark.parametrize("action", [
    "craft 3 oak planks using 1 oak logs",             # not a multiple of the output count
    "craft 8 oak planks using 1 oak logs",             # ingredient count does not match 2 crafts
    "craft 4 oak planks using 2 oak logs",
    "craft 4 oak planks using 1 oak logs, 1 stick",    # an extra ingredient
    "craft 1 wooden pickaxe using 3 oak planks",       # a missing ingredient
    "craft 1 wooden pickaxe using 3 oak planks, 3 stick",
    "craft 4 oak planks using 1 birch logs",           # not the recipe's ingredient
])
def test_craft_needs_exact_counts_and_ingredients(env, action):
    env.inventory.update({"oak logs": 5, "birch logs": 5, "oak planks": 10, "stick": 10})
    before = dict(env.inventory)
    target = action.split(" using ")[0].split(" ", 2)[2]
    assert step(env, action) == f"Could not find a valid recipe for {target}"
    assert env.inventory == before


def test_craft_unknown_target(env):
    assert step(env, "craft 1 diamond sword using 2 diamond, 1 stick") == \
        "Could not find a valid recipe for diamond sword"


def test_craft_without_the_ingredients(env):
    assert step(env, "craft 1 chest using 8 oak planks") == "Could not find enough items to craft minecraft:chest"
    env.inventory["oak planks"] = 7
    assert step(env, "craft 1 chest using 8 oak planks") == "Could not find enough items to craft minecraft:chest"
    assert env.inventory == {"oak planks": 7}


def test_ingredient_order_does_not_matter(env):
    env.inventory.update({"stick": 2, "oak planks": 3})
    assert step(env, "craft 1 wooden pickaxe using 2 stick, 3 oak planks") == "Crafted 1 minecraft:wooden_pickaxe"


def test_several_crafts_at_once(env):
    env.inventory["oak logs"] = 3
    assert step(env, "craft 12 oak planks using 3 oak logs") == "Crafted 12 minecraft:oak_planks"
    assert env.inventory == {"oak planks": 12}


def test_another_recipe_for_the_same_item():
    env = TextCraft("stick", ["craft 4 stick using 2 planks", "craft 1 stick using 1 bamboo"])
    env.inventory["bamboo"] = 2
    assert step(env, "craft 2 stick using 2 bamboo") == "Crafted 2 minecraft:stick"


# ---------------------------------------------------------------- inventory and the rest
def test_inventory(env):
    assert step(env, "inventory") == "Inventory: You are not carrying anything."
    step(env, "get 1 oak logs")
    step(env, "get 2 coal")
    step(env, "craft 4 oak planks using 1 oak logs")
    assert step(env, "> Inventory.") == "Inventory: [coal] (2) [oak planks] (4)"
    assert not env.failed("Inventory: [coal] (2) [oak planks] (4)")


@pytest.mark.parametrize("action", ["look around", "craft 1 chest", "craft chest using planks", "", "go north"])
def test_not_understood(env, action):
    observation = step(env, action)
    assert observation == f'Could not understand the action "{action}"; use get, craft or inventory.'
    assert env.failed(observation)


def test_failed():
    env = TextCraft.from_row(ROW)
    assert env.failed("Could not find 1 chest")
    assert not env.failed("Got 1 oak logs") and not env.failed("Crafted 1 minecraft:chest")


# ---------------------------------------------------------------- reward and summary
def test_reward_done_and_summary(env):
    assert env.summary() == {"goal": "chest", "success": False, "reward": 0.0, "actions": 0,
                             "recipe_depth": 2, "group": "depth 2"}
    result = env.step("get 2 oak logs")
    assert (result.reward, result.done) == (0.0, False)
    result = env.step("craft 8 oak planks using 2 oak logs")
    assert (result.reward, result.done) == (0.0, False)
    assert env.step("inventory").reward == 0.0
    result = env.step("craft 1 chest using 8 oak planks")
    assert result.observation == "Crafted 1 minecraft:chest"
    assert (result.reward, result.done) == (1.0, True)
    assert env.summary() == {"goal": "chest", "success": True, "reward": 1.0, "actions": 4,
                             "recipe_depth": 2, "group": "depth 2"}


def test_failed_action_counts_but_earns_nothing(env):
    env.inventory["chest"] = 1  # held, but no craft or get has happened
    assert env.step("inventory").reward == 0.0
    assert env.step("get 1 chest").reward == 0.0
    assert env.step("get 1 oak logs").reward == 1.0  # the goal is held after a get
    assert env.summary()["actions"] == 3 and env.summary()["success"]


def test_dev_rows_start_and_summarise(dev_rows):
    groups = set()
    for row in dev_rows:
        env = TextCraft.from_row(row)
        assert env.start().startswith("Crafting commands:\n" + row["crafting_commands"][0])
        assert env.start().endswith(f"\n\nGoal: craft {row['goal']}.")
        summary = env.summary()
        groups.add(summary["group"])
        assert summary["recipe_depth"] in (3, 4) and summary["reward"] == 0.0
    assert groups == {"depth 3", "depth 4"}
