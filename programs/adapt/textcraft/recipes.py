"""TextCraft recipes (ADaPT's crafting benchmark): parsing, tags, recipe depth, sub-task text and
the symbolic solver the `textcraft_executor` / `textcraft_planner` kinds use.

A task lists crafting commands such as `craft 4 oak planks using 1 oak logs`. An ingredient may
be a *tag* (`planks`, `logs`, `coals`...) that any of its concrete members satisfies: `craft 1
chest using 8 planks` accepts 8 oak planks. Items that no recipe produces and that are not tags
are *base* items, fetched with `get N item`; everything else is crafted with exact counts.
"""
from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

__all__ = ["DEFAULT_MEMBERS", "MAX_COUNT", "MAX_SOLVER_DEPTH", "Recipe", "RecipeGraph", "Recipes", "TAGS",
           "item_name", "members", "parse_command", "parse_task", "plan_actions", "plan_text", "read_count"]

#: Wood types whose `<wood> slab` is a wooden slab (Minecraft's `wooden_slabs` tag).
WOODS = ("oak", "spruce", "birch", "jungle", "acacia", "dark oak", "crimson", "warped", "mangrove",
         "cherry", "bamboo")
_STONES = frozenset({"cobblestone", "blackstone", "cobbled deepslate"})

#: Every tag the tasks use, with the test of membership.
TAGS = {
    "planks": lambda item: item.endswith(" planks"),
    "wool": lambda item: item.endswith(" wool"),
    "logs": lambda item: item.endswith((" logs", " stems")),
    "wooden slabs": lambda item: item in {f"{wood} slab" for wood in WOODS},
    "coals": lambda item: item in {"coal", "charcoal"},
    "stone crafting materials": lambda item: item in _STONES,
    "stone tool materials": lambda item: item in _STONES,
    "soul fire base blocks": lambda item: item in {"soul sand", "soul soil"},
}

#: The member a tag stands for when nothing in the task or the inventory suggests another.
DEFAULT_MEMBERS = {
    "planks": "oak planks",
    "wool": "white wool",
    "logs": "oak logs",
    "wooden slabs": "oak slab",
    "coals": "coal",
    "stone crafting materials": "cobblestone",
    "stone tool materials": "cobblestone",
    "soul fire base blocks": "soul sand",
}


def members(tag: str, item: str) -> bool:
    """Whether the concrete `item` may stand in for `tag` (False when `tag` is not a tag)."""
    test = TAGS.get(tag)
    return bool(test and item != tag and item not in TAGS and test(item))


def item_name(text: str) -> str:
    """An item's name as recipes write it: lower case, single spaces, `minecraft:oak_planks` ->
    `oak planks`."""
    name = text.strip().lower()
    if name.startswith("minecraft:"):
        name = name[len("minecraft:"):]
    return " ".join(name.replace("_", " ").split())


@dataclass(frozen=True)
class Recipe:
    """`craft {count} {output} using {m1} {a1}, {m2} {a2}...`: one craft turns the ingredients
    into `count` of `output`."""

    output: str
    count: int
    ingredients: tuple[tuple[str, int], ...]

    def command(self, crafts: int = 1, names: Mapping[str, str] | None = None) -> str:
        """The environment command for `crafts` crafts at once, each ingredient written as
        `names[ingredient]` (a tag's chosen member) when given."""
        names = names or {}
        using = ", ".join(f"{amount * crafts} {names.get(ing, ing)}" for ing, amount in self.ingredients)
        return f"craft {self.count * crafts} {self.output} using {using}"

    def __str__(self) -> str:
        return self.command()


_COUNTED = re.compile(r"(\d+)\s+(\S.*)")

#: The largest count a command, task or action may name (Minecraft's counts are two digits; this
#: keeps every product of counts exact and every count printable).
MAX_COUNT = 10**9


def read_count(digits: str, what: str) -> int:
    """The count written as `digits` (ASCII digits); ValueError naming `what` when it is above
    `MAX_COUNT` (a count thousands of digits long included)."""
    if len(digits.lstrip("0")) > len(str(MAX_COUNT)) or int(digits) > MAX_COUNT:
        raise ValueError(f"{what} has a count of {shorten(digits)}; counts are at most {MAX_COUNT:,}")
    return int(digits)


