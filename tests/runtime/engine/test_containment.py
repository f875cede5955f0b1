"""Plugin kinds run contained (decomp.runtime.engine.containment, issue 29 B8): a kind's own
code that blocks, never returns or raises what is not an `Exception` ends that call within its
limit, as that call's error, while the run's loop and the other rows go on; every answer is
sized before it is kept, cached or traced."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from decomp.dsl.errors import BudgetExceeded, HandlerError
from decomp.handlers.base import Handler, Options
from decomp.handlers.sandbox.offload import TimeLimitError
from decomp.handlers.registry import handler_kind
from decomp.handlers.plugins import builtin_registry
from decomp.dsl.sizes import CYCLIC, answer_size
from decomp.runtime.engine.budgets import Budget
from decomp.runtime.engine.containment import contained
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

REPO = Path(__file__).resolve().parents[3]


class ModeOptions(Options):
    mode: str = "ok"
    timeout: float | None = None


async def hostile(mode: str, call):
    """What the probe's kinds did, by name."""
    if mode == "sleep":
        time.sleep(4)  # blocks its thread: the run's loop must not notice
    elif mode == "await":
        await asyncio.Event().wait()
    elif mode == "spin":
        while True:
            await asyncio.sleep(0)
    elif mode == "exit":
        raise SystemExit(0)
    elif mode == "interrupt":
        raise KeyboardInterrupt
    elif mode == "base":
        raise BaseException("odd")
    elif mode == "cancelled":
        raise asyncio.CancelledError()
    elif mode == "model":  # engine work does not count against the kind's own time
        texts = await call.complete("slow")
        return texts[0]
    elif mode == "big":
        return "x" * (3 * 2**20)
    elif mode == "cycle":
        loop: list = []
        loop.append(loop)
        return loop
    return f"ok {call.query}"


def registry():
    reg = builtin_registry()

    @handler_kind("hostile", registry=reg)
    class Hostile(Handler):
        Options = ModeOptions
        cacheable = False

        async def run(self, call):
            return await hostile(self.options.mode, call)

    return reg


SRC = '''
handler h = hostile(mode="{mode}", timeout=0.5)
program p(question) {{
    QS: [h] #question
}}
main p
'''


class SlowModel(FakeModel):
    """A model that takes its time (engine work, on the run's loop)."""

    async def complete(self, request):
        await asyncio.sleep(1.2)
        return await super().complete(request)


def run(mode: str, **session):
    s = Session(registry=registry(), **session)
    module = s.load("x.decomp", text=SRC.format(mode=mode))
    started = time.monotonic()
    result = s.run(module, {"question": "q"})
    return result, time.monotonic() - started


def test_kinds_from_outside_the_package_are_contained_and_built_ins_are_not():
    reg = registry()
    assert contained(reg.kind("hostile")("h", ModeOptions(), None, None)) is True
    from decomp.handlers.kinds.regex import RegexHandler
    assert RegexHandler.contained is None and not RegexHandler.__module__.startswith("tests")

    class Trusted(Handler):
        contained = False
    assert contained(Trusted("t", Options(), None, None)) is False


@pytest.mark.parametrize("mode", ["sleep", "await", "spin"])
def test_a_kind_that_never_returns_ends_within_its_limit(mode):
    result, seconds = run(mode)
    assert result.error is not None and "ran longer than its time limit of 0.5 s" in result.error, result.error
    assert "the hostile kind's own code" in result.error
    assert seconds < 3.5  # the limit, not the 4 s sleep or forever


@pytest.mark.parametrize("mode, name", [("exit", "SystemExit"), ("interrupt", "KeyboardInterrupt"),
                                        ("base", "BaseException: odd"), ("cancelled", "CancelledError")])
def test_what_is_not_an_exception_is_that_calls_error(mode, name):
    result, _ = run(mode)
    assert result.error is not None and f"the hostile kind's code raised {name}" in result.error, result.error
    assert "taken as this call's error" in result.error


def test_time_awaiting_the_engine_is_not_the_kinds_own():
    result, seconds = run("model", model=SlowModel(default="slow answer"))
    assert (result.answer, result.error) == ("slow answer", None)
    assert seconds >= 1.2  # the model's 1.2 s, over the kind's 0.5 s limit, did not count


