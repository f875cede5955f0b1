"""Outbound services other than models (decomp.handlers.service.Service) through the engine:
`Call.request` gives any service the scheduler's per-endpoint slots and retries, the per-kind
budgets and usage, the step cache, a trace node, redaction of its secrets and the session's
close hooks; `Handler.reads_inputs` puts the named inputs into a kind's cache key.

A fake search service and a `search` handler kind (registered in an isolated registry) are
used from .decomp programs, exactly as a plugin would use them. Concurrency is measured with
counters inside the service, never with wall-clock time; retries run with no backoff.
"""
from __future__ import annotations

from decomp.handlers.plugins import builtin_registry
import asyncio
import json

import pytest

from decomp.dsl.errors import (Abort, BudgetExceeded, Failure, InternalError, ServiceError,
                               TransientServiceError)
from decomp.handlers.base import Handler, Options
from decomp.handlers.registry import Registry, handler_kind
from decomp.handlers.service import Service
from decomp.runtime.engine.budgets import CURRENT_ROW, Budget, RowContext, Usage
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

SECRET = "sk-SECRET"


# ------------------------------------------------------------------ a fake search service
class SearchError(ServiceError):
    """The search service's own final error class (what the scheduler raises after retries)."""

    kind = "search error"


class FakeSearch(Service):
    """A search engine stand-in: counts calls and how many are in flight at once (its own and,
    through `shared`, those of every service sharing the dict), fails transiently `fail` times
    (or always), raises `error` when given, and records its close."""

    kind = "search"
    error = SearchError

    def __init__(self, name="fake-search", endpoint="search-host", *, fail=0, error=None, secret=None,
                 shared=None, yields=20):
        self.name, self.endpoint = name, endpoint
        self.fail = fail                  # transient failures still to raise (-1: always)
        self.raise_error = error          # an exception to raise on every call
        self.secret = secret
        self.shared = shared if shared is not None else {"active": 0, "max": 0}
        self.yields = yields              # event-loop turns a call stays in flight
        self.queries: list[str] = []
        self.active = 0
        self.max_active = 0
        self.closed = 0

    async def search(self, query: str) -> list[str]:
        self.queries.append(query)
        self.active += 1
        self.shared["active"] += 1
        self.max_active = max(self.max_active, self.active)
        self.shared["max"] = max(self.shared["max"], self.shared["active"])
        try:
            for _ in range(self.yields):  # stay in flight while every other ready task runs
                await asyncio.sleep(0)
            if self.raise_error is not None:
                raise self.raise_error
            if self.fail:
                self.fail -= 1 if self.fail > 0 else 0
                raise TransientServiceError(f"HTTP 503 from {self.endpoint}", retry_after=0)
            return [f"doc about {query}"]
        finally:
            self.active -= 1
            self.shared["active"] -= 1

    def secrets(self) -> tuple[str, ...]:
        return (self.secret,) if self.secret else ()

    async def aclose(self) -> None:
        self.closed += 1


class SearchOptions(Options):
    service: str = "main"
    cache: bool = False


def search_registry(services: dict[str, FakeSearch], closed: list | None = None) -> Registry:
    """The built-in kinds plus `search(service="key", cache=false)`, which sends the sub-query to
    `services[key]` through `call.request`. Its answers are not cached per step (so the
    service call itself meets the cache), and its close hook logs the handler's name."""
    reg = builtin_registry()

    @handler_kind("search", registry=reg)
    class SearchHandler(Handler):
        Options = SearchOptions
        cacheable = False
        contained = False  # on the run's loop: its service counts turns of that loop

        async def run(self, call):
            service = services[self.options.service]
            cache = {"query": call.query} if self.options.cache else None
            return await call.request(service, service.search, call.query, what=f"search: {call.query}",
                                      cache=cache)

        async def aclose(self):
            if closed is not None:
                closed.append(self.name)

    return reg


