"""decomp.runtime.engine.scheduler: per-endpoint concurrency, priority order, cancellation, retries with
backoff (Retry-After honoured, slot released while backing off), requests/tokens per minute and a
service's call deadline.

Timing: the machine may be heavily loaded, so nothing here asserts an upper bound on wall-clock
time; order and counts are asserted instead, rate limits and Retry-After run on a fake clock, and
a backoff is held open with an event (`held`) while the test looks at what happens meanwhile.
"""
from __future__ import annotations

import asyncio
import time
import types

import pytest

import decomp.runtime.engine.scheduler as sched_mod
from decomp.runtime.models.base import Completion, Model, ModelError, Request, Score, TransientModelError
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.engine.scheduler import PrioritySemaphore, RateLimit, Scheduler
from decomp.runtime.engine.session import Session


class ProbeModel(Model):
    """A scriptable model: sleeps, counts concurrent calls, fails transiently a number of times,
    can be held at a gate, and logs what it saw (shared `log` across models if given)."""

    def __init__(self, name="probe", endpoint=None, *, delay=0.0, fail=0, retry_after=None,
                 message="HTTP 503 overloaded", gates=None, log=None, shared=None):
        self.name = name
        self.endpoint = endpoint or name
        self.delay = delay
        self.fail = fail
        self.retry_after = retry_after
        self.message = message
        self.gates = gates or {}
        self.log = log if log is not None else []
        self.shared = shared  # a dict counting concurrency across several models
        self.calls = 0
        self.active = 0
        self.max_active = 0

    def _enter(self):
        self.calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        if self.shared is not None:
            self.shared["active"] += 1
            self.shared["max"] = max(self.shared["max"], self.shared["active"])

    def _leave(self):
        self.active -= 1
        if self.shared is not None:
            self.shared["active"] -= 1

    async def complete(self, request: Request) -> Completion:
        self._enter()
        try:
            gate = self.gates.get(request.prompt)
            if gate is not None:
                await gate.wait()
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail > 0:
                self.fail -= 1
                self.log.append(("fail", self.name, request.prompt))
                raise TransientModelError(self.message, self.retry_after)
            self.log.append(("ok", self.name, request.prompt))
            return Completion(tuple(f"answer to {request.prompt}" for _ in range(request.n)), 1, 1)
        finally:
            self._leave()

    async def score(self, prompt: str, continuation: str, soft_prompt=None) -> Score:
        self._enter()
        try:
            if self.fail > 0:
                self.fail -= 1
                raise TransientModelError(self.message, self.retry_after)
            return Score(-1.5, 3)
        finally:
            self._leave()


def run(coro):
    return asyncio.run(coro)