def shorten(text: str, keep: int = 40) -> str:
    """`text`, or its first `keep` characters and how long it is (for messages about long input)."""
    return text if len(text) <= keep + 20 else f"{text[:keep]}...({len(text)} characters)"


def crafts_for(count: int, recipe: "Recipe") -> int:
    """How many crafts of `recipe` make at least `count` of its output (exact integer division)."""
    return -(-count // recipe.count)


_COMMAND = re.compile(r"craft\s+(.+?)\s+using\s+(.+)", re.IGNORECASE | re.DOTALL)


def _counted(text: str, what: str, whole: str) -> tuple[str, int]:
    match = _COUNTED.fullmatch(text.strip())
    if not match:
        raise ValueError(f"cannot read {what} {text.strip()!r} in {whole!r}: expected 'N item'")
    count = read_count(match.group(1), f"{what} {shorten(text.strip())!r} in {shorten(whole)!r}")
    name = item_name(match.group(2))
    if count <= 0:
        raise ValueError(f"{what} {text.strip()!r} in {whole!r} has a count of {count}; counts are positive")
    if not name:
        raise ValueError(f"{what} {text.strip()!r} in {whole!r} names no item")
    return name, count


def parse_command(text: str) -> Recipe:
    """`craft 4 oak planks using 1 oak logs` as a `Recipe`; ValueError on anything else."""
    if not isinstance(text, str):
        raise ValueError(f"a crafting command is a string, not {type(text).__name__}: {text!r}")
    whole = " ".join(text.split())  # single spaces: the patterns below then never backtrack far
    if whole.startswith(">"):
        whole = whole[1:].strip()
    whole = whole.rstrip(".").strip()
    match = _COMMAND.fullmatch(whole)
    if not match:
        raise ValueError(f"cannot read the crafting command {text!r}: expected "
                         "'craft N item using N ingredient, M ingredient...'")
    output, count = _counted(match.group(1), "the output", text)
    ingredients = tuple(_counted(part, "the ingredient", text) for part in match.group(2).split(","))
    names = [name for name, _ in ingredients]
    if len(set(names)) != len(names):
        raise ValueError(f"the crafting command {text!r} names an ingredient twice")
    return Recipe(output, count, ingredients)


class Recipes:
    """One task's recipes, by output item (an item several recipes produce keeps them all, in
    the order given; the solver tries them shallowest first, see `ordered`). Building one, and
    every depth, takes time linear in the size of the recipes (a task of 20,000 chained recipes
    starts in well under a second)."""

    def __init__(self, recipes: Iterable[Recipe]):
        self.all: tuple[Recipe, ...] = tuple(recipes)
        self.by_output: dict[str, list[Recipe]] = {}
        for recipe in self.all:
            self.by_output.setdefault(recipe.output, []).append(recipe)
        #: Every ingredient named by some recipe (tags included), in order of appearance.
        self.ingredients: dict[str, None] = {}
        for recipe in self.all:
            for name, _ in recipe.ingredients:
                self.ingredients.setdefault(name, None)
        self._used_tags = [name for name in self.ingredients if name in TAGS]
        #: Per tag: its members some recipe produces, and its base members the ingredients name.
        self._produced = {tag: [item for item in self.by_output if members(tag, item)] for tag in TAGS}
        self._named_base = {tag: [item for item in self.ingredients if members(tag, item) and self.is_base(item)]
                            for tag in TAGS}
        self._depths: dict[str, float] | None = None
        self._tag_depths: dict[str, float] = {}

    @classmethod
    def from_commands(cls, commands: Iterable[str]) -> "Recipes":
        recipes = []
        for i, command in enumerate(commands):
            try:
                recipes.append(parse_command(command))
            except ValueError as err:
                raise ValueError(f"crafting command {i + 1}: {err}") from None
        return cls(recipes)

    def __len__(self) -> int:
        return len(self.all)

    # ---- kinds of items
    def produces(self, item: str) -> bool:
        return item in self.by_output

    @staticmethod
    def is_tag(item: str) -> bool:
        return item in TAGS

    def used_tags(self) -> list[str]:
        return list(self._used_tags)

    def is_base(self, item: str) -> bool:
        """Whether `get` fetches `item`: no recipe produces it, it is no tag, and the task knows
        it (an ingredient of some recipe, or a member of a tag some recipe uses)."""
        if item in self.by_output or item in TAGS:
            return False
        return item in self.ingredients or any(members(tag, item) for tag in self._used_tags)

    def known(self, item: str) -> bool:
        return item in self.by_output or item in TAGS or self.is_base(item)

    # ---- tags
    def candidates(self, tag: str, inventory: Mapping[str, int] | None = None, need: int = 1) -> list[str]:
        """The concrete members to try for `tag`, best first: one the inventory holds `need` of,
        then one some recipe produces (shallowest first, the default member first among equals),
        then a base member the task's ingredients name, then the tag's default member."""
        default = DEFAULT_MEMBERS[tag]
        found: dict[str, None] = {}
        for item, count in (inventory or {}).items():
            if count >= need and members(tag, item):
                found.setdefault(item, None)
        depths = self.depths()
        produced = sorted(self._produced[tag], key=lambda item: (depths.get(item, math.inf), item != default))
        found.update(dict.fromkeys(produced))
        found.update(dict.fromkeys(self._named_base[tag]))
        found.setdefault(default, None)
        return list(found)

    def resolve(self, item: str, inventory: Mapping[str, int] | None = None, need: int = 1) -> str:
        """`item` itself, or for a tag the concrete member the solver uses."""
        return self.candidates(item, inventory, need)[0] if item in TAGS else item

    def ordered(self, item: str) -> list[Recipe]:
        """The recipes for `item`, shallowest first (ties in the order given): the order the solver
        tries them in."""
        depths = self.depths()
        return sorted(self.by_output.get(item, ()), key=lambda r: self._recipe_depth(r, depths))

    # ---- depth
    def recipe_depth(self, item: str) -> int:
        """How many crafts deep `item` is, as ADaPT's TextCraft measures it (`CraftingTree.
        get_min_depth`): 0 for a base item, else the smallest, over the item's recipes, of
        1 + the largest depth among that recipe's ingredients (the easiest recipe counts: every
        ingredient must be made, any recipe may be chosen); a tag counts as its shallowest
        member some recipe produces (planks -> oak planks, 1), or as a base member (logs, 0)
        when no recipe produces one. A recipe whose ingredients need the item itself never
        lowers a depth. On the 40 ADaPT dev tasks the goals come out as depth 3 (29) and 4 (11),
        the paper's split; taking each item's *first* recipe instead gives 23/16/1 (a dye made
        the long way round). ValueError for an item the task does not know or cannot make."""
        if item not in TAGS and item not in self.by_output and self.is_base(item):
            return 0  # a base member of a used tag that no recipe names (oak slab for `wooden slabs`)
        depth = self.depths().get(item) if item not in TAGS else self.tag_depth(item)
        if depth is None or depth == math.inf:
            raise ValueError(f"{item!r} cannot be made from these recipes" if self.known(item)
                             else f"unknown item {item!r}: no recipe makes it and it is no base item")
        return int(depth)

    def depths(self) -> dict[str, float]:
        """The depth of every item the recipes name (math.inf: only cyclic recipes make it),
        computed once, in time linear in the recipes (see `RecipeGraph`)."""
        if self._depths is None:
            graph = RecipeGraph(self)
            self._depths, self._tag_depths = graph.item_depths(), graph.tag_depths
        return self._depths

    def _recipe_depth(self, recipe: Recipe, depths: Mapping[str, float]) -> float:
        return 1 + max(self.tag_depth(name) if name in TAGS else depths.get(name, math.inf)
                       for name, _ in recipe.ingredients)

    def tag_depth(self, tag: str) -> float:
        """The depth `tag` counts as (math.inf: none of its members can be had)."""
        self.depths()
        return self._tag_depths.get(tag, math.inf)

    def tag_has_base(self, tag: str) -> bool:
        """Whether a base member stands for `tag` when no recipe can make one of its members."""
        return bool(self._named_base[tag]) or self.is_base(DEFAULT_MEMBERS[tag])

    def tag_members_produced(self, tag: str) -> list[str]:
        """The members of `tag` some recipe produces, in the order of the recipes."""
        return list(self._produced[tag])


class RecipeGraph:
    """The depths of a task's items, by Knuth's generalisation of Dijkstra's algorithm to AND/OR
    graphs: an item is an OR over its recipes, a recipe an AND over its ingredients (1 + the
    largest), a tag an OR over the members some recipe produces. Items are settled in order of
    depth; a recipe is settled when its last ingredient is, at 1 + that ingredient's depth (the
    largest, settled last). Each recipe and ingredient is visited a bounded number of times, so
    time is linear in the recipes (times a log for the heap) and nothing recurses.

    A tag with a base member counts as that member (depth 0) when none of its produced members
    can be made, as `Recipes.recipe_depth` says. Which tags those are is found by a first walk
    in which every such tag counts as its base member; a tag whose produced members can only be
    made from the tag itself (red wool from wool and a dye) then counts as its base member too.
    Each round adds a tag, and there are eight, so the rounds are few."""

    def __init__(self, recipes: Recipes):
        self.recipes = recipes
        #: Per item or tag, the (recipe index, ...) that name it as an ingredient.
        self.users: dict[str, list[int]] = {}
        for index, recipe in enumerate(recipes.all):
            for name, _ in recipe.ingredients:
                self.users.setdefault(name, []).append(index)
        #: Per produced item, the tags it is a member of (the tags some recipe uses, or any tag).
        self.tags_of: dict[str, list[str]] = {}
        for tag in TAGS:
            for item in recipes.tag_members_produced(tag):
                self.tags_of.setdefault(item, []).append(tag)
        self.base = [item for item in recipes.ingredients if item not in TAGS and recipes.is_base(item)]
        self.tag_depths: dict[str, float] = {}

    def _walk(self, base_tags: set[str]) -> dict[str, float]:
        """Every node that can be made, with its depth (tags included): from the base ingredients
        and the tags `base_tags` (depth 0) up."""
        recipes = self.recipes
        waiting = [len(recipe.ingredients) for recipe in recipes.all]
        settled: dict[str, float] = {}
        heap: list[tuple[float, int, str]] = []
        order = 0
        for node in [*self.base, *sorted(base_tags)]:
            heap.append((0, order, node))
            order += 1
        while heap:
            depth, _, node = heapq.heappop(heap)
            if node in settled:
                continue
            settled[node] = depth
            reached: list[tuple[float, str]] = []
            for index in self.users.get(node, ()):
                waiting[index] -= 1
                if waiting[index] == 0:
                    reached.append((depth + 1, recipes.all[index].output))
            if node not in TAGS:
                reached.extend((depth, tag) for tag in self.tags_of.get(node, ()))
            for next_depth, next_node in reached:
                if next_node not in settled:
                    heapq.heappush(heap, (next_depth, order, next_node))
                    order += 1
        return settled

    def item_depths(self) -> dict[str, float]:
        """The depth of every base ingredient and produced item (math.inf: cannot be made); fills
        `tag_depths`."""
        recipes = self.recipes
        fallback = {tag for tag in TAGS if recipes.tag_has_base(tag)}
        makeable = self._walk(fallback)
        base_tags = {tag for tag in fallback
                     if not any(item in makeable for item in recipes.tag_members_produced(tag))}
        while True:
            settled = self._walk(base_tags)
            stuck = {tag for tag in fallback - base_tags if tag not in settled}
            if not stuck:
                break
            base_tags |= stuck
        depths: dict[str, float] = dict.fromkeys(self.base, 0)
        for item in recipes.by_output:
            depths[item] = settled.get(item, math.inf)
        self.tag_depths = {tag: settled.get(tag, math.inf) for tag in TAGS}
        return depths


# ---- sub-tasks
_VERB = re.compile(r"(?:craft|fetch|get|obtain|make|acquire|gather|collect)\b\s*(.*)", re.IGNORECASE | re.DOTALL)
_ARTICLE = re.compile(r"(?:a|an)\s+(\S.*)", re.IGNORECASE | re.DOTALL)


def parse_task(text: str) -> tuple[str, int]:
    """A sub-task as (item, count): `craft 1 polished granite stairs`, `Craft 4 polished granite
    stairs using 6 polished granite`, `fetch 6 polished granite`, `get 2 oak logs`, `obtain
    minecraft:oak_planks` (count 1). Every sub-task means: end with at least `count` of `item`.
    A note after ` -- ` (`craft 1 bowl -- lesson: ...`, as Reflexion writes) is not part of it.
    ValueError when the text is not one."""
    if not isinstance(text, str):
        raise ValueError(f"a task is text, not {type(text).__name__}")
    body = " ".join(text.split(" -- ", 1)[0].split())
    if body.startswith(">"):
        body = body[1:].strip()
    body = body.rstrip(".").strip()
    match = _VERB.fullmatch(body)
    if not match:
        raise ValueError(f"cannot read the task {text.strip()!r}: expected 'craft|fetch|get|obtain [N] item'")
    rest = re.split(r"\s+using\s+", match.group(1), maxsplit=1, flags=re.IGNORECASE)[0].strip()
    counted, article = _COUNTED.fullmatch(rest), _ARTICLE.fullmatch(rest)
    if counted:
        count = read_count(counted.group(1), f"the task {shorten(text.strip())!r}")
        name = item_name(counted.group(2))
    elif article:
        count, name = 1, item_name(article.group(1))
    else:
        count, name = 1, item_name(rest)
    if not name or not re.search(r"[a-z]", name):
        raise ValueError(f"the task {text.strip()!r} names no item")
    if count <= 0:
        raise ValueError(f"the task {text.strip()!r} asks for {count} items; counts are positive")
    return name, count


# ---- the symbolic solver
#: How many crafts deep an item the symbolic solver plans may be (it recurses once per craft;
#: ADaPT's goals are 1 to 4 deep).
MAX_SOLVER_DEPTH = 100


def check_solver_depth(item: str, recipes: Recipes) -> None:
    """ValueError, in words, when `item` is more than `MAX_SOLVER_DEPTH` crafts deep."""
    depth = recipes.depths().get(item) if item not in TAGS else recipes.tag_depth(item)
    if depth is not None and MAX_SOLVER_DEPTH < depth < math.inf:
        raise ValueError(f"{item!r} is {int(depth)} crafts deep; the symbolic solver plans items at most "
                         f"{MAX_SOLVER_DEPTH} crafts deep")


def plan_actions(item: str, count: int, inventory: Mapping[str, int], recipes: Recipes) -> list[str] | None:
    """The environment commands that take `inventory` to holding at least `count` of `item`
    (`get N x` for base items, `craft N x using ...` with exact counts and concrete items, held
    items used first), in an order that works; None when it cannot be done (an unknown item,
    or only cyclic recipes). A tag counts as any of its members. ValueError when `item` is more
    than `MAX_SOLVER_DEPTH` crafts deep."""
    check_solver_depth(item, recipes)
    inv = {k: v for k, v in inventory.items() if v > 0}
    out: list[str] = []
    if not _acquire(item, count, inv, out, recipes, frozenset()):
        return None
    return out


def _acquire(item: str, count: int, inv: dict[str, int], out: list[str], recipes: Recipes,
             active: frozenset[str]) -> bool:
    """Extend `out` so that `inv` (simulated) holds `count` of `item`; False (inv and out left as
    they were) when it cannot."""
    if item in TAGS:
        for member in recipes.candidates(item, inv, count):
            if _acquire(member, count, inv, out, recipes, active):
                return True
        return False
    held = inv.get(item, 0)
    if held >= count:
        return True
    missing = count - held
    if item not in recipes.by_output:
        if not recipes.is_base(item):
            return False
        out.append(f"get {missing} {item}")
        inv[item] = count
        return True
    if item in active:
        return False
    for recipe in recipes.ordered(item):
        crafts = crafts_for(missing, recipe)
        trial_inv, trial_out = dict(inv), list(out)
        if _craft(recipe, crafts, trial_inv, trial_out, recipes, active | {item}):
            inv.clear()
            inv.update(trial_inv)
            out[:] = trial_out
            return True
    return False


def _craft(recipe: Recipe, crafts: int, inv: dict[str, int], out: list[str], recipes: Recipes,
           active: frozenset[str], names: dict[str, str] | None = None) -> bool:
    """Acquire each ingredient of `crafts` crafts, setting it aside as soon as it is held (so a
    later ingredient's own crafting cannot use it up), then craft. `names` receives the concrete
    item used for each ingredient (a tag's member)."""
    names = {} if names is None else names
    reserved: list[tuple[str, int]] = []
    for ingredient, amount in recipe.ingredients:
        need = amount * crafts
        options = recipes.candidates(ingredient, inv, need) if ingredient in TAGS else [ingredient]
        for name in options:
            if _acquire(name, need, inv, out, recipes, active):
                break
        else:
            return False
        names[ingredient] = name
        inv[name] -= need
        reserved.append((name, need))
    for name, _ in reserved:
        if inv.get(name, 0) <= 0:
            inv.pop(name, None)
    out.append(recipe.command(crafts, names))
    inv[recipe.output] = inv.get(recipe.output, 0) + recipe.count * crafts
    return True


def plan_text(item: str, count: int, inventory: Mapping[str, int], recipes: Recipes) -> str:
    """The symbolic planner's plan for `count` of `item`, in ADaPT's planner format:

        Step 1: Fetch 6 polished granite
        Step 2: Craft 4 polished granite stairs using 6 polished granite
        Execution Order: (Step 1 AND Step 2)

    One `Fetch` step per ingredient of the shallowest recipe that can work (a tag written as the
    member it resolves to, each the full amount the crafts need: the executor counts an amount
    already held as done; ingredients that need crafting first, deepest first, so fetching one
    cannot use up another already fetched), then the craft. A base item is `Step 1: Get N item`.
    ValueError for an item that cannot be made or is more than `MAX_SOLVER_DEPTH` crafts deep."""
    item = recipes.resolve(item, inventory, count)
    check_solver_depth(item, recipes)
    if item not in recipes.by_output:
        if not recipes.is_base(item):
            raise ValueError(f"unknown item {item!r}: no recipe makes it and it is no base item")
        return f"Step 1: Get {count} {item}\nExecution Order: (Step 1)"
    recipe, names = _plan_recipe(item, count, inventory, recipes)
    crafts = crafts_for(count, recipe)
    order = sorted(recipe.ingredients, key=lambda ing: -_depth_or(recipes, names[ing[0]]))
    lines = [f"Step {i}: Fetch {amount * crafts} {names[ing]}" for i, (ing, amount) in enumerate(order, 1)]
    using = ", ".join(f"{amount * crafts} {names[ing]}" for ing, amount in recipe.ingredients)
    lines.append(f"Step {len(order) + 1}: Craft {recipe.count * crafts} {item} using {using}")
    steps = " AND ".join(f"Step {i}" for i in range(1, len(order) + 2))
    lines.append(f"Execution Order: ({steps})")
    return "\n".join(lines)


def _depth_or(recipes: Recipes, item: str) -> int:
    try:
        return recipes.recipe_depth(item)
    except ValueError:
        return 0


def _plan_recipe(item: str, count: int, inventory: Mapping[str, int],
                 recipes: Recipes) -> tuple[Recipe, dict[str, str]]:
    """The shallowest recipe for `item` whose crafts the solver can complete from `inventory`,
    with the concrete name of each ingredient (tags resolved); the shallowest when none can."""
    options = recipes.ordered(item)
    for recipe in options:
        crafts = crafts_for(count, recipe)
        inv, names = {k: v for k, v in inventory.items() if v > 0}, {}
        inv.pop(item, None)  # the plan crafts the full amount
        if _craft(recipe, crafts, inv, [], recipes, frozenset({item}), names):
            return recipe, names
    recipe = options[0]
    crafts = crafts_for(count, recipe)
    return recipe, {ing: recipes.resolve(ing, inventory, amount * crafts) for ing, amount in recipe.ingredients}