def session_for(services, closed=None, **kwargs) -> Session:
    kwargs.setdefault("model", FakeModel(default='"ok"'))
    return Session(registry=search_registry(services, closed), **kwargs)


def run_src(src: str, fields: dict, services, closed=None, **kwargs):
    session = session_for(services, closed, **kwargs)
    return session.run(session.load("x.decomp", text=src), fields), session


def nodes_of(result, kind: str):
    return [n for n in result.trace.walk() if n.kind == kind]


ONE = '''
handler find = search()
program p(question) {
    QS: [find] #question
}
main p
'''

FAN = '''
handler make = regex(pattern="[a-z]", all=true)
handler find = search()
program p(question) {
    QS: [make] #question
    QS: (foreach) [find] about #1
}
main p
'''


# ------------------------------------------------------------------ (a) concurrency per endpoint
@pytest.mark.parametrize("limit", [1, 2, 3])
def test_at_most_concurrency_calls_of_an_endpoint_are_in_flight(limit):
    service = FakeSearch()
    result, session = run_src(FAN, {"question": "abcdef"}, {"main": service},
                              scheduler=Scheduler(concurrency=limit))
    assert result.ok, result.error
    assert result.answer == [[f"doc about about {x}"] for x in "abcdef"]
    assert len(service.queries) == 6
    assert service.max_active == limit  # the limit was reached, never passed
    assert session.scheduler.max_in_flight["search-host"] == limit
    assert session.scheduler.in_flight["search-host"] == 0  # every slot given back


def test_without_a_tight_limit_the_calls_do_overlap():
    """The control for the test above: the fan-out really sends its calls at once, so a limit
    that holds is the scheduler's doing."""
    service = FakeSearch()
    result, session = run_src(FAN, {"question": "abcdef"}, {"main": service},
                              scheduler=Scheduler(concurrency=16))
    assert result.ok, result.error
    assert service.max_active == 6
    assert session.scheduler.max_in_flight["search-host"] == 6


TWO_SERVICES = '''
handler make = regex(pattern="[a-z]", all=true)
handler a = search(service="a")
handler b = search(service="b")
program p(question) {
    QS: [make] #question
    QS: (foreach) [a] a #1
    QS: (foreach) [b] b #1
}
main p
'''


def test_two_services_on_one_endpoint_share_its_limit():
    shared = {"active": 0, "max": 0}
    a = FakeSearch("search-a", "one-host", shared=shared)
    b = FakeSearch("search-b", "one-host", shared=shared)
    result, session = run_src(TWO_SERVICES, {"question": "wxyz"}, {"a": a, "b": b},
                              scheduler=Scheduler(concurrency=3))
    assert result.ok, result.error
    assert len(a.queries) == len(b.queries) == 4
    assert shared["max"] == 3
    assert session.scheduler.max_in_flight == {"one-host": 3}


def test_services_on_different_endpoints_have_a_limit_each():
    shared = {"active": 0, "max": 0}
    a = FakeSearch("search-a", "host-a", shared=shared)
    b = FakeSearch("search-b", "host-b", shared=shared)
    result, session = run_src(TWO_SERVICES, {"question": "wxyz"}, {"a": a, "b": b},
                              scheduler=Scheduler(concurrency=3))
    assert result.ok, result.error
    assert a.max_active == b.max_active == 3
    assert shared["max"] == 6
    assert session.scheduler.max_in_flight == {"host-a": 3, "host-b": 3}


# ------------------------------------------------------------------ (b) retries
def test_transient_failures_are_retried_until_the_service_answers():
    service = FakeSearch(fail=2)
    result, session = run_src(ONE, {"question": "cats"}, {"main": service},
                              scheduler=Scheduler(retries=6, backoff=0))
    assert result.ok, result.error
    assert result.answer == ["doc about cats"]
    assert service.queries == ["cats"] * 3
    assert session.scheduler.retried == 2
    assert result.usage.service_calls == {"search": 1}  # one call, however many attempts
    [node] = nodes_of(result, "search")
    assert node.error is None and node.answer == ["doc about cats"]


