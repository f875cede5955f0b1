"""Programs run as a dataflow graph (decomp.runtime.engine.interpreter): independent steps at once, a
step after the steps it references, the answer of the last step in program order, `if` with
`[EOQ]` as a barrier, other `if`s alongside later steps, trace order, cancellation of siblings
on failure, and concurrent foreach items.

Event order is the only evidence; nothing checks wall-clock time. "Ran at once" is shown with
gates: a call that may not end until another call has started (or ended) can only finish when
both ran at the same time; if they did not, the gate gives up after HANG_GUARD seconds and the
step fails. Delays (sleeps) only give a wrong interpreter the time to do the wrong thing: a slow
machine can weaken such a check, never fail a right interpreter."""
from __future__ import annotations

import asyncio

from tests.helpers import registry_with
from decomp.runtime.engine.session import Session

HANG_GUARD = 30.0  # seconds a gated call waits before it fails: only a hang gets there


class Recorder:
    """Async functions for the `fn` kind that log start/end events, and can sleep, wait for other
    calls' events (`gates`: query -> events that must have happened before the call ends) or fail."""

    def __init__(self, delays=None, answers=None, gates=None):
        self.delays = delays or {}
        self.answers = answers or {}
        self.gates: dict[str, list[tuple[str, str]]] = gates or {}
        self.events: list[tuple[str, str]] = []
        self.active = 0
        self.max_active = 0
        self.cancelled: list[str] = []
        self._waiters: list[tuple[list, asyncio.Future]] = []

    def _record(self, event):
        self.events.append(event)
        for needed, done in self._waiters:
            if not done.done() and all(e in self.events for e in needed):
                done.set_result(None)

    async def wait_for(self, needed):
        """Until every event in `needed` has happened (HANG_GUARD seconds at most)."""
        if all(e in self.events for e in needed):
            return
        waiter = (needed, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter[1], HANG_GUARD)
        except TimeoutError:
            missing = [e for e in needed if e not in self.events]
            raise AssertionError(f"waited {HANG_GUARD} s for {missing}: the calls did not run at once") from None
        finally:
            self._waiters.remove(waiter)

    async def __call__(self, query):
        self._record(("start", query))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.delays.get(query, 0))
            if query in self.gates:
                await self.wait_for(self.gates[query])
        except asyncio.CancelledError:
            self.cancelled.append(query)
            raise
        finally:
            self.active -= 1
        self._record(("end", query))
        return self.answers.get(query, query)

    def at(self, kind, query):
        return self.events.index((kind, query))


def make_session(functions, calls=None, **kwargs):
    return Session(registry=registry_with(functions, calls), **kwargs)


def run(src, functions, fields=None, **kwargs):
    session = make_session(functions, **kwargs)
    return session.run(session.load("x.decomp", text=src), fields or {"question": "q"})


# ------------------------------------------------------------------ concurrency of steps
def test_independent_steps_run_at_once():
    rec = Recorder(gates={"a": [("start", "b")]})  # a cannot end before b has started
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] a
    QS: [t] b
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert result.answer == "b"
    assert rec.events[:2] == [("start", "a"), ("start", "b")]  # b did not wait for a
    assert rec.max_active == 2


def test_step_waits_for_the_steps_it_references():
    # #1 ends only once #2 and #4 have started: they cannot have waited for it
    rec = Recorder({"slow": 0.15, "fast": 0.0, "other": 0.05},
                   gates={"slow": [("start", "other"), ("start", "fast")]})
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] slow
    QS: [t] other
    QS: [t] after #1
    QS: [t] fast
}
main p
'''
    rec.answers = {"slow": "S", "other": "O"}
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert rec.at("end", "slow") < rec.at("start", 'after "S"')  # waited for #1
    assert rec.at("start", "other") < rec.at("end", "slow")      # #2 did not wait
    assert rec.at("start", "fast") < rec.at("end", "slow")       # #4 references nothing: ran at once
    assert result.answer == "fast"


def test_step_waits_for_every_step_it_references():
    rec = Recorder({"x": 0.1, "y": 0.2, "z": 0.0})
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] x
    QS: [t] y
    QS: [t] z
    QS: [t] #1 #2 #3
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    joined = '"x" "y" "z"'
    assert result.answer == joined
    start = rec.at("start", joined)
    assert all(rec.at("end", q) < start for q in "xyz")
    assert [q for kind, q in rec.events if kind == "start"][:3] == ["x", "y", "z"]


def test_answer_is_the_last_step_in_program_order_even_if_it_finishes_first():
    rec = Recorder(answers={"first": "FIRST", "last": "LAST"}, gates={"first": [("end", "last")]})
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] first
    QS: [t] last
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert rec.at("end", "last") < rec.at("end", "first")
    assert result.answer == "LAST"
    assert ("end", "first") in rec.events  # the program still waited for every step


def test_chain_of_references_runs_in_order():
    rec = Recorder()
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] a
    QS: [t] b #1
    QS: [t] c #2
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok
    assert result.answer == 'c "b \\"a\\""'
    assert rec.max_active == 1


# ------------------------------------------------------------------ if
EARLY_END = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] slow
    QS: [t] check
    if #2 == "yes" {
        QS: [t] inside
        QS: [EOQ]
    }
    QS: [t] after
}
main p
'''


