"""Environments and effects: steps that can reach an environment act in text order whatever
their latency, foreach items over them one at a time, the loader's marking over the call graph,
the step cache never answering them (model samples still cached), one environment instance per
row (`reset` makes a fresh one), factory errors, unknown environments at check time."""
from __future__ import annotations

from decomp.handlers.plugins import builtin_registry
import asyncio
import string
from typing import Any

import pytest
from click.testing import CliRunner

from decomp import Environment, Failed, FakeModel, Handler, Options, StepResult
from decomp.dsl.checker import effectful
from decomp.dsl.errors import DecompError
from decomp.handlers.registry import Registry, handler_kind
from decomp.runtime.cli import main
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.session import Session


class Toy(Environment):
    """Records every action (with the row it belongs to) in a shared log; an action containing
    "bad" fails; "done" ends the episode with a reward."""

    made = 0

    def __init__(self, fields, log: list):
        Toy.made += 1
        self.number = Toy.made
        self.row = fields.get("id", fields.get("question"))
        self.log, self.actions = log, []

    def start(self):
        return f"start for {self.row}"

    def step(self, action):
        self.actions.append(action)
        self.log.append(action)
        if action == "done":
            return StepResult("finished", reward=1.0, done=True)
        return StepResult(f"bad: {action}" if "bad" in action else f"did {action}")

    def failed(self, observation):
        return observation.startswith("bad")

    def summary(self):
        return {"instance": self.number, "actions": list(self.actions)}


class ActOptions(Options):
    env: str = "env"


def toy_registry(log: list, factory=None, calls_env: bool = False) -> Registry:
    """Built-in kinds; the environment "toy"; kinds `slow` (acts on the environment after a
    delay written at the end of the query: `QS: [slow] a 0.05`; `effects = True`), `via` (the same
    but effectful only through `calls()` naming its environment handler), `plain` (the same delay,
    no environment: logs to `log` directly) and the functions `items` (splits the query on `,`)
    and `capwords`."""
    reg = builtin_registry()
    reg.add_environment("toy", factory or (lambda fields: Toy(fields, log)))
    reg.add_function(lambda query: [s.strip() for s in query.split(",")], "items")
    reg.add_function(string.capwords, "capwords")

    def split(query: str) -> tuple[str, float]:
        action, _, delay = query.rpartition(" ")
        return action, float(delay)

    @handler_kind("slow", registry=reg)
    class Slow(Handler):
        Options = ActOptions
        effects = True

        async def run(self, call):
            action, delay = split(call.query)
            await asyncio.sleep(delay)
            return call.environment(self.options.env).step(action).observation

    @handler_kind("via", registry=reg)
    class Via(Handler):
        Options = ActOptions

        def calls(self):
            return {self.options.env: [self.error_span("env")]}

        async def run(self, call):
            action, delay = split(call.query)
            await asyncio.sleep(delay)
            return call.environment(self.options.env).step(action).observation

    @handler_kind("plain", registry=reg)
    class Plain(Handler):
        async def run(self, call):
            action, delay = split(call.query)
            await asyncio.sleep(delay)
            log.append(action)
            return action

    return reg


def load(src: str, log: list, **kwargs):
    session = Session(registry=toy_registry(log, kwargs.pop("factory", None)), default_model=None, **kwargs)
    return session, session.load("x.decomp", text=src)


def run(src: str, log: list, fields: dict | None = None, **kwargs):
    session, module = load(src, log, **kwargs)
    result = session.run(module, {"question": "q", **(fields or {})})
    return result


HEAD = '''
handler env = environment(name="toy")
handler slow = slow(env="env")
handler via = via(env="env")
handler plain = plain()
handler items = python(function="items")
'''


def program(*lines: str, params: str = "question") -> str:
    body = "".join(f"    {line}\n" for line in lines)
    return HEAD + f"program p({params}) {{\n{body}}}\nmain p\n"


