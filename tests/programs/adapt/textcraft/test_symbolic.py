"""The symbolic TextCraft kinds (`textcraft_executor`, `textcraft_planner`), a pure-Python
reference ADaPT controller over the same solver, and the same controller as a .decomp program."""
import asyncio
from collections import Counter
from pathlib import Path

import pytest

from decomp import Session
from decomp.dsl import nodes
from decomp.dsl.errors import HandlerError
from decomp.dsl.parser import parse_plan
from decomp.dsl.values import Failed
from decomp.handlers.base import LoadContext
from decomp.handlers.plugins import load as load_plugins
from decomp.programs.adapt.textcraft.env import TextCraft
from decomp.programs.adapt.textcraft.recipes import parse_task, plan_actions, plan_text
from decomp.programs.adapt.textcraft.symbolic import TextCraftExecutor, TextCraftPlanner

COMMANDS = ["craft 4 oak planks using 1 oak logs", "craft 4 stick using 2 planks", "craft 1 chest using 8 planks"]
ROW = {"id": "t", "goal": "chest", "crafting_commands": COMMANDS}


class FakeCall:
    """What the kinds use of `Call`: the query, the row's environment, trace children."""

    def __init__(self, query, env):
        self.query, self.env, self.children, self.asked = query, env, [], []

    def environment(self, handler, fresh=False):
        self.asked.append(handler)
        return self.env

    def child(self, kind, **fields):
        self.children.append((kind, fields))


def make(cls, environment="craft"):
    return cls("h", cls.Options(environment=environment), None, LoadContext(Path(".")))


def execute(env, task):
    call = FakeCall(task, env)
    return asyncio.run(make(TextCraftExecutor).run(call)), call


def plan(env, task):
    return asyncio.run(make(TextCraftPlanner).run(FakeCall(task, env)))


def test_registered():
    import decomp  # noqa: F401

    assert load_plugins().kind("textcraft_executor") is TextCraftExecutor
    assert load_plugins().kind("textcraft_planner") is TextCraftPlanner
    for cls in (TextCraftExecutor, TextCraftPlanner):
        handler = make(cls, "world")
        assert handler.calls() == {"world": [None]}
        assert cls.cacheable is False


def test_options_are_checked():
    with pytest.raises(Exception, match="environment"):
        TextCraftExecutor.Options()
    with pytest.raises(Exception, match="extra"):
        TextCraftExecutor.Options(environment="craft", model="x")


# ---------------------------------------------------------------- executor
def test_executor_one_action():
    env = TextCraft.from_row(ROW)
    answer, call = execute(env, "get 2 oak logs")
    assert answer == {"task": "get 2 oak logs", "success": True, "judge": "symbolic", "reward": 0.0,
                      "stopped": "done", "iterations": 1, "actions": ["get 2 oak logs"]}
    assert call.asked == ["craft"]
    assert call.children == [("iteration", {"label": "get 2 oak logs", "answer": "Got 2 oak logs", "failed": False})]
    answer, _ = execute(env, "Craft 8 oak planks using 2 oak logs")
    assert answer["success"] and answer["actions"] == ["craft 8 oak planks using 2 oak logs"]
    answer, call = execute(env, "craft 1 chest")
    assert answer["success"] and answer["reward"] == 1.0
    assert call.children[0][1]["answer"] == "Crafted 1 minecraft:chest"
    assert env.summary()["success"]


def test_executor_already_held_is_done_without_acting():
    env = TextCraft.from_row(ROW)
    env.inventory["oak planks"] = 8
    answer, call = execute(env, "Fetch 6 oak planks")
    assert answer["success"] and answer["stopped"] == "done" and answer["iterations"] == 0 and answer["actions"] == []
    assert call.children == [] and env.actions == 0


def test_executor_fails_without_acting_when_one_action_is_not_enough():
    env = TextCraft.from_row(ROW)
    answer, call = execute(env, "craft 1 chest")
    assert isinstance(answer, Failed)
    assert answer.value == {"task": "craft 1 chest", "success": False, "judge": "symbolic", "reward": 0.0,
                            "stopped": "cannot do it in one action", "iterations": 0, "actions": []}
    assert call.children == [] and env.actions == 0 and env.inventory == {}


def test_executor_impossible_and_unreadable():
    env = TextCraft.from_row(ROW)
    answer, _ = execute(env, "get 1 diamond")
    assert isinstance(answer, Failed) and answer.value["stopped"] == "impossible"
    answer, _ = execute(env, "dance a jig")
    assert isinstance(answer, Failed)
    assert answer.value["why"].startswith("unreadable task: cannot read the task 'dance a jig'")
    assert env.actions == 0


def test_executor_needs_a_textcraft_environment():
    class Other:
        pass

    with pytest.raises(HandlerError, match=r"the environment of \[craft\] is Other, not a TextCraft environment"):
        asyncio.run(make(TextCraftExecutor).run(FakeCall("get 1 oak logs", Other())))


