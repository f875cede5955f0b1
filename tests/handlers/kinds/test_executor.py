"""The `executor` kind (ADaPT's ReAct executor) with FakeModel answers over a toy environment:
thinking, actions, the model's verdicts, the success rules, patience, max_iterations, empty
lines, `state_action`, the template's variables, the trace, and its errors."""
from __future__ import annotations

from decomp.handlers.plugins import builtin_registry
import pytest

from decomp import Environment, FakeModel, StepResult
from decomp.dsl.errors import DecompError
from decomp.handlers.registry import Registry
from decomp.runtime.engine.budgets import Budget
from decomp.runtime.engine.session import Session


class Craft(Environment):
    """get X: adds X to the inventory; inventory: lists it; win: a reward; done: a reward and the
    end of the episode; an action containing "bad": "Could not ..." (failed); else nothing happens."""

    def __init__(self, fields, log):
        self.goal = fields.get("goal", "")
        self.items: list[str] = []
        self.log = log

    def start(self):
        return f"Crafting commands for {self.goal or 'nothing'}."

    def step(self, action):
        self.log.append(action)
        if action.startswith("get "):
            self.items.append(action[4:])
            return StepResult(f"Got {action[4:]}")
        if action == "inventory":
            return StepResult(f"Inventory: {self.items}")
        if action == "win":
            return StepResult("You win", reward=1.0)
        if action == "done":
            return StepResult("Finished", reward=1.0, done=True)
        if "bad" in action:
            return StepResult(f"Could not {action}")
        return StepResult("Nothing happens.")

    def failed(self, observation):
        return observation.startswith("Could not")

    def summary(self):
        return {"items": list(self.items)}


TEMPLATE = "Task: {{ task }}\\n{{ start }}\\nState: {{ state }}"


def module_text(options: str = "", template: str = TEMPLATE, extra: str = "", body: str = "QS: [act] #question",
                params: str = "question") -> str:
    opts = f", {options}" if options else ""
    return (f'handler env = environment(name="craft")\n'
            f'handler act = executor(environment="env", text="{template}"{opts})\n{extra}'
            f'program p({params}) {{\n    {body}\n}}\nmain p\n')


def run(answers, options: str = "", fields: dict | None = None, **kwargs):
    """Run the executor on the task "make it"; (result, model, environment log)."""
    log: list[str] = []
    reg = builtin_registry()
    reg.add_environment("craft", lambda row: Craft(row, log))
    model = answers if isinstance(answers, FakeModel) else FakeModel(answers=answers)
    session = Session(registry=reg, model=model, budget=kwargs.pop("budget", None))
    src = module_text(options, **kwargs)
    result = session.run(session.load("x.decomp", text=src), {"question": "make it", **(fields or {})})
    return result, model, log


def iterations(result):
    return [n for n in result.trace.walk() if n.kind == "iteration"]


# ------------------------------------------------------------------ a turn at a time
def test_think_gets_ok_and_actions_are_stepped_until_task_completed():
    result, model, log = run(["think: I need wood", "get wood", "task completed"])
    assert result.error is None, result.error
    assert not result.failed
    assert log == ["get wood"]
    assert result.answer == {
        "task": "make it", "success": True, "judge": "model", "model_said": "completed", "reward": 0.0,
        "stopped": "the model said completed", "iterations": 3, "actions": ["get wood"],
    }
    prompts = model.prompts
    # each prompt ends with ">": the model writes the line's blank and its text
    assert prompts[0] == "Task: make it\nCrafting commands for nothing.\nState: \n>"
    assert prompts[1] == prompts[0] + " think: I need wood\nOK.\n>"
    assert prompts[2] == prompts[1] + " get wood\nGot wood\n>"
    assert len(prompts) == 3


def test_each_turn_is_an_iteration_node_with_its_line_and_observation():
    result, _, _ = run(["think: hm", "get wood", "bad craft", "task completed"])
    nodes = iterations(result)
    assert [(n.label, n.answer) for n in nodes] == [
        ("think: hm", "OK."), ("get wood", "Got wood"), ("bad craft", "Could not bad craft"),
        ("task completed", "OK."),
    ]
    call = next(n for n in result.trace.walk() if n.kind == "call" and n.handler == "act")
    assert [c.kind for c in call.children] == ["model", "iteration"] * 4