# ------------------------------------------------------------------ text order
@pytest.mark.parametrize("kind", ["slow", "via"])
def test_independent_effectful_steps_act_in_text_order_even_when_the_first_is_slowest(kind):
    log: list = []
    result = run(program(f"QS: [{kind}] a 0.06", f"QS: [{kind}] b 0", f"QS: [{kind}] c 0.02"), log)
    assert result.error is None, result.error
    assert log == ["a", "b", "c"]
    assert result.answer == "did c"


def test_the_same_steps_without_an_environment_run_at_once():
    """The control: the delays alone reorder independent steps (so the test above can fail)."""
    log: list = []
    result = run(program("QS: [plain] a 0.06", "QS: [plain] b 0", "QS: [plain] c 0.02"), log)
    assert result.error is None
    assert log == ["b", "c", "a"]


def test_effectful_steps_wait_for_the_previous_effect_but_not_for_plain_steps():
    log: list = []
    result = run(program("QS: [plain] p1 0.08", "QS: [slow] a 0.02", "QS: [slow] b 0"), log)
    assert result.error is None
    assert log == ["a", "b", "p1"]


def test_the_environment_kind_itself_acts_in_text_order():
    log: list = []
    result = run(program("QS: [slow] a 0.05", "QS: [env] b", "QS: [env] c"), log)
    assert result.error is None
    assert log == ["a", "b", "c"]


def test_an_if_holding_an_effectful_step_waits_for_everything_before_it():
    log: list = []
    src = program("QS: [plain] p1 0.05", "if true {", "    QS: [env] inside", "}", "QS: [env] after")
    result = run(src, log)
    assert result.error is None, result.error
    assert log == ["p1", "inside", "after"]


def test_an_if_without_effects_still_runs_alongside():
    log: list = []
    src = program("QS: [plain] p1 0.05", "if true {", "    QS: [plain] inside 0", "}")
    result = run(src, log)
    assert result.error is None
    assert log == ["inside", "p1"]


def test_a_failed_effect_stops_the_later_ones_only_through_the_program():
    log: list = []
    src = program("QS: [env] bad one", "if ok(#1) {", "    QS: [env] two", "} else {", "    QS: [env] recover",
                  "}")
    result = run(src, log)
    assert result.error is None
    assert log == ["bad one", "recover"]
    assert result.answer == "did recover"


# ------------------------------------------------------------------ foreach
@pytest.mark.parametrize("kind", ["slow", "via"])
def test_foreach_over_an_effectful_handler_runs_items_one_at_a_time_in_order(kind):
    log: list = []
    result = run(program("QS: [items] a 0.06, b 0, c 0.02", f"QS: (foreach) [{kind}] #1"), log)
    assert result.error is None, result.error
    assert log == ["a", "b", "c"]
    assert result.answer == ["did a", "did b", "did c"]


def test_foreach_without_effects_runs_items_at_once():
    log: list = []
    result = run(program("QS: [items] a 0.06, b 0, c 0.02", "QS: (foreach) [plain] #1"), log)
    assert result.error is None
    assert log == ["b", "c", "a"]
    assert result.answer == ["a", "b", "c"]


def test_foreach_of_actions_fails_when_one_fails_and_goes_on():
    log: list = []
    result = run(program("QS: [items] a, bad b, c", "QS: (foreach) [env] #1"), log)
    assert result.error is None
    assert log == ["a", "bad b", "c"]
    assert result.failed and result.answer == ["did a", "bad: bad b", "did c"]


# ------------------------------------------------------------------ marking over the call graph
PROGRAMS = HEAD + '''
handler up = python(function="capwords")
program inner(task) {
    QS: [slow] #task
}
program outer(task) {
    QS: [inner] #task
}
program pure(task) {
    QS: [up] #task
}
program p(question) {
    QS: [outer] a 0.06
    QS: [outer] b 0
    QS: [pure] x
}
main p
'''