def test_the_runs_loop_goes_on_while_a_kind_blocks():
    """While one row's kind sleeps in its thread, another row's steps run to the end."""
    s = Session(registry=registry())
    sleeper = s.load("a.decomp", text=SRC.format(mode="sleep"))
    quick = s.load("b.decomp", text=SRC.format(mode="ok"))

    async def both():
        slow = asyncio.ensure_future(s.arun(sleeper, {"question": "a"}))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        fast = await s.arun(quick, {"question": "b"})
        return fast, time.monotonic() - started, await slow

    fast, seconds, slow = asyncio.run(both())
    assert fast.answer == "ok b" and seconds < 0.4
    assert "ran longer than its time limit" in slow.error


def test_a_contained_kind_runs_in_another_thread_and_sees_the_rows_fields():
    seen = {}
    reg = builtin_registry()

    @handler_kind("where", registry=reg)
    class Where(Handler):
        cacheable = False

        async def run(self, call):
            seen["thread"] = threading.current_thread().name
            return await call.run_handler("echo", f"via {call.query}")

    src = 'handler w = where()\nhandler echo = regex(pattern="(.*)")\nprogram p(question) {\n QS: [w] #question\n}\nmain p\n'
    s = Session(registry=reg)
    result = s.run(s.load("x.decomp", text=src), {"question": "q"})
    assert (result.answer, result.error) == ("via q", None)
    assert seen["thread"] == "decomp-kind"


def test_answers_over_the_size_limit_end_the_row_before_they_are_kept():
    result, _ = run("big", budget=Budget(answer_mb=2))
    assert result.answer is None
    assert "the answer of [h] holds 3.0 MiB of text, over the limit of 2 MiB (raise it with --max-answer-size MB)" \
        in result.error
    result, _ = run("big", budget=Budget(answer_mb=4))
    assert result.error is None and len(result.answer) == 3 * 2**20


def test_an_answer_that_holds_itself_is_refused_in_words():
    result, _ = run("cycle")
    assert "holds itself (a list or dict within itself)" in result.error


def test_answer_size_counts_shared_values_as_often_as_their_text_would_hold_them():
    x: list = ["ab"]
    for _ in range(200):
        x = [x, x]
    assert answer_size(x) == 2 * 2**200  # linear in the distinct lists, not their text
    assert answer_size({"key": ["abc", 1, None]}) == 3 + 3 + 8 + 8
    y: list = [1]
    y.append([y])
    assert answer_size(y) == CYCLIC
    deep: list = []
    for _ in range(200_000):
        deep = [deep]
    assert answer_size(deep) == 0  # no recursion limit reached


def test_errors_and_limits_are_the_engines_own_kinds():
    assert issubclass(TimeLimitError, HandlerError) and issubclass(BudgetExceeded, Exception)


PLUGIN = '''
import asyncio, time
from decomp import Handler, Options, handler_kind

class ModeOptions(Options):
    timeout: float | None = None

@handler_kind("moody")
class Moody(Handler):
    Options = ModeOptions
    async def run(self, call):
        if call.query == "sleep":
            time.sleep(30)
        if call.query == "await":
            await asyncio.Event().wait()
        if call.query == "exit":
            raise SystemExit(0)
        if call.query == "interrupt":
            raise KeyboardInterrupt
        return "fine " + call.query
'''


def test_decomp_run_over_rows_with_hostile_plugin_code_answers_every_other_row(tmp_path):
    """The probe, through the command: a --plugin kind that sleeps, awaits forever or raises
    SystemExit/KeyboardInterrupt on some rows; those rows record the error, the others are
    answered, the run exits 3 (rows failed) with a summary, not 0 with nothing."""
    (tmp_path / "moody.py").write_text(PLUGIN)
    (tmp_path / "m.decomp").write_text('handler m = moody(timeout=1)\nprogram p(question) {\n QS: [m] #question\n}\nmain p\n')
    questions = ["a", "sleep", "b", "await", "c", "exit", "d", "interrupt", "e"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": str(i), "question": q}) + "\n" for i, q in enumerate(questions)))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "run", "m.decomp", "--input", "rows.jsonl",
                           "--plugin", "moody.py", "--run-dir", "out", "--cache", "off"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    results = {r["id"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert len(results) == len(questions)
    for i, q in enumerate(questions):
        r = results[str(i)]
        if len(q) == 1:
            assert r["answer"] == f"fine {q}", r
        else:
            assert r["outcome"] == "error", r
    assert "ran longer than its time limit of 1 s" in results["1"]["error"]
    assert "ran longer than its time limit of 1 s" in results["3"]["error"]
    assert "raised SystemExit" in results["5"]["error"]
    assert "raised KeyboardInterrupt" in results["7"]["error"]
    assert json.loads(proc.stdout.splitlines()[0])["failed"] == 4
    assert seconds < 60  # not the 30 s sleep per row, nor forever