def test_a_service_that_keeps_failing_ends_with_its_own_error_class():
    service = FakeSearch(fail=-1)
    session = session_for({"main": service}, scheduler=Scheduler(retries=2, backoff=0))
    module = session.load("x.decomp", text=ONE)
    result = session.run(module, {"question": "cats"})
    assert not result.ok
    assert len(service.queries) == 3  # retries + 1 attempts
    assert session.scheduler.retried == 2
    assert result.error.startswith("[find] search, x.decomp:4:5: ")
    assert "fake-search: gave up after 3 attempts" in result.error
    assert "HTTP 503 from search-host" in result.error
    [node] = nodes_of(result, "search")
    assert node.error is not None and "gave up after 3 attempts" in node.error

    # the exception itself: the service's class, a Failure a program may recover from
    with pytest.raises(SearchError) as info:
        session.run_sync(session.arun_handler(module.handlers["find"], "dogs"))
    err = info.value
    assert isinstance(err, Failure) and not isinstance(err, Abort)
    assert not isinstance(err, TransientServiceError)
    assert isinstance(err.__cause__, TransientServiceError)
    assert err.handler == "find" and err.handler_kind == "search"
    assert service.queries.count("dogs") == 3


def test_a_final_service_error_is_not_retried():
    service = FakeSearch(error=SearchError("HTTP 404: no such index"))
    result, session = run_src(ONE, {"question": "cats"}, {"main": service},
                              scheduler=Scheduler(retries=5, backoff=0))
    assert len(service.queries) == 1
    assert session.scheduler.retried == 0
    assert result.error == "[find] search, x.decomp:4:5: HTTP 404: no such index"


# ------------------------------------------------------------------ (c) budgets and usage per kind
MIXED = '''
handler ask = prompt(text="Q: x?\\nA: \\"y\\"\\n")
handler find = search()
program p(question) {
    QS: [ask] one #question
    QS: [ask] two #1
    QS: [ask] three #2
    QS: [find] first #3
    QS: [find] second #4
    QS: [find] third #5
}
main p
'''


def test_usage_counts_service_calls_by_kind_apart_from_model_calls():
    service = FakeSearch()
    result, session = run_src(MIXED, {"question": "q"}, {"main": service})
    assert result.ok, result.error
    assert len(service.queries) == 3
    assert result.usage.calls == 3  # model calls only
    assert result.usage.service_calls == {"search": 3}
    assert result.usage.to_dict()["service_calls"] == {"search": 3}
    assert session.usage.service_calls == {"search": 3} and session.usage.calls == 3
    assert Usage.from_dict(result.usage.to_dict()).service_calls == {"search": 3}
    assert "service_calls" not in Usage(calls=2).to_dict()


def test_a_per_kind_budget_ends_the_row_at_the_call_past_it():
    service = FakeSearch()
    model = FakeModel(default='"ok"')
    result, session = run_src(MIXED, {"question": "q"}, {"main": service}, model=model,
                              budget=Budget(service_calls=(("search", 2),)))
    assert not result.ok
    assert "budget exhausted: search calls for this row reached 2" in result.error
    assert result.error.startswith("[find] search, x.decomp:10:5: ")
    assert len(service.queries) == 2  # the third call never reached the service
    assert len(model.history) == 3  # model calls are not counted against the search budget
    assert result.usage.service_calls == {"search": 2}
    assert result.usage.calls == 3


def test_a_per_kind_budget_raises_budget_exceeded_an_abort():
    service = FakeSearch()
    session = session_for({"main": service})
    module = session.load("x.decomp", text=ONE)
    handler = module.handlers["find"]

    async def three_calls():
        row = RowContext(0, Budget(service_calls=(("search", 2),)), Usage())
        token = CURRENT_ROW.set(row)
        try:
            await session.arun_handler(handler, "a")
            await session.arun_handler(handler, "b")
            with pytest.raises(BudgetExceeded) as info:
                await session.arun_handler(handler, "c")
            return info.value, row
        finally:
            CURRENT_ROW.reset(token)

    err, row = asyncio.run(three_calls())
    assert isinstance(err, Abort) and not isinstance(err, Failure)
    assert str(err) == "[find] search: budget exhausted: search calls for this row reached 2"
    assert service.queries == ["a", "b"]
    assert row.usage.service_calls == {"search": 2} and row.usage.calls == 0