# ---------------------------------------------------------------- planner
def test_planner():
    env = TextCraft.from_row(ROW)
    text = plan(env, "craft 1 chest")
    assert text == ("Step 1: Fetch 8 oak planks\nStep 2: Craft 1 chest using 8 oak planks\n"
                    "Execution Order: (Step 1 AND Step 2)")
    assert plan(env, "Fetch 2 oak logs") == "Step 1: Get 2 oak logs\nExecution Order: (Step 1)"
    env.inventory["spruce planks"] = 8
    assert plan(env, "craft 1 chest").splitlines()[0] == "Step 1: Fetch 8 spruce planks"
    assert env.actions == 0


def test_planner_failures():
    env = TextCraft.from_row(ROW)
    answer = plan(env, "dance a jig")
    assert isinstance(answer, Failed) and answer.value.startswith("unreadable task: cannot read the task")
    answer = plan(env, "craft 1 diamond sword")
    assert isinstance(answer, Failed) and answer.value.startswith("no plan: unknown item 'diamond sword'")


# ---------------------------------------------------------------- reference ADaPT controller
class Controller:
    """ADaPT (Prasad et al., 2024) in plain Python over the symbolic executor and planner: try the
    task with the executor (one atomic attempt, as `textcraft_executor`); on failure, below the
    depth bound, plan it (`plan_text`, as `textcraft_planner`) and run the steps in the plan's
    AND/OR order, each one recursively one level deeper."""

    def __init__(self, env, dmax):
        self.env, self.dmax = env, dmax
        self.calls = Counter()

    def execute(self, task):
        self.calls["executor"] += 1
        env = self.env
        item, count = parse_task(task)
        if env.inventory.get(item, 0) >= count:
            return True
        actions = plan_actions(item, count, env.inventory, env.recipes)
        if actions is None or len(actions) != 1:
            return False
        observation = env.step(actions[0]).observation
        return not env.failed(observation) and env.inventory.get(item, 0) >= count

    def adapt(self, task, depth=1):
        if depth > self.dmax:
            return False
        if self.execute(task):
            return True
        if depth == self.dmax:
            return False
        self.calls["planner"] += 1
        item, count = parse_task(task)
        text = plan_text(item, count, self.env.inventory, self.env.recipes)
        steps = parse_plan(text + "\n")
        return self.run(steps, steps.execution_order(), depth + 1)

    def run(self, steps, order, depth):
        if isinstance(order, nodes.PlanRef):
            return self.adapt(steps.step(order.number).text, depth)
        if isinstance(order, nodes.PlanAnd):
            return all(self.run(steps, item, depth) for item in order.items)
        return any(self.run(steps, item, depth) for item in order.items)


def reference(dev_rows, dmax):
    """(ids solved, depth of each solved goal, executor calls per task, planner calls per task)."""
    solved, depths, calls = [], Counter(), Counter()
    for row in dev_rows:
        env = TextCraft.from_row(row)
        controller = Controller(env, dmax)
        ok = controller.adapt(f"craft 1 {env.goal}")
        assert ok == env.solved, row["id"]  # success means the goal is in the inventory
        calls.update(controller.calls)
        if ok:
            solved.append(row["id"])
            depths[env.depth] += 1
    n = len(dev_rows)
    return solved, depths, calls["executor"] / n, calls["planner"] / n


@pytest.mark.parametrize("dmax", [1, 2, 3])
def test_reference_controller_too_shallow_solves_nothing(dev_rows, dmax):
    solved, _, executor, planner = reference(dev_rows, dmax)
    assert solved == []
    # the goal's executor fails, then each level plans once and stops at its first failed step
    assert (executor, planner) == (dmax, dmax - 1)


def test_reference_controller_dmax_4_solves_the_depth_3_tasks(dev_rows):
    solved, depths, executor, planner = reference(dev_rows, 4)
    depth3 = [r["id"] for r in dev_rows if TextCraft.from_row(r).depth == 3]
    assert solved == depth3 and depths == {3: 29}
    assert (executor, planner) == (9.025, 3.725)  # calls per task, over all 40


def test_reference_controller_dmax_5_solves_all(dev_rows):
    for dmax in (5, 6):
        solved, depths, executor, planner = reference(dev_rows, dmax)
        assert len(solved) == 40 and depths == {3: 29, 4: 11}
        assert (executor, planner) == (11.775, 4.35)


# ---------------------------------------------------------------- the same, run by the engine
ADAPT = '''
handler craft   = environment(name="textcraft")
handler execute = textcraft_executor(environment="craft")
handler plan    = textcraft_planner(environment="craft")

program adapt(task) with max_depth = 8 {
    QS: [execute] #task
    if not ok(#1) and depth() < DMAX {
        QS: [plan] #task
        QS: (plan) [adapt] #2
    }
}

program main(goal) {
    QS: [adapt] craft 1 #goal
}
main main
'''