def test_programs_that_reach_an_environment_are_marked_effectful():
    log: list = []
    _, module = load(PROGRAMS, log)
    marked = {name for name, h in module.handlers.items() if h.effectful}
    assert marked == {"env", "slow", "via", "inner", "outer", "p"}
    assert not module.handlers["pure"].effectful and not module.handlers["up"].effectful
    assert not module.handlers["plain"].effectful


def test_steps_calling_an_effectful_program_act_in_text_order():
    log: list = []
    result = run(PROGRAMS, log)
    assert result.error is None, result.error
    assert log == ["a", "b"]


def test_effectful_over_a_call_graph():
    class H:
        def __init__(self, *callees):
            self.callees = callees

        def calls(self):
            return {c: [] for c in self.callees}

    graph = {"env": H(), "a": H("env"), "b": H("a"), "c": H("b", "d"), "d": H(), "e": H("missing")}
    assert effectful(graph, ["env"]) == {"env", "a", "b", "c"}
    assert effectful(graph, []) == set()
    assert effectful(graph, ["nope"]) == set()


def test_a_program_of_another_file_that_reaches_an_environment_is_effectful(tmp_path):
    (tmp_path / "other.decomp").write_text(
        'handler env = environment(name="toy")\nhandler slow = slow(env="env")\n'
        'program act(task) {\n    QS: [slow] #task\n}\n', encoding="utf-8")
    (tmp_path / "main.decomp").write_text(
        'handler act = program(file="other.decomp", name="act")\n'
        'program p(question) {\n    QS: [act] a 0.05\n    QS: [act] b 0\n}\nmain p\n', encoding="utf-8")
    log: list = []
    session = Session(registry=toy_registry(log), default_model=None)
    module = session.load(tmp_path / "main.decomp")
    assert module.handlers["act"].effectful and module.handlers["p"].effectful
    result = session.run(module, {"question": "q"})
    assert result.error is None, result.error
    assert log == ["a", "b"]


# ------------------------------------------------------------------ the step cache
def test_the_step_cache_never_answers_effectful_steps(tmp_path):
    log: list = []
    src = program("QS: [slow] a 0", "QS: [via] b 0", "QS: [env] c", "QS: [plain] d 0")
    path = tmp_path / "steps.sqlite"
    results = []
    for _ in range(2):
        session = Session(registry=toy_registry(log), cache=StepCache(path), default_model=None)
        results.append(session.run(session.load("x.decomp", text=src), {"question": "q"}))
    assert [r.error for r in results] == [None, None]
    # the environment saw every action both times; the plain step came from the cache
    assert [a for a in log if a != "d"] == ["a", "b", "c", "a", "b", "c"]
    assert log.count("d") == 1
    assert results[1].usage.cache_hits == 1
    assert results[1].answer == "d"


EXECUTOR = '''
handler env = environment(name="toy")
handler act = executor(environment="env", text="Task: {{ task }}\\n{{ start }}", max_iterations=5)
program p(question) {
    QS: [act] #question
}
main p
'''


def test_executor_model_samples_are_cached_but_its_actions_happen_again(tmp_path):
    log: list = []
    model = FakeModel(answers=["get wood", "craft table", "task completed"])
    path = tmp_path / "steps.sqlite"
    results = []
    for _ in range(2):
        session = Session(registry=toy_registry(log), cache=StepCache(path), model=model)
        results.append(session.run(session.load("x.decomp", text=EXECUTOR), {"question": "make a table"}))
    assert [r.error for r in results] == [None, None]
    assert len(model.history) == 3, "the second run asked the model nothing"
    assert results[1].usage.calls == 0 and results[1].usage.cache_hits == 3
    assert log == ["get wood", "craft table"] * 2
    assert results[0].answer == results[1].answer
    assert results[1].answer["success"] is True and results[1].environments["env"]["actions"] == log[:2]