def test_a_budget_for_another_kind_does_not_limit_search_nor_models():
    service = FakeSearch()
    result, _ = run_src(MIXED, {"question": "q"}, {"main": service},
                        budget=Budget(service_calls=(("http", 1),)))
    assert result.ok, result.error
    assert result.usage.service_calls == {"search": 3} and result.usage.calls == 3


def test_model_call_budget_does_not_count_search_calls():
    service = FakeSearch()
    result, _ = run_src(MIXED, {"question": "q"}, {"main": service}, budget=Budget(row_calls=3))
    assert result.ok, result.error
    assert len(service.queries) == 3


# ------------------------------------------------------------------ (d) the step cache
CACHED = '''
handler find = search(cache=true)
program p(question) {
    QS: [find] #question
}
main p
'''


def test_a_call_with_cache_parts_is_answered_from_the_cache_the_second_time(tmp_path):
    service = FakeSearch()
    session = session_for({"main": service}, cache=StepCache(tmp_path / "c.sqlite"))
    module = session.load("x.decomp", text=CACHED)
    first = session.run(module, {"question": "cats"})
    second = session.run(module, {"question": "cats"})
    assert first.ok and second.ok, (first.error, second.error)
    assert first.answer == second.answer == ["doc about cats"]
    assert service.queries == ["cats"]  # the method was not called again
    [miss] = nodes_of(first, "search")
    [hit] = nodes_of(second, "search")
    assert miss.cache_hit is False and hit.cache_hit is True
    assert hit.answer == ["doc about cats"]
    assert second.usage.cache_hits == 1
    assert second.usage.service_calls == {}  # a hit is not a call of the service
    other = session.run(module, {"question": "dogs"})
    assert other.answer == ["doc about dogs"] and service.queries == ["cats", "dogs"]


def test_the_cache_survives_a_new_session(tmp_path):
    path = tmp_path / "c.sqlite"
    service = FakeSearch()
    one = session_for({"main": service}, cache=StepCache(path))
    one.run(one.load("x.decomp", text=CACHED), {"question": "cats"})
    two = session_for({"main": service}, cache=StepCache(path))
    result = two.run(two.load("x.decomp", text=CACHED), {"question": "cats"})
    assert result.answer == ["doc about cats"] and service.queries == ["cats"]


def test_a_call_without_cache_parts_is_never_cached(tmp_path):
    service = FakeSearch()
    cache = StepCache(tmp_path / "c.sqlite")
    session = session_for({"main": service}, cache=cache)
    module = session.load("x.decomp", text=ONE)
    first = session.run(module, {"question": "cats"})
    second = session.run(module, {"question": "cats"})
    assert first.ok and second.ok
    assert service.queries == ["cats", "cats"]
    assert [n.cache_hit for r in (first, second) for n in nodes_of(r, "search")] == [False, False]
    assert second.usage.cache_hits == 0
    assert len(cache) == 0


def test_the_cache_key_holds_the_service_name(tmp_path):
    a, b = FakeSearch("search-a"), FakeSearch("search-b")
    src = '''
handler a = search(service="a", cache=true)
handler b = search(service="b", cache=true)
program p(question) {
    QS: [a] #question
    QS: [b] #question
}
main p
'''
    result, _ = run_src(src, {"question": "cats"}, {"a": a, "b": b}, cache=StepCache(tmp_path / "c.sqlite"))
    assert result.ok, result.error
    assert a.queries == ["cats"] and b.queries == ["cats"]  # b did not get a's stored answer