def _calls(node, found):
    if node.kind == "call":
        found[node.handler] += 1
    for child in node.children:
        _calls(child, found)
    return found


@pytest.mark.parametrize("dmax, solved, executor, planner", [(4, 29, 9.025, 3.725), (5, 40, 11.775, 4.35)])
def test_engine_runs_adapt_as_the_reference_does(tmp_path, dev_rows, dmax, solved, executor, planner):
    path = tmp_path / "adapt.decomp"
    path.write_text(ADAPT.replace("DMAX", str(dmax)))
    session = Session()
    module = session.load(path)
    calls, groups = Counter(), Counter()
    for row in dev_rows:
        result = session.run(module, row)
        assert result.error is None, (row["id"], result.error)
        summary = result.environments["craft"]
        assert summary["success"] == (not result.failed), row["id"]
        groups[summary["group"], summary["success"]] += 1
        _calls(result.trace, calls)
    assert sum(n for (_, ok), n in groups.items() if ok) == solved
    assert groups["depth 3", True] == 29
    assert (calls["execute"] / 40, calls["plan"] / 40) == (executor, planner)


# ---------------------------------------------------------------- the bundled methods (programs/adapt)
def _bundled(name="adapt/textcraft_symbolic", **session_kwargs):
    from decomp.runtime.runs.api import find_program

    session = Session(**session_kwargs)
    return session, session.load(str(find_program(name)))


# a goal of recipe depth 9: item1 from item2 ... from item10 (fetched)
CHAIN = {"id": "chain", "goal": "item1",
         "crafting_commands": [f"craft 1 item{i} using 1 item{i + 1}" for i in range(1, 10)]}


@pytest.mark.parametrize("dmax, solved", [(9, False), (10, True), (16, True)])
def test_bundled_adapt_runs_deeper_than_8(dmax, solved):
    """methods.decomp allows dmax up to 16: a depth-9 goal needs dmax 10, and dmax 9 is a failed
    row, not one that ends at a max_depth."""
    assert TextCraft.from_row(CHAIN).depth == 9
    session, module = _bundled()
    result = session.run(module, {**CHAIN, "dmax": dmax})
    assert result.error is None, result.error
    assert result.failed is not solved
    assert result.environments["env"]["success"] is solved


def test_bundled_adapt_easy_row_with_dmax_9(dev_rows):
    session, module = _bundled()
    result = session.run(module, {**dev_rows[0], "dmax": 9})
    assert result.error is None, result.error
    assert not result.failed


def test_bundled_adapt_with_a_model_that_always_fails_stops_at_dmax_9(dev_rows):
    """The model's executor always fails and its planner always plans one step: the recursion goes
    down to dmax (9 here) and the row fails without an error."""
    from decomp import FakeModel

    def answer(request):
        return " task failed" if request.prompt.rstrip().endswith(">") else \
            "Step 1: fetch 1 oak planks\nExecution Order: (Step 1)"

    session, module = _bundled("adapt/textcraft", model=FakeModel(default=answer))
    result = session.run(module, {**dev_rows[0], "dmax": 9})
    assert result.error is None, result.error
    assert result.failed
    adapt_calls = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "adapt"]
    assert len(adapt_calls) == 9


@pytest.mark.parametrize("main", ["retry", "reflect_retry"])
def test_bundled_retries_up_to_9_tries(dev_rows, main):
    session, module = _bundled()
    result = session.run(module, {**dev_rows[0], "tries": 9}, target=main)
    assert result.error is None, result.error
    acts = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "act"]
    assert len(acts) == 9 and result.failed


# ---------------------------------------------------------------- Reflexion's lessons
def test_parse_task_leaves_out_a_lesson_note():
    assert parse_task("craft 1 bowl -- lesson: fetch the planks first") == ("bowl", 1)
    assert parse_task('Craft 4 polished granite stairs using 6 polished granite -- lesson: "x" -- lesson: "y"') == \
        ("polished granite stairs", 4)
    assert parse_task("fetch 6 polished granite -- lesson: ") == ("polished granite", 6)


def test_executor_reads_a_task_with_lessons_as_the_task():
    env = TextCraft.from_row(ROW)
    answer, _ = execute(env, "get 1 oak logs -- lesson: get it")
    assert answer["success"] and env.inventory["oak logs"] == 1


def test_symbolic_reflexion_retries_the_real_task(dev_rows):
    """Every attempt of `reflect_retry` stops for the same reason as the first (one action is not
    enough), none as an unknown or impossible task because of the lesson written after it."""
    session, module = _bundled()
    result = session.run(module, {**dev_rows[0], "tries": 3}, target="reflect_retry")
    assert result.error is None, result.error
    acts = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "act"]
    assert [a.query.count(" -- lesson: ") for a in acts] == [0, 1, 2]
    assert [a.answer["stopped"] for a in acts] == ["cannot do it in one action"] * 3