async def until(predicate, limit=30.0):
    """Yield to the loop until `predicate()` holds (the limit only stops a hang: generous)."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition never became true")
        await asyncio.sleep(0.001)


# ------------------------------------------------------------------ concurrency per endpoint
def test_concurrency_limit_is_reached_and_never_exceeded():
    model = ProbeModel(delay=0.01)
    scheduler = Scheduler(4)

    async def main():
        return await asyncio.gather(*(scheduler.complete(model, Request(f"p{i}")) for i in range(50)))

    results = run(main())
    assert [r.text for r in results] == [f"answer to p{i}" for i in range(50)]
    assert model.calls == 50
    assert model.max_active == 4
    assert scheduler.max_in_flight["probe"] == 4
    assert scheduler.in_flight["probe"] == 0


def test_limit_of_one_serialises():
    model = ProbeModel(delay=0.002)
    scheduler = Scheduler(1)

    async def main():
        await asyncio.gather(*(scheduler.complete(model, Request(f"p{i}")) for i in range(10)))

    run(main())
    assert model.max_active == 1
    assert scheduler.max_in_flight["probe"] == 1


def test_concurrency_below_one_is_one():
    assert Scheduler(0).concurrency == 1
    assert Scheduler(-3).concurrency == 1


def test_two_endpoints_have_separate_limits():
    shared = {"active": 0, "max": 0}
    a = ProbeModel("model-a", "server-a", delay=0.01, shared=shared)
    b = ProbeModel("model-b", "server-b", delay=0.01, shared=shared)
    scheduler = Scheduler(2)

    async def main():
        calls = [scheduler.complete(m, Request(f"{m.name}-{i}")) for i in range(12) for m in (a, b)]
        await asyncio.gather(*calls)

    run(main())
    assert a.max_active == 2 and b.max_active == 2
    assert shared["max"] == 4  # each endpoint used its own two slots at the same time
    assert scheduler.max_in_flight == {"server-a": 2, "server-b": 2}


def test_two_models_on_one_endpoint_share_its_limit():
    shared = {"active": 0, "max": 0}
    a = ProbeModel("model-a", "server", delay=0.01, shared=shared)
    b = ProbeModel("model-b", "server", delay=0.01, shared=shared)
    scheduler = Scheduler(3)

    async def main():
        await asyncio.gather(*(scheduler.complete(m, Request(f"{m.name}-{i}")) for i in range(10) for m in (a, b)))

    run(main())
    assert shared["max"] == 3
    assert scheduler.max_in_flight["server"] == 3


# ------------------------------------------------------------------ priority
def test_priority_semaphore_serves_lowest_number_first_ties_fifo():
    served: list[str] = []

    async def main():
        sem = PrioritySemaphore(1)
        await sem.acquire()

        async def waiter(label, priority):
            await sem.acquire(priority)
            served.append(label)
            await asyncio.sleep(0)
            sem.release()

        tasks = []
        for label, priority in [("p5", 5), ("p1-first", 1), ("p3", 3), ("p1-second", 1), ("p0", 0), ("p2", 2),
                                ("p1-third", 1)]:
            tasks.append(asyncio.ensure_future(waiter(label, priority)))
            await asyncio.sleep(0)  # enqueue in this order
        sem.release()
        await asyncio.gather(*tasks)

    run(main())
    assert served == ["p0", "p1-first", "p1-second", "p1-third", "p2", "p3", "p5"]


def test_scheduler_serves_waiting_calls_by_priority():
    gate = asyncio.Event
    log: list = []

    async def main():
        hold = gate()
        model = ProbeModel(gates={"blocker": hold}, log=log)
        scheduler = Scheduler(1)
        blocker = asyncio.ensure_future(scheduler.complete(model, Request("blocker"), priority=0))
        await until(lambda: model.calls == 1)
        waiting = []
        for priority in [9, 4, 7, 0, 4, 2]:
            waiting.append(asyncio.ensure_future(
                scheduler.complete(model, Request(f"row{priority}-{len(waiting)}"), priority=priority)))
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        assert model.calls == 1  # all still waiting for the one slot
        hold.set()
        await asyncio.gather(blocker, *waiting)
        return model

    model = run(main())
    order = [prompt for kind, _, prompt in log]
    assert order == ["blocker", "row0-3", "row2-5", "row4-1", "row4-4", "row7-2", "row9-0"]
    assert model.max_active == 1


def test_session_passes_the_row_index_pushed_back_per_call_made_as_priority():
    seen: list[int] = []

    class Recording(Scheduler):
        async def complete(self, model, request, priority=0):
            seen.append(priority)
            return await super().complete(model, request, priority)

    src = '''
handler ask = prompt(text="Q: x?\\nA: y\\n")
program p(question) {
    QS: [ask] #question
    QS: [ask] #1
    QS: [ask] #2
    QS: [ask] #3
}
main p
'''
    session = Session(model=FakeModel(default="ok"), scheduler=Recording(2))
    module = session.load("x.decomp", text=src)

    async def main():
        return [await session.arun(module, {"question": f"q{i}"}, index=i) for i in (7, 3)]

    results = run(main())
    assert all(r.ok for r in results), [r.error for r in results]
    # 8 places back per call made, at most 8 x concurrency (16) places
    assert seen == [7, 15, 23, 23, 3, 11, 19, 19]


def test_turn_lets_a_later_fresh_row_go_before_an_earlier_busy_one_within_the_window():
    scheduler = Scheduler(4)
    assert scheduler.turn(10, 0) == 10
    assert scheduler.turn(10, 3) > scheduler.turn(20, 0)      # 34 > 20: the fresh row first
    assert scheduler.turn(10, 100) < scheduler.turn(50, 0)    # capped at 32 places: 42 < 50
    assert [scheduler.turn(0, c) for c in range(6)] == sorted(scheduler.turn(0, c) for c in range(6))


# ------------------------------------------------------------------ cancellation
def test_cancelled_waiter_does_not_leak_a_slot():
    async def main():
        sem = PrioritySemaphore(1)
        await sem.acquire()
        waiter = asyncio.ensure_future(sem.acquire(0))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        sem.release()
        # exactly one slot is free again: one acquire succeeds, a second one waits
        await asyncio.wait_for(sem.acquire(), timeout=5)
        second = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0.02)
        assert not second.done(), "a cancelled waiter left an extra slot behind"
        sem.release()
        await asyncio.wait_for(second, timeout=5)
        sem.release()
        assert sem._free == 1

    run(main())


def test_waiter_cancelled_just_after_being_handed_the_slot_passes_it_on():
    async def main():
        sem = PrioritySemaphore(1)
        await sem.acquire()
        first = asyncio.ensure_future(sem.acquire(0))
        second = asyncio.ensure_future(sem.acquire(1))
        await asyncio.sleep(0)
        sem.release()        # hands the slot to `first`...
        first.cancel()       # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, timeout=5)  # the slot went on to `second`
        sem.release()
        assert sem._free == 1
        assert not sem._waiters

    run(main())


def test_cancelled_scheduler_call_frees_its_place():
    async def main():
        hold = asyncio.Event()
        model = ProbeModel(gates={"blocker": hold})
        scheduler = Scheduler(1)
        blocker = asyncio.ensure_future(scheduler.complete(model, Request("blocker")))
        await until(lambda: model.calls == 1)
        doomed = [asyncio.ensure_future(scheduler.complete(model, Request(f"doomed{i}"))) for i in range(3)]
        await asyncio.sleep(0)
        for task in doomed:
            task.cancel()
        hold.set()
        await blocker
        # an in-flight call cancelled mid-request releases its slot too
        slow = ProbeModel("probe", delay=30)
        in_flight = asyncio.ensure_future(scheduler.complete(slow, Request("slow")))
        await until(lambda: slow.calls == 1)
        in_flight.cancel()
        await asyncio.gather(in_flight, return_exceptions=True)
        after = await asyncio.wait_for(scheduler.complete(model, Request("after")), timeout=5)
        assert scheduler.in_flight["probe"] == 0
        return model, after

    model, after = run(main())
    assert after.text == "answer to after"
    assert model.calls == 2  # the blocker and `after`; the cancelled waiters never reached the model


# ------------------------------------------------------------------ retries
def test_two_transient_failures_then_success():
    model = ProbeModel(fail=2)
    scheduler = Scheduler(2, retries=3, backoff=0.001, seed=0)
    result = run(scheduler.complete(model, Request("q")))
    assert result.texts == ("answer to q",)
    assert model.calls == 3
    assert scheduler.retried == 2


def test_score_is_retried_too():
    model = ProbeModel(fail=1)
    scheduler = Scheduler(retries=2, backoff=0.001, seed=0)
    score = run(scheduler.score(model, "prompt", "cont"))
    assert score == Score(-1.5, 3)
    assert model.calls == 2 and scheduler.retried == 1


def test_gives_up_after_retries_plus_one_attempts():
    model = ProbeModel("my-model", fail=100, message="HTTP 503 server melted")
    scheduler = Scheduler(retries=2, backoff=0.001, seed=0)
    with pytest.raises(ModelError) as caught:
        run(scheduler.complete(model, Request("q")))
    err = caught.value
    assert not isinstance(err, TransientModelError)  # final: nobody above should retry it again
    assert "my-model" in str(err)
    assert "HTTP 503 server melted" in str(err)
    assert "3 attempts" in str(err)
    assert isinstance(err.__cause__, TransientModelError)
    assert model.calls == 3
    assert scheduler.retried == 2


def test_zero_retries_means_one_attempt():
    model = ProbeModel(fail=1)
    scheduler = Scheduler(retries=0)
    with pytest.raises(ModelError):
        run(scheduler.complete(model, Request("q")))
    assert model.calls == 1 and scheduler.retried == 0


def test_final_model_error_is_not_retried():
    class Broken(Model):
        name = endpoint = "broken"
        calls = 0

        async def complete(self, request):
            Broken.calls += 1
            raise ModelError("bad API key")

    scheduler = Scheduler(retries=5, backoff=0.001)
    with pytest.raises(ModelError, match="bad API key"):
        run(scheduler.complete(Broken(), Request("q")))
    assert Broken.calls == 1 and scheduler.retried == 0


def test_delay_never_below_retry_after():
    scheduler = Scheduler(backoff=0.01, max_backoff=0.5, seed=3)
    for attempt in range(10):
        for _ in range(20):
            assert scheduler.delay(attempt, 2.5) >= 2.5
    assert scheduler.delay(0, None) <= 0.01
    assert scheduler.delay(0, 0.0) <= 0.01


def test_retry_after_is_honoured_between_attempts(clock):
    model = ProbeModel(fail=1, retry_after=0.3)
    scheduler = Scheduler(retries=2, backoff=0.0001, max_backoff=0.0001, seed=0)
    run(scheduler.complete(model, Request("q")))
    assert model.calls == 2
    assert len(clock.sleeps) == 1 and clock.sleeps[0] >= 0.3, f"slept {clock.sleeps}, the server asked for 0.3 s"


def test_delay_grows_exponentially_and_is_capped():
    scheduler = Scheduler(backoff=0.5, max_backoff=4.0, seed=11)
    samples = {attempt: [scheduler.delay(attempt, None) for _ in range(300)] for attempt in range(8)}
    for attempt, values in samples.items():
        ceiling = min(4.0, 0.5 * 2 ** attempt)
        assert all(0 <= v <= ceiling for v in values), (attempt, max(values), ceiling)
        # full jitter: the samples spread over the whole range up to the ceiling
        assert max(values) > 0.8 * ceiling
        assert min(values) < 0.2 * ceiling
    assert max(samples[0]) <= 0.5 < max(samples[1])
    assert max(samples[1]) <= 1.0 < max(samples[2])
    assert max(samples[7]) <= 4.0  # capped, not 64


def test_delay_is_reproducible_with_a_seed():
    one, two = Scheduler(seed=42), Scheduler(seed=42)
    assert [one.delay(a, None) for a in range(6)] == [two.delay(a, None) for a in range(6)]
    other = Scheduler(seed=43)
    assert [one.delay(a, None) for a in range(6)] != [other.delay(a, None) for a in range(6)]


def test_slot_is_released_while_backing_off(held):
    log: list = []

    async def main():
        flaky = ProbeModel("flaky", "server", fail=1, retry_after=1.0, log=log)
        steady = ProbeModel("steady", "server", log=log)
        scheduler = Scheduler(1, retries=2, backoff=0.0001, max_backoff=0.0001, seed=0)
        first = asyncio.ensure_future(scheduler.complete(flaky, Request("A")))
        await asyncio.wait_for(held.started.wait(), timeout=30)  # A failed and is backing off...
        second = await asyncio.wait_for(scheduler.complete(steady, Request("B")), timeout=30)
        assert not first.done()  # ...and still is: B got the one slot meanwhile
        held.resume.set()
        await first
        return second, scheduler

    second, scheduler = run(main())
    assert second.text == "answer to B"
    assert log == [("fail", "flaky", "A"), ("ok", "steady", "B"), ("ok", "flaky", "A")]
    assert len(held.delays) == 1 and held.delays[0] >= 1.0  # one backoff, of at least the Retry-After
    assert scheduler.max_in_flight["server"] == 1


# ------------------------------------------------------------------ rate limits (fake clock)
class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self):
        return self.now

    async def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
        await _real_sleep(0)


_real_sleep = asyncio.sleep


def _asyncio_with(**replaced):
    """The `asyncio` module as the scheduler sees it, with some names replaced."""
    return types.SimpleNamespace(**{**vars(asyncio), **replaced})


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(sched_mod, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    monkeypatch.setattr(sched_mod, "asyncio", _asyncio_with(sleep=fake.sleep))
    return fake


class HeldSleep:
    """The scheduler's sleeps (backoffs, rate-limit waits) held until the test sets `resume`:
    `started` is set once one begins, `delays` logs how long each was asked to be."""

    def __init__(self):
        self.started = asyncio.Event()
        self.resume = asyncio.Event()
        self.delays: list[float] = []

    async def sleep(self, seconds):
        self.delays.append(seconds)
        self.started.set()
        await self.resume.wait()


@pytest.fixture
def held(monkeypatch):
    sleeper = HeldSleep()
    monkeypatch.setattr(sched_mod, "asyncio", _asyncio_with(sleep=sleeper.sleep))
    return sleeper


def test_rate_limit_burst_then_waits(clock):
    async def main():
        bucket = RateLimit(600)  # 10 per second, bursts of 600
        for _ in range(600):
            await bucket.take(1)
        assert clock.sleeps == []
        await bucket.take(1)
        assert len(clock.sleeps) == 1 and clock.sleeps[0] == pytest.approx(0.1)
        clock.now += 3600  # refills, but never beyond its capacity
        for _ in range(600):
            await bucket.take(1)
        assert len(clock.sleeps) == 1
        await bucket.take(1)
        assert len(clock.sleeps) == 2

    run(main())


def test_rate_limit_amount_over_capacity_does_not_deadlock(clock):
    async def main():
        bucket = RateLimit(100)
        await bucket.take(500)  # clipped to the capacity: one full bucket
        assert clock.sleeps == []
        await bucket.take(50)
        assert sum(clock.sleeps) == pytest.approx(50 / (100 / 60))

    run(main())


def test_scheduler_rpm_lets_a_burst_through_and_delays_the_next(clock):
    model = ProbeModel()
    scheduler = Scheduler(1000, rpm=600)

    async def main():
        await asyncio.gather(*(scheduler.complete(model, Request(f"p{i}")) for i in range(600)))
        assert clock.sleeps == [] and model.calls == 600
        await scheduler.complete(model, Request("p600"))

    run(main())
    assert model.calls == 601
    assert len(clock.sleeps) == 1 and clock.sleeps[0] == pytest.approx(0.1)


def test_scheduler_tpm_counts_prompt_and_max_tokens(clock):
    model = ProbeModel()
    scheduler = Scheduler(8, tpm=1000)

    async def main():
        # tokens = len(prompt) / 4 + max_tokens * n = 100 + 150 = 250
        for i in range(4):
            await scheduler.complete(model, Request("x" * 400, max_tokens=150))
        assert clock.sleeps == []
        await scheduler.complete(model, Request("x" * 400, max_tokens=150))
        assert sum(clock.sleeps) == pytest.approx(250 / (1000 / 60))

    run(main())


def test_scheduler_tpm_counts_every_sample(clock):
    model = ProbeModel()
    scheduler = Scheduler(8, tpm=1000)

    async def main():
        await scheduler.complete(model, Request("", max_tokens=100, n=5))  # 500 tokens
        await scheduler.complete(model, Request("", max_tokens=100, n=5))  # 1000: the bucket is empty
        assert clock.sleeps == []
        await scheduler.complete(model, Request("", max_tokens=100, n=1))  # 100 more: 6 s
        assert sum(clock.sleeps) == pytest.approx(6.0)

    run(main())


def test_rate_limits_are_per_endpoint(clock):
    a, b = ProbeModel("a"), ProbeModel("b")
    scheduler = Scheduler(8, rpm=2)

    async def main():
        for model in (a, b):
            await scheduler.complete(model, Request("1"))
            await scheduler.complete(model, Request("2"))
        assert clock.sleeps == []
        await scheduler.complete(a, Request("3"))
        assert len(clock.sleeps) == 1 and clock.sleeps[0] == pytest.approx(30.0)

    run(main())


def test_rate_limit_real_clock_small_numbers():
    """Without the fake clock: 6000 rpm = 100/s; a burst of 3 out of a bucket of 3 would need
    a wait of at least ~10 ms for the 4th (lower bound only)."""
    async def main():
        bucket = RateLimit(6000)
        bucket.level = bucket.capacity = 3
        start = time.monotonic()
        for _ in range(3):
            await bucket.take(1)
        await bucket.take(1)
        return time.monotonic() - start

    assert run(main()) >= 0.009


# ------------------------------------------------------------------ deferred slots
class DeferringModel(Model):
    """Takes its slot only around its 'network' part, like the OpenAI backend's HTTP hooks."""

    name = endpoint = "deferring"
    defers_slot = True

    def __init__(self):
        self.at_server = 0
        self.most_at_server = 0
        self.outside = 0
        self.most_outside = 0

    async def complete(self, request):
        from decomp.runtime.models.base import CURRENT_SLOT

        self.outside += 1
        self.most_outside = max(self.most_outside, self.outside)
        await asyncio.sleep(0.02)              # building the request: no slot held
        self.outside -= 1
        await CURRENT_SLOT.get().acquire()
        self.at_server += 1
        self.most_at_server = max(self.most_at_server, self.at_server)
        await asyncio.sleep(0.05)              # at the server
        self.at_server -= 1
        CURRENT_SLOT.get().release()
        await asyncio.sleep(0.02)              # reading the reply: slot already given back
        return Completion(("ok",))