def test_cache_parts_cannot_override_the_service_in_the_key(tmp_path):
    """Whatever a handler names its cache parts ("service", "op"), the key still holds the
    service's kind and name: two services never share an entry."""
    a, b = FakeSearch("search-a"), FakeSearch("search-b")
    services = {"a": a, "b": b}
    reg = search_registry(services)

    @handler_kind("keyed", registry=reg)
    class Keyed(Handler):
        Options = SearchOptions
        cacheable = False

        async def run(self, call):
            service = services[self.options.service]
            return await call.request(service, service.search, call.query, what=call.query,
                                      cache={"op": "lookup", "service": "any", "query": call.query})

    src = '''
handler a = keyed(service="a")
handler b = keyed(service="b")
program p(question) {
    QS: [a] #question
    QS: [b] #question
}
main p
'''
    session = Session(registry=reg, model=FakeModel(default='"ok"'), cache=StepCache(tmp_path / "c.sqlite"))
    module = session.load("x.decomp", text=src)
    # one after the other: b's call comes when a's answer is already stored
    first = session.run(module, {"question": "cats"}, target="a")
    second = session.run(module, {"question": "cats"}, target="b")
    assert first.ok and second.ok, (first.error, second.error)
    assert a.queries == ["cats"] and b.queries == ["cats"]
    assert [n.cache_hit for n in nodes_of(second, "search")] == [False]
    both = session.run(module, {"question": "cats"})
    assert [n.cache_hit for n in nodes_of(both, "search")] == [True, True]
    assert a.queries == ["cats"] and b.queries == ["cats"]


def test_a_replay_cache_miss_of_a_service_call_is_an_abort_before_the_call(tmp_path):
    service = FakeSearch()
    result, _ = run_src(CACHED, {"question": "cats"}, {"main": service},
                        cache=StepCache(tmp_path / "c.sqlite", mode="replay"))
    assert not result.ok
    assert "replay mode: nothing cached for search 'search: cats' on fake-search" in result.error
    assert result.error.startswith("[find] search, x.decomp:4:5: ")
    assert service.queries == []


# ------------------------------------------------------------------ (e) the trace
def test_the_trace_has_a_node_of_the_service_kind_with_what_and_the_answer():
    service = FakeSearch()
    result, _ = run_src(ONE, {"question": "cats"}, {"main": service})
    assert result.ok, result.error
    [node] = nodes_of(result, "search")
    assert node.query == "search: cats"
    assert node.label == "fake-search" and node.handler == "find"
    assert node.answer == ["doc about cats"] and node.error is None and node.cache_hit is False
    assert node.seconds is not None and node.seconds >= 0
    [call] = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "find"]
    assert node in call.children  # under the handler call that made it
    assert json.loads(json.dumps(result.trace.to_dict()))  # the trace stays plain JSON


def test_the_trace_node_records_a_failed_call():
    service = FakeSearch(error=SearchError("index is down"))
    result, _ = run_src(ONE, {"question": "cats"}, {"main": service})
    [node] = nodes_of(result, "search")
    assert node.query == "search: cats" and node.answer is None
    assert node.error is not None and "index is down" in node.error
    assert "index is down" in result.error and result.trace.error == result.error


# ------------------------------------------------------------------ (f) redaction of secrets
def _assert_no_secret(result):
    assert SECRET not in result.error
    assert "***" in result.error
    dumped = json.dumps(result.trace.to_dict())
    assert SECRET not in dumped
    for node in result.trace.walk():
        assert SECRET not in (node.error or "")


def test_a_service_error_loses_the_services_secrets():
    service = FakeSearch(secret=SECRET, error=ServiceError(f"bad key {SECRET}"))
    result, _ = run_src(ONE, {"question": "cats"}, {"main": service})
    assert not result.ok
    _assert_no_secret(result)
    assert result.error == "[find] search, x.decomp:4:5: bad key ***"
    [node] = nodes_of(result, "search")
    assert node.error is not None and "bad key ***" in node.error