# ------------------------------------------------------------------ one instance per row
def test_one_environment_instance_per_row_shared_by_its_steps():
    log: list = []
    session, module = load(program("QS: [env] a", "QS: [slow] b 0", "QS: [via] c 0"), log)
    first = session.run(module, {"question": "one"})
    second = session.run(module, {"question": "two"})
    assert first.environments["env"]["actions"] == ["a", "b", "c"]
    assert second.environments["env"]["actions"] == ["a", "b", "c"]
    assert first.environments["env"]["instance"] != second.environments["env"]["instance"]


def test_concurrent_rows_never_share_an_instance():
    log: list = []
    session, module = load(program("QS: [slow] a 0.02", "QS: [slow] #question 0"), log)

    async def both():
        return await asyncio.gather(*(session.arun(module, {"question": q, "id": q}, index=i)
                                      for i, q in enumerate(["x", "y", "z"])))

    results = asyncio.run(both())
    assert [r.error for r in results] == [None, None, None]
    assert [r.environments["env"]["actions"] for r in results] == [["a", "x"], ["a", "y"], ["a", "z"]]
    assert len({r.environments["env"]["instance"] for r in results}) == 3


def test_the_factory_gets_the_rows_fields():
    seen: list = []

    def factory(fields):
        seen.append(dict(fields))
        return Toy(fields, [])

    log: list = []
    result = run(program("QS: [env] a", params="question, level"), log, {"level": 3, "id": "r1"},
                 factory=factory)
    assert result.error is None
    assert seen == [{"question": "q", "level": 3, "id": "r1"}]


def test_reset_makes_a_fresh_instance_and_answers_its_opening():
    log: list = []
    before = Toy.made
    result = run(program("QS: [env] a", "QS: [env] reset", "QS: [env] b"), log, {"id": "r"})
    assert result.error is None
    assert Toy.made == before + 2
    steps = [n for n in result.trace.walk() if n.kind == "step"]
    assert [s.answer for s in steps] == ["did a", "start for r", "did b"]
    # the row's summary is the fresh instance's: only what came after the reset
    assert result.environments["env"] == {"instance": before + 2, "actions": ["b"]}
    assert log == ["a", "b"]


def test_a_failed_observation_is_a_failed_outcome():
    log: list = []
    result = run(program("QS: [env] bad move"), log)
    assert result.error is None
    assert result.failed and result.answer == "bad: bad move"


def test_an_empty_action_is_a_row_error():
    log: list = []
    result = run(program("QS: [items] x", "QS: [env] #question", params="question"), log, {"question": " "})
    assert result.error is not None and "[env]" in result.error and "action is empty" in result.error


# ------------------------------------------------------------------ factory errors
def test_a_factory_that_raises_is_a_row_error_naming_the_handler():
    def factory(fields):
        raise KeyError("goal")

    log: list = []
    result = run(program("QS: [env] a"), log, factory=factory)
    assert result.answer is None
    assert result.error.startswith("[env] environment, x.decomp:")
    assert "environment 'toy' cannot start for this row: KeyError: 'goal'" in result.error


def test_a_factory_that_raises_under_another_kind_names_that_handler():
    def factory(fields):
        raise ValueError("no such task")

    log: list = []
    result = run(program("QS: [slow] a 0"), log, factory=factory)
    assert result.error.startswith("[slow] slow, x.decomp:")
    assert "cannot start for this row: ValueError: no such task" in result.error


def test_a_factory_returning_no_environment_is_a_row_error():
    log: list = []
    result = run(program("QS: [env] a"), log, factory=lambda fields: object())
    assert result.error is not None and "[env]" in result.error
    assert "returned object, not an Environment" in result.error


def test_call_environment_of_a_handler_that_is_no_environment_is_a_row_error():
    log: list = []
    src = HEAD + 'handler wrong = slow(env="items")\nprogram p(question) {\n    QS: [wrong] a 0\n}\nmain p\n'
    result = run(src, log)
    assert result.error is not None and "[items] is not an environment handler of this file" in result.error
    assert result.error.startswith("[wrong]")