def test_a_deferring_backend_holds_its_slot_only_while_at_the_server():
    model = DeferringModel()
    scheduler = Scheduler(3)

    async def go():
        return await asyncio.gather(*(scheduler.complete(model, Request("p")) for _ in range(12)))

    assert [c.text for c in asyncio.run(go())] == ["ok"] * 12
    assert model.most_at_server == 3 == scheduler.max_in_flight["deferring"]
    assert model.most_outside > 3  # preparing requests overlapped the requests at the server
    assert scheduler.in_flight["deferring"] == 0


def test_a_slot_the_backend_never_gives_back_is_released_by_the_scheduler():
    class Forgetful(DeferringModel):
        async def complete(self, request):
            from decomp.runtime.models.base import CURRENT_SLOT

            await CURRENT_SLOT.get().acquire()
            raise TransientModelError("dropped")

    scheduler = Scheduler(1, retries=2, backoff=0.001)
    with pytest.raises(ModelError, match="gave up after 3 attempts"):
        asyncio.run(scheduler.complete(Forgetful(), Request("p")))
    assert scheduler.in_flight["deferring"] == 0
    assert asyncio.run(scheduler.complete(DeferringModel(), Request("p"))).text == "ok"


def test_a_call_cancelled_while_waiting_on_a_rate_limit_gives_its_slot_back(held):
    async def main():
        scheduler = Scheduler(1, rpm=1)  # a burst of one request, then one a minute
        model = ProbeModel()
        await scheduler.complete(model, Request("first"))
        waiting = asyncio.ensure_future(scheduler.complete(model, Request("second")))
        await asyncio.wait_for(held.started.wait(), timeout=30)  # waiting on the rate limit now
        assert held.delays and held.delays[0] > 50  # about a minute
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        pool = scheduler._slots[model.endpoint]
        return pool.try_acquire(), scheduler.in_flight[model.endpoint], model.calls

    free, in_flight, calls = run(main())
    assert free and in_flight == 0 and calls == 1