def test_a_secret_in_the_last_transient_error_is_removed_too():
    class Leaky(FakeSearch):
        async def search(self, query):
            self.queries.append(query)
            raise TransientServiceError(f"401 for key {SECRET}")

    service = Leaky(secret=SECRET)
    result, _ = run_src(ONE, {"question": "cats"}, {"main": service}, scheduler=Scheduler(retries=1, backoff=0))
    assert len(service.queries) == 2
    _assert_no_secret(result)
    assert "gave up after 2 attempts; last error: 401 for key ***" in result.error


def test_a_secret_in_an_unexpected_exception_of_a_service_is_removed():
    """A service that raises something other than a DecompError (a client library's own
    exception) is a bug: the row ends with an InternalError, still without the secret."""
    service = FakeSearch(secret=SECRET, error=RuntimeError(f"connection refused for {SECRET}"))
    session = session_for({"main": service})
    module = session.load("x.decomp", text=ONE)
    result = session.run(module, {"question": "cats"})
    assert not result.ok
    _assert_no_secret(result)
    assert "internal error: RuntimeError: connection refused for ***" in result.error
    assert result.error.startswith("[find] search, x.decomp:4:5: ")
    with pytest.raises(InternalError):
        session.run_sync(session.arun_handler(module.handlers["find"], "dogs"))


def test_a_secret_in_an_unexpected_exception_of_a_model_is_removed():
    """Models are services too: the same holds for a completion."""
    from decomp.runtime.models.base import Model

    class LeakyModel(Model):
        name = endpoint = "leaky"

        def secrets(self):
            return (SECRET,)

        async def complete(self, request):
            raise RuntimeError(f"proxy said no to {SECRET}")

    src = 'handler ask = prompt(text="Q: x?\\nA: y\\n")\nprogram p(question) {\n    QS: [ask] #question\n}\nmain p\n'
    session = Session(model=LeakyModel())
    result = session.run(session.load("x.decomp", text=src), {"question": "cats"})
    _assert_no_secret(result)
    assert result.error == "[ask] prompt, x.decomp:3:5: internal error: RuntimeError: proxy said no to ***"
    [node] = nodes_of(result, "model")
    assert node.error is not None and "proxy said no to ***" in node.error


# ------------------------------------------------------------------ (g) close hooks
def test_a_run_closes_the_services_it_used_and_every_handler():
    service, unused = FakeSearch(), FakeSearch("unused")
    closed: list = []
    src = '''
handler find = search()
handler spare = search(service="unused")
program p(question) {
    QS: [find] #question
}
main p
'''
    result, session = run_src(src, {"question": "cats"}, {"main": service, "unused": unused}, closed)
    assert result.ok, result.error
    assert service.closed == 1
    assert unused.closed == 0  # never used through request: not the session's to close
    assert sorted(closed) == ["find", "spare"]  # every handler of the module, called or not
    session.run(session.load("x.decomp", text=src), {"question": "dogs"})
    assert service.closed == 2  # used again in the next run, closed again


def test_close_hooks_run_after_a_failed_row_too():
    service = FakeSearch(error=SearchError("down"))
    closed: list = []
    result, _ = run_src(ONE, {"question": "cats"}, {"main": service}, closed)
    assert not result.ok
    assert service.closed == 1 and closed == ["find"]


def test_arun_does_not_close_but_aclose_does():
    service = FakeSearch()
    closed: list = []
    session = session_for({"main": service}, closed)
    module = session.load("x.decomp", text=ONE)

    async def go():
        result = await session.arun(module, {"question": "cats"})
        before = (service.closed, list(closed))
        await session.aclose()
        return result, before

    result, before = asyncio.run(go())
    assert result.ok
    assert before == (0, [])
    assert service.closed == 1 and closed == ["find"]