# ------------------------------------------------------------------ check time
def test_unknown_environment_name_is_a_check_error(tmp_path):
    path = tmp_path / "x.decomp"
    path.write_text('handler env = environment(name="no_such_env_xyz")\n'
                    'program p(question) {\n    QS: [env] a\n}\nmain p\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1
    assert f"{path}:1:32: [env] unknown environment 'no_such_env_xyz'" in result.output
    assert "expected one of:" in result.output and "textcraft" in result.output


def test_unknown_environment_name_fails_the_load_of_a_session():
    log: list = []
    with pytest.raises(DecompError) as info:
        load('handler env = environment(name="nope")\nmain env\n', log)
    assert "[env] unknown environment 'nope'" in str(info.value)
    assert info.value.expected.startswith("one of: ") and "toy" in info.value.expected


def test_an_executor_naming_an_unknown_environment_handler_is_a_check_error():
    log: list = []
    with pytest.raises(DecompError) as info:
        load('handler act = executor(environment="ghost", text="{{ task }}")\nmain act\n', log)
    assert "[act] names an unknown environment handler 'ghost'" in str(info.value)


# ------------------------------------------------------------------ decomposers may run any handler
DECOMPOSER = HEAD + '''
handler dec = decomposer(examples="QC: hi\\nQS: [plain] x 0\\nA: \\"x\\"\\nQS: [EOQ]\\n")
program p(question) {
    QS: [dec] go
    QS: [slow] b 0
}
main p
'''


def test_a_decomposer_whose_model_names_an_effectful_handler_acts_in_text_order():
    """The decomposer's calls() lists nothing, but its model may write `[slow] ...`: it is effectful
    when any handler of its module is, so a later effectful step waits for it."""
    log: list = []
    model = FakeModel(script={"go": ["[slow] a 0.06", "[EOQ]"]})
    session = Session(registry=toy_registry(log), model=model)
    module = session.load("x.decomp", text=DECOMPOSER)
    assert module.handlers["dec"].effectful and module.handlers["p"].effectful
    result = session.run(module, {"question": "q"})
    assert result.error is None, result.error
    assert log == ["a", "b"]
    assert result.environments["env"]["actions"] == ["a", "b"]


def test_a_decomposer_in_a_module_without_environments_is_not_effectful():
    registry = builtin_registry()
    registry.add_function(string.capwords, "capwords")
    session = Session(registry=registry, model=FakeModel())
    module = session.load("x.decomp", text='handler up = python(function="capwords")\n'
                                           'handler dec = decomposer(examples="QC: hi\\nQS: [up] x\\nA: \\"X\\"\\n'
                                           'QS: [EOQ]\\n")\nmain dec\n')
    assert not module.handlers["dec"].effectful


# ------------------------------------------------------------------ a kind not marked as acting
def _sneaky_registry(log: list) -> Registry:
    """toy_registry plus `sneaky`: acts on [env] without effects = True, ActsOnEnvironment or calls()."""
    reg = toy_registry(log)

    @handler_kind("sneaky", registry=reg)
    class Sneaky(Handler):
        async def run(self, call):
            return call.environment("env").step(call.query).observation

    return reg


SNEAKY = 'handler env = environment(name="toy")\nhandler sn = sneaky()\nprogram p(question) {\n    QS: [sn] act\n}\nmain p\n'


def test_call_environment_from_a_handler_not_marked_effectful_is_a_row_error(tmp_path):
    """Were it allowed, its answer would be cached and the action replayed from the cache on the
    next run, never reaching the environment."""
    log: list = []
    path = tmp_path / "steps.sqlite"
    results = []
    for _ in range(2):
        session = Session(registry=_sneaky_registry(log), cache=StepCache(path), default_model=None)
        module = session.load("x.decomp", text=SNEAKY)
        assert not module.handlers["sn"].effectful
        results.append(session.run(module, {"question": "q"}))
    for result in results:
        assert result.answer is None and result.error is not None
        assert result.error.startswith("[sn] sneaky, x.decomp:")
        assert "[sn] acts on [env] but is not marked as acting on an environment" in result.error
        assert result.usage.cache_hits == 0
    assert log == []


# ------------------------------------------------------------------ two declarations of one name
def test_two_environment_declarations_of_one_name_both_keep_their_summary(tmp_path):
    (tmp_path / "lib.decomp").write_text('handler env = environment(name="toy")\n'
                                         'program act(q) {\n    QS: [env] #q\n}\n', encoding="utf-8")
    (tmp_path / "main.decomp").write_text(
        'handler env = environment(name="toy")\nhandler sub = program(file="lib.decomp", name="act")\n'
        'program p(question) {\n    QS: [env] a\n    QS: [sub] b\n}\nmain p\n', encoding="utf-8")
    log: list = []
    session = Session(registry=toy_registry(log), default_model=None)
    result = session.run(session.load(tmp_path / "main.decomp"), {"question": "q"})
    assert result.error is None, result.error
    assert log == ["a", "b"]
    envs = result.environments
    other = f"env@{tmp_path / 'lib.decomp'}:1"  # the second declaration of the name: by file and line
    assert list(envs) == ["env", other]
    assert envs["env"]["actions"] == ["a"] and envs[other]["actions"] == ["b"]
    assert envs["env"]["instance"] != envs[other]["instance"]


def test_three_declarations_of_one_name_in_one_folder_keep_three_summaries(tmp_path):
    for name in ("lib1", "lib2"):
        (tmp_path / f"{name}.decomp").write_text('handler env = environment(name="toy")\n'
                                                 'program act(q) {\n    QS: [env] #q\n}\n', encoding="utf-8")
    (tmp_path / "main.decomp").write_text(
        'handler env = environment(name="toy")\nhandler s1 = program(file="lib1.decomp", name="act")\n'
        'handler s2 = program(file="lib2.decomp", name="act")\n'
        'program p(question) {\n    QS: [env] a\n    QS: [s1] b\n    QS: [s2] c\n}\nmain p\n', encoding="utf-8")
    log: list = []
    session = Session(registry=toy_registry(log), default_model=None)
    result = session.run(session.load(tmp_path / "main.decomp"), {"question": "q"})
    assert result.error is None and log == ["a", "b", "c"]
    assert [summary["actions"] for summary in result.environments.values()] == [["a"], ["b"], ["c"]]


# ------------------------------------------------------------------ the close hook
class Closing(Toy):
    """A Toy that counts the calls of its close hook (in `closed`, by instance number)."""

    closed: list = []

    def close(self):
        Closing.closed.append(self.number)


def test_close_is_called_when_the_row_ends_and_when_reset_replaces_an_instance():
    log: list = []
    Closing.closed = []
    result = run(program("QS: [env] a", "QS: [env] reset", "QS: [env] b"), log,
                 factory=lambda fields: Closing(fields, log))
    assert result.error is None, result.error
    first, second = result.environments["env"]["instance"] - 1, result.environments["env"]["instance"]
    assert Closing.closed == [first, second]  # the replaced one at the reset, the fresh one at the row's end


def test_close_is_called_when_the_row_ends_in_an_error():
    log: list = []
    Closing.closed = []
    result = run(program("QS: [env] a", "QS: [items] x", "QS: [env] #question"), log, {"question": " "},
                 factory=lambda fields: Closing(fields, log))
    assert result.error is not None
    assert Closing.closed == [result.environments["env"]["instance"]]


def test_a_close_hook_that_raises_is_recorded_not_raised():
    class Broken(Toy):
        def close(self):
            raise RuntimeError("stuck")

    log: list = []
    result = run(program("QS: [env] a"), log, factory=lambda fields: Broken(fields, log))
    assert result.error is None and result.answer == "did a"
    assert result.environments["close error"] == "RuntimeError: stuck"