def test_model_requests_stop_at_the_line_end_with_the_options():
    result, model, _ = run(["get wood", "task completed"], "max_tokens=20, temperature=0.5")
    assert result.error is None
    assert all(r.stop == ("\n",) and r.max_tokens == 20 and r.temperature == 0.5 for r in model.history)


def test_the_models_line_loses_a_leading_marker_and_blanks():
    result, _, log = run(["  > get wood  ", "TASK COMPLETED."])
    assert log == ["get wood"]
    assert result.answer["success"] is True and result.answer["actions"] == ["get wood"]


def test_task_failed_is_a_failed_outcome():
    result, _, log = run(["get wood", "Task failed: no table"])
    assert result.error is None
    assert result.failed
    assert result.answer["success"] is False and result.answer["model_said"] == "failed"
    assert result.answer["judge"] == "either"
    assert result.answer["stopped"] == "the model said failed"
    assert log == ["get wood"]


def test_a_failed_attempt_can_be_handled_by_the_program():
    body = "QS: [act] #question\n    if not ok(#1) {\n        QS: [act] again\n    }"
    result, _, log = run(["bad one", "task failed", "get wood", "task completed"], body=body)
    assert result.error is None and not result.failed
    assert result.answer["task"] == "again" and result.answer["success"] is True
    assert log == ["bad one", "get wood"]


# ------------------------------------------------------------------ success rules
@pytest.mark.parametrize("rule, answers, success, judge", [
    ("model", ["task completed"], True, "model"),
    ("model", ["done"], False, "model"),
    ("model", ["win", "task completed"], True, "model+reward"),
    ("reward", ["task completed"], False, "reward"),
    ("reward", ["done"], True, "reward"),
    ("reward", ["win", "task failed"], True, "reward"),
    ("either", ["task completed"], True, "model"),
    ("either", ["done"], True, "reward"),
    ("either", ["get wood", "task failed"], False, "either"),
    ("both", ["task completed"], False, "both"),
    ("both", ["done"], False, "both"),
    ("both", ["win", "task completed"], True, "model+reward"),
])
def test_success_rules(rule, answers, success, judge):
    result, _, _ = run(answers, f'success="{rule}"')
    assert result.error is None, result.error
    assert result.answer["success"] is success
    assert result.answer["judge"] == judge
    assert result.failed is (not success)


def test_the_environment_being_done_ends_the_attempt():
    result, model, log = run(["get wood", "done", "never asked"])
    assert log == ["get wood", "done"]
    assert len(model.history) == 2
    assert result.answer["stopped"] == "the environment is done"
    assert result.answer["reward"] == 1.0 and result.answer["model_said"] is None


def test_the_default_rule_is_either():
    result, _, _ = run(["win", "task failed"])
    assert result.answer["success"] is True and result.answer["judge"] == "reward"


def test_an_unknown_success_rule_is_refused():
    with pytest.raises(DecompError):
        run(["task completed"], 'success="vibes"')


# ------------------------------------------------------------------ limits
def test_patience_ends_after_that_many_failed_actions_in_a_row():
    result, model, log = run(["bad a", "bad b", "never asked"], "patience=2")
    assert result.failed
    assert log == ["bad a", "bad b"]
    assert result.answer["stopped"] == "patience (2 failed actions in a row)"
    assert result.answer["iterations"] == 2 and len(model.history) == 2


def test_a_thought_does_not_break_a_run_of_failures_but_a_successful_action_does():
    # a thought between failures does not count as an action: the run of failures goes on
    result, _, log = run(["bad a", "think: hm", "bad b", "never"], "patience=2")
    assert log == ["bad a", "bad b"] and result.answer["iterations"] == 3
    # a successful action breaks the run
    result, _, log = run(["bad a", "get x", "bad b", "bad c", "never"], "patience=2")
    assert log == ["bad a", "get x", "bad b", "bad c"]
    assert result.answer["stopped"].startswith("patience")


def test_without_patience_failures_go_on():
    result, _, log = run(["bad a", "bad b", "bad c", "task completed"])
    assert log == ["bad a", "bad b", "bad c"] and result.answer["success"] is True


def test_max_iterations_ends_the_attempt():
    model = FakeModel(default="think: still thinking")
    result, model, log = run(model, "max_iterations=3")
    assert result.error is None
    assert result.failed
    assert result.answer["stopped"] == "max_iterations (3)"
    assert result.answer["iterations"] == 3 and len(model.history) == 3
    assert len(iterations(result)) == 3 and log == []