# ---- the call deadline (Service.call_deadline, issue 29) ----------------------------------------

def test_a_call_deadline_ends_a_call_that_hangs_and_gives_its_slot_back():
    model = ProbeModel(gates={"p": asyncio.Event()})  # never set: the call would hang
    model.call_deadline = 0.3
    scheduler = Scheduler(1)
    with pytest.raises(ModelError) as caught:
        run(scheduler.complete(model, Request("p")))
    assert str(caught.value) == "probe: no answer within the call deadline of 0.3s (1 attempt; raise the call " \
                                "deadline of probe)"
    assert scheduler.in_flight["probe"] == 0 and model.active == 0


def test_a_call_deadline_covers_the_retries_and_names_the_last_error():
    model = ProbeModel(delay=0.05, fail=10**6, message="probe: HTTP 503 overloaded")
    model.call_deadline = 0.5
    scheduler = Scheduler(1, retries=10**6, backoff=0.01, max_backoff=0.02)
    with pytest.raises(ModelError) as caught:
        run(scheduler.complete(model, Request("p")))
    assert str(caught.value).startswith("probe: no answer within the call deadline of 0.5s (")
    assert str(caught.value).endswith("attempts; raise the call deadline of probe); last error: HTTP 503 overloaded")
    assert 2 <= model.calls < 10**6 and scheduler.in_flight["probe"] == 0


def test_a_backoff_that_would_end_past_the_call_deadline_is_not_waited_for(held):
    model = ProbeModel(fail=5, retry_after=60.0)
    model.call_deadline = 5.0
    with pytest.raises(ModelError, match=r"call deadline of 5s \(1 attempt; .*last error: HTTP 503 overloaded"):
        run(Scheduler(retries=6).complete(model, Request("p")))
    assert model.calls == 1 and held.delays == []  # no backoff slept


def test_waiting_for_a_slot_does_not_count_against_the_call_deadline():
    gate = asyncio.Event()
    first, second = ProbeModel(gates={"first": gate}), ProbeModel()
    second.call_deadline = 0.2

    async def go():
        scheduler = Scheduler(1)
        holding = asyncio.ensure_future(scheduler.complete(first, Request("first")))
        await until(lambda: first.active == 1)
        waiting = asyncio.ensure_future(scheduler.complete(second, Request("second")))
        await asyncio.sleep(0.6)  # three times the deadline, waiting for the one slot
        gate.set()
        return await holding, await waiting

    done = run(go())
    assert [c.text for c in done] == ["answer to first", "answer to second"]