def test_if_with_eoq_waits_for_earlier_steps_and_skips_later_ones():
    rec = Recorder({"slow": 0.15}, {"check": "yes"})
    src = EARLY_END
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert rec.at("end", "slow") < rec.at("start", "inside")  # a barrier: everything before it first
    assert ("start", "after") not in rec.events
    assert result.answer == "inside"


def test_if_with_eoq_not_taken_lets_later_steps_run():
    rec = Recorder({"slow": 0.1}, {"check": "no"})
    src = EARLY_END
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert ("start", "inside") not in rec.events
    assert rec.at("end", "slow") < rec.at("start", "after")  # the barrier held the later step too
    assert result.answer == "after"


def test_eoq_inside_else_branch_is_a_barrier_too():
    rec = Recorder({"slow": 0.1}, {"check": "no"})
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] slow
    QS: [t] check
    if #2 == "yes" {
        QS: [t] then
    } else {
        QS: [EOQ]
    }
    QS: [t] after
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert ("start", "after") not in rec.events and ("start", "then") not in rec.events
    assert ("end", "slow") in rec.events
    assert result.answer == "no"  # the last step that ran


def test_if_without_eoq_runs_alongside_later_steps():
    rec = Recorder(answers={"check": "yes"}, gates={"branch": [("start", "after")]})
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] check
    if #1 == "yes" {
        QS: [t] branch
    }
    QS: [t] after
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert rec.at("start", "after") < rec.at("end", "branch")  # did not wait for the branch
    assert ("end", "branch") in rec.events                      # but the program waited for it
    assert result.answer == "after"


def test_if_waits_for_the_steps_its_condition_names():
    rec = Recorder({"check": 0.15}, {"check": "yes"})
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] check
    if #1 == "yes" {
        QS: [t] branch
    }
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert rec.at("end", "check") < rec.at("start", "branch")
    assert result.answer == "branch"


# ------------------------------------------------------------------ trace
def test_trace_children_stay_in_program_order():
    rec = Recorder(gates={"s1": [("end", "s2")], "s2": [("end", "s3")]})  # they end s3, s2, s1
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] s1
    QS: [t] s2
    QS: [t] s3
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    assert [q for kind, q in rec.events if kind == "end"] == ["s3", "s2", "s1"]
    steps = [n for n in result.trace.walk() if n.kind == "step"]
    assert [n.label for n in steps] == ["[t] s1", "[t] s2", "[t] s3"]
    assert [n.answer for n in steps] == ["s1", "s2", "s3"]
    parents = [n for n in result.trace.walk() if any(c.kind == "step" for c in n.children)]
    assert len(parents) == 1
    assert [c.label for c in parents[0].children if c.kind == "step"] == ["[t] s1", "[t] s2", "[t] s3"]


def test_trace_keeps_program_order_around_a_side_branch():
    rec = Recorder({"check": 0.1, "branch": 0.0, "after": 0.0}, {"check": "yes"})
    src = '''
handler t = fn(fn="t")
program p(question) {
    QS: [t] check
    if #1 == "yes" {
        QS: [t] branch
    }
    QS: [t] after
}
main p
'''
    result = run(src, {"t": rec})
    assert result.ok, result.error
    steps = [n.label for n in result.trace.walk() if n.kind == "step"]
    assert steps == ["[t] check", "[t] branch", "[t] after"]


# ------------------------------------------------------------------ failure and cancellation
def _failing_session(rec):
    registry = registry_with({"t": rec})

    def boom(query):
        raise ValueError(f"cannot handle {query}")

    registry.add_function(boom, "boom")
    return Session(registry=registry)