def test_a_program_file_target_is_closed_through_its_program_handler(tmp_path):
    service = FakeSearch()
    closed: list = []
    (tmp_path / "other.decomp").write_text('handler inner = search()\n')
    src = '''
handler via = program(file="other.decomp", name="inner")
program p(question) {
    QS: [via] #question
}
main p
'''
    session = session_for({"main": service}, closed)
    result = session.run(session.load(tmp_path / "x.decomp", text=src), {"question": "cats"})
    assert result.ok, result.error
    assert result.answer == ["doc about cats"]
    assert service.closed == 1
    assert closed == ["inner"]


def test_the_handlers_of_a_program_file_are_closed_when_its_program_is_used(tmp_path):
    service = FakeSearch()
    closed: list = []
    (tmp_path / "other.decomp").write_text(
        'handler inner = search()\nprogram look(x) {\n    QS: [inner] #x\n}\nmain look\n')
    src = '''
handler via = program(file="other.decomp")
program p(question) {
    QS: [via] #question
}
main p
'''
    session = session_for({"main": service}, closed)
    result = session.run(session.load(tmp_path / "x.decomp", text=src), {"question": "cats"})
    assert result.ok, result.error
    assert result.answer == ["doc about cats"]
    assert service.closed == 1
    assert closed == ["inner"]


# ------------------------------------------------------------------ (h) reads_inputs and cache keys
def counting_registry(log: list) -> Registry:
    """Two kinds answering the query and the `ctx` input: `plain` (cache key: the query) and
    `reader` (reads_inputs: the inputs are in its key too)."""
    reg = builtin_registry()

    @handler_kind("plain", registry=reg)
    class Plain(Handler):
        async def run(self, call):
            log.append((self.name, call.query, call.inputs.get("ctx")))
            return f"{call.query}/{call.inputs.get('ctx')}"

    @handler_kind("reader", registry=reg)
    class Reader(Plain):
        reads_inputs = True

    return reg


READS = '''
handler k = {kind}()
program p(question, ctx) {{
    QS: [k] #question
}}
main p
'''


def _two_rows(kind: str, tmp_path):
    log: list = []
    session = Session(registry=counting_registry(log), cache=StepCache(tmp_path / "c.sqlite"),
                      model=FakeModel(default='"ok"'))
    module = session.load("x.decomp", text=READS.format(kind=kind))
    results = [session.run(module, {"question": "q", "ctx": ctx}) for ctx in ("a", "b", "a")]
    return results, log, module


def test_a_kind_that_reads_inputs_gets_a_cache_key_per_input(tmp_path):
    results, log, module = _two_rows("reader", tmp_path)
    assert [r.answer for r in results] == ["q/a", "q/b", "q/a"]
    assert log == [("k", "q", "a"), ("k", "q", "b")]  # the third row is the first row's hit
    assert [r.usage.cache_hits for r in results] == [0, 0, 1]


def test_a_kind_that_does_not_read_inputs_shares_one_key(tmp_path):
    results, log, module = _two_rows("plain", tmp_path)
    assert [r.answer for r in results] == ["q/a", "q/a", "q/a"]  # the key ignores ctx
    assert log == [("k", "q", "a")]
    assert [r.usage.cache_hits for r in results] == [0, 1, 1]


def test_cache_parts_hold_the_inputs_only_when_the_kind_reads_them(tmp_path):
    from decomp.runtime.engine.call import EngineCall
    from decomp.runtime.engine.tracing import TraceNode

    for kind, reads in (("reader", True), ("plain", False)):
        session = Session(registry=counting_registry([]))
        handler = session.load("x.decomp", text=READS.format(kind=kind)).handlers["k"]
        parts = [handler.cache_parts(EngineCall("q", (), {"question": "q", "ctx": ctx}, (), None, session,
                                                handler, TraceNode("call")))
                 for ctx in ("a", "b")]
        assert (parts[0] != parts[1]) is reads
        assert ("inputs" in parts[0]) is reads
        if reads:
            assert parts[0]["inputs"] == {"question": "q", "ctx": "a"}