def test_an_empty_line_stops_the_attempt():
    result, model, log = run(["get wood", "   ", "never asked"])
    assert len(model.history) == 2
    assert result.failed and result.answer["stopped"] == "the model wrote nothing"
    assert iterations(result)[-1].label == "(nothing)"
    assert log == ["get wood"]


def test_an_empty_line_after_a_reward_still_succeeds():
    result, _, _ = run(["win", ""])
    assert not result.failed and result.answer["stopped"] == "the model wrote nothing"


def test_budget_of_model_calls_ends_the_row():
    result, _, _ = run(FakeModel(default="think: x"), "max_iterations=10", budget=Budget(row_calls=2))
    assert result.error is not None and "budget" in result.error.lower()
    assert result.answer is None


# ------------------------------------------------------------------ the template
def test_state_action_is_observed_before_the_first_turn_and_shown_in_the_prompt():
    body = "QS: [act] first\n    QS: [act] second"
    result, model, log = run(["get wood", "task completed", "task completed"], 'state_action="inventory"', body=body)
    assert result.error is None, result.error
    assert log == ["inventory", "get wood", "inventory"]
    first, second = model.prompts[0], model.prompts[2]
    assert first.endswith("State: Inventory: []\n>")
    # the same row's environment: the second task sees what the first achieved
    assert second.startswith("Task: second\n") and second.endswith("State: Inventory: ['wood']\n>")
    assert result.environments == {"env": {"items": ["wood"]}}
    assert result.answer["actions"] == []  # the state action is no action of the attempt


def test_template_sees_inputs_start_and_named_inputs():
    template = "{{ task }}|{{ goal }}|{{ inputs.goal }}|{{ start }}"
    result, model, _ = run(["task completed"], template=template, params="question, goal",
                           fields={"goal": "table"})
    assert result.error is None, result.error
    assert model.prompts[0] == "make it|table|table|Crafting commands for table.\n>"


def test_template_from_a_file(tmp_path):
    (tmp_path / "exec.j2").write_text("File task: {{ task }}\n", encoding="utf-8")
    log: list = []
    reg = builtin_registry()
    reg.add_environment("craft", lambda row: Craft(row, log))
    model = FakeModel(answers=["task completed"])
    path = tmp_path / "x.decomp"
    path.write_text('handler env = environment(name="craft")\n'
                    'handler act = executor(environment="env", file="exec.j2")\n'
                    'program p(question) {\n    QS: [act] #question\n}\nmain p\n', encoding="utf-8")
    session = Session(registry=reg, model=model)
    result = session.run(session.load(path), {"question": "go"})
    assert result.error is None, result.error
    assert model.prompts[0] == "File task: go\n>"


def test_an_undefined_template_variable_is_a_row_error():
    result, model, _ = run(["task completed"], template="{{ nope }}")
    assert result.error is not None
    assert result.error.startswith("[act] executor, x.decomp:")
    assert "template: UndefinedError" in result.error
    assert model.history == []


def test_a_template_that_does_not_parse_is_a_check_error():
    with pytest.raises(DecompError) as info:
        run(["task completed"], template="{{ task ")
    assert "template of [act]" in str(info.value)


def test_an_executor_without_a_template_is_a_check_error():
    log: list = []
    reg = builtin_registry()
    reg.add_environment("craft", lambda row: Craft(row, log))
    session = Session(registry=reg, model=FakeModel())
    with pytest.raises(DecompError) as info:
        session.load("x.decomp", text='handler env = environment(name="craft")\n'
                                      'handler act = executor(environment="env")\nmain act\n')
    assert "[act] needs file=... or text=..." in str(info.value)


@pytest.mark.parametrize("line, column", [
    ('handler act = executor(environment="up", text="x")', 36),
    ('handler act = textcraft_executor(environment="up")', 46),
])
def test_check_refuses_an_executor_over_a_handler_that_is_no_environment(tmp_path, line, column):
    from click.testing import CliRunner

    from decomp.runtime.cli import main

    path = tmp_path / "x.decomp"
    path.write_text('handler up = python(function="capwords")\n' + line + '\n'
                    'program p(question) {\n    QS: [act] #question\n}\nmain p\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1, result.output
    assert f"{path}:2:{column}: [act] acts on [up], which is a python handler, not an environment" in result.output
    assert "expected the name of an environment(...) handler" in result.output