def test_failing_step_cancels_its_siblings():
    rec = Recorder({"long": 20.0, "later": 20.0})
    src = '''
handler t   = fn(fn="t")
handler bad = python(function="boom")
program p(question) {
    QS: [t] long
    QS: [bad] explode
    QS: [t] later
}
main p
'''
    session = _failing_session(rec)
    module = session.load("x.decomp", text=src)

    async def main():
        result = await session.arun(module, {"question": "q"})
        await asyncio.sleep(0)  # let cancellations land
        # checked before the loop closes (asyncio.run would cancel leftovers itself)
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return result, list(rec.cancelled), pending

    result, cancelled, pending = asyncio.run(main())
    assert result.answer is None
    assert "bad" in result.error and "cannot handle explode" in result.error
    assert sorted(cancelled) == ["later", "long"]
    assert ("end", "long") not in rec.events, "the row waited for its long sibling instead of cancelling it"
    assert pending == []
    failed = [n for n in result.trace.walk() if n.kind == "call" and n.error]
    assert [n.handler for n in failed] == ["bad"]


def test_failing_foreach_item_cancels_the_other_items():
    rec = Recorder({"slow-a": 20.0, "slow-b": 20.0})
    src = '''
handler t    = fn(fn="t")
handler make = fn(fn="make")
handler per  = python(function="per")
program p(question) {
    QS: [make] items
    QS: (foreach) [per] #1
}
main p
'''
    registry = registry_with({"t": rec, "make": lambda q: ["slow-a", "bad", "slow-b"]})

    async def per(query):
        if query == "bad":
            await rec.wait_for([("start", "slow-a"), ("start", "slow-b")])  # both under way
            raise RuntimeError("item failed")
        return await rec(query)

    registry.add_function(per, "per")
    session = Session(registry=registry)
    module = session.load("x.decomp", text=src)

    async def main():
        result = await session.arun(module, {"question": "q"})
        await asyncio.sleep(0)
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return result, list(rec.cancelled), pending

    result, cancelled, pending = asyncio.run(main())
    assert result.error is not None and "per" in result.error and "item failed" in result.error
    assert sorted(cancelled) == ["slow-a", "slow-b"]
    assert not any(kind == "end" for kind, _ in rec.events)  # neither was waited for
    assert pending == []


def test_failure_in_a_referenced_step_stops_its_dependants():
    rec = Recorder()
    src = '''
handler t   = fn(fn="t")
handler bad = python(function="boom")
program p(question) {
    QS: [bad] explode
    QS: [t] uses #1
}
main p
'''
    session = _failing_session(rec)
    result = session.run(session.load("x.decomp", text=src), {"question": "q"})
    assert result.error is not None and "bad" in result.error
    assert not any(q.startswith("uses") for _, q in rec.events)


# ------------------------------------------------------------------ foreach
def test_foreach_items_run_concurrently_and_keep_order():
    # d ends only once a, b and c have started (all four at once), then c, b, a end in turn
    gates = {"a": [("end", "b")], "b": [("end", "c")], "c": [("end", "d")],
             "d": [("start", "a"), ("start", "b"), ("start", "c")]}
    rec = Recorder(answers={k: k.upper() for k in "abcd"}, gates=gates)
    src = '''
handler t    = fn(fn="t")
handler make = fn(fn="make")
program p(question) {
    QS: [make] items
    QS: (foreach) [t] #1
}
main p
'''
    result = run(src, {"t": rec, "make": lambda q: list("abcd")})
    assert result.ok, result.error
    assert result.answer == ["A", "B", "C", "D"]
    assert [q for kind, q in rec.events if kind == "end"] == ["d", "c", "b", "a"]
    assert rec.max_active == 4
    items = [n for n in result.trace.walk() if n.kind == "item"]
    assert [n.label for n in items] == ["a", "b", "c", "d"]
    assert [n.answer for n in items] == ["A", "B", "C", "D"]


def test_two_foreach_steps_overlap():
    everyone = [("start", q) for q in ("x1", "x2", "y1", "y2")]
    rec = Recorder(gates={q: everyone for q in ("x1", "x2", "y1", "y2")})  # all four at once, or none ends
    src = '''
handler t    = fn(fn="t")
handler make = fn(fn="make")
program p(question) {
    QS: [make] x
    QS: [make] y
    QS: (foreach) [t] #1
    QS: (foreach) [t] #2
}
main p
'''
    result = run(src, {"t": rec, "make": lambda q: [q + "1", q + "2"]})
    assert result.ok, result.error
    assert result.answer == ["y1", "y2"]
    assert rec.max_active == 4
