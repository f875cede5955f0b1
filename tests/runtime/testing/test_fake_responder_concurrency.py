"""A `fake:module:function` responder answers as many calls at once as the run's concurrency
lets in (issue 44, item 10): a plain function runs in a thread of its own per call, an `async
def` one is awaited; before, every call ran on the event loop, one at a time."""
from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import textwrap
import time

import pytest

from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.models.base import ModelError, Request
from decomp.runtime.runs.api import RunOptions, run_dataset
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.testing.fake import fake_model

_names = itertools.count()
NAP, CALLS, CONCURRENCY = 0.3, 8, 4

SLEEPY = f'''
import asyncio
import sys
import time

def slow(request):
    time.sleep({NAP})
    return request.prompt.upper()

async def slow_async(request):
    await asyncio.sleep({NAP})
    return request.prompt.upper()

def leaves(request):
    sys.exit(3)

async def broken(request):
    raise KeyError("no answer")

def number(request):
    return 12
'''

ASK = '''
handler ask = prompt(text="Q: {{ query }}\\nA:", max_tokens=8)
program main(question: str) -> str {
    QS: [ask] #question
}
main main
'''


@pytest.fixture
def responders(tmp_path, monkeypatch):
    """The module of responders above, in the working folder; its name."""
    name = f"sleepy_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SLEEPY))
    monkeypatch.chdir(tmp_path)
    return name


def timed_calls(model, concurrency: int = CONCURRENCY, calls: int = CALLS) -> tuple[float, list[str]]:
    """`calls` requests through a scheduler of `concurrency`: the seconds they took, the texts."""
    scheduler = Scheduler(concurrency)

    async def main():
        return await asyncio.gather(*(scheduler.complete(model, Request(f"q{i}")) for i in range(calls)))

    started = time.perf_counter()
    done = asyncio.run(main())
    return time.perf_counter() - started, [c.text for c in done]


@pytest.mark.parametrize("function", ["slow", "slow_async"])
def test_calls_overlap_up_to_the_concurrency(responders, function):
    seconds, texts = timed_calls(fake_model(f"{responders}:{function}"))
    assert texts == [f"Q{i}" for i in range(CALLS)]
    serial = CALLS * NAP
    assert seconds < serial / 2  # 2 rounds of 4: about 0.6 s, where one at a time took 2.4 s
    assert seconds >= (CALLS / CONCURRENCY) * NAP * 0.9  # and never more than 4 at once


def test_one_at_a_time_when_the_concurrency_says_so(responders):
    seconds, _ = timed_calls(fake_model(f"{responders}:slow"), concurrency=1, calls=3)
    assert seconds >= 3 * NAP * 0.9


def test_the_history_and_replies_are_kept_in_the_order_requests_came(responders):
    model = fake_model(f"{responders}:slow")
    timed_calls(model, calls=4)
    assert model.prompts == [f"q{i}" for i in range(4)]
    assert sorted(model.replies) == [(f"Q{i}",) for i in range(4)]


@pytest.mark.parametrize("function, said", [
    ("leaves", "raised SystemExit: 3"),       # in its thread: that call's error, not the run's end
    ("broken", "raised KeyError: 'no answer'"),
    ("number", "returned int, not a string"),
])
def test_what_a_responder_does_wrong_is_that_calls_model_error(responders, function, said):
    model = fake_model(f"{responders}:{function}")
    with pytest.raises(ModelError, match=f"responder {responders}:{function} {said}"):
        asyncio.run(model.complete(Request("q")))


def test_a_dataset_run_at_concurrency_4_overlaps_its_calls(responders, tmp_path):
    (tmp_path / "p.decomp").write_text(ASK)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"id": str(i), "question": f"q{i}"}) + "\n"
                                                 for i in range(CALLS)))
    started = time.perf_counter()
    done = run_dataset(tmp_path / "p.decomp", tmp_path / "rows.jsonl", model=f"fake:{responders}:slow",
                       options=RunOptions(concurrency=CONCURRENCY, cache_mode="off"), run_dir=tmp_path / "run")
    assert time.perf_counter() - started < CALLS * NAP / 2 + 1.0
    assert done.failed == 0
    model = RunDir.open(tmp_path / "run").summary()["models"][f"fake:{responders}:slow"]
    assert model["service_mean_s"] == pytest.approx(NAP, abs=0.1)
    assert model["queue_mean_s"] == pytest.approx(NAP / 2, abs=0.1)  # half of them waited one call


def test_from_the_command_line(responders, tmp_path):
    """`decomp run ... --model fake:module:function --concurrency 4`, a real process: the wall
    time of the run is that of two rounds of calls, not eight."""
    (tmp_path / "p.decomp").write_text(ASK)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"id": str(i), "question": f"q{i}"}) + "\n"
                                                 for i in range(CALLS)))
    out = subprocess.run([sys.executable, "-m", "decomp", "run", "p.decomp", "--input", "rows.jsonl",
                          "--model", f"fake:{responders}:slow", "--concurrency", str(CONCURRENCY),
                          "--cache", "off", "--run-dir", "run"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["wall_s"] < CALLS * NAP / 2
    model = summary["models"][f"fake:{responders}:slow"]
    assert model["queue_mean_s"] > 0 and model["service_mean_s"] == pytest.approx(NAP, abs=0.1)
