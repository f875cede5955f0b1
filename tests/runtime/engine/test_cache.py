"""decomp.runtime.engine.cache (StepCache, cache_key) and how Session and the interpreter use it:
persistence, buffered writes, the four modes, several processes on one file (WAL), per-sample
caching of completions, cached symbolic handlers, no secrets on disk, and cached batch re-runs."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import registry_with
from decomp.runtime.models.base import Completion, Model, ModelSettings, Request
from decomp.runtime.testing.fake import FakeModel, last_question
from decomp.runtime.engine.budgets import CURRENT_ROW, Budget, RowContext, Usage
from decomp.runtime.runs.batch import run_file
from decomp.runtime.engine.cache import MODES, CacheMiss, StepCache, cache_key, default_cache_dir
from decomp.runtime.engine.session import Session


# ------------------------------------------------------------------ StepCache itself
def test_round_trip_after_flush_and_in_a_new_object(tmp_path):
    path = tmp_path / "c" / "steps.sqlite"
    cache = StepCache(path)
    values = {"a": "text", "b": ["x", 1, None], "c": {"k": [1.5, True]}, "d": None, "e": "Lougerière"}
    for key, value in values.items():
        cache.put(key, value)
    cache.flush()
    for key, value in values.items():
        assert cache.get(key) == value
    cache.close()
    again = StepCache(path)
    for key, value in values.items():
        got = again.get(key)
        assert again.hit(got) and got == value
    assert not again.hit(again.get("missing"))
    assert len(again) == len(values)
    again.close()


def test_a_stored_none_is_a_hit():
    cache = StepCache()
    cache.put("k", None)
    assert cache.hit(cache.get("k")) and cache.get("k") is None


def test_default_path_is_under_the_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    assert StepCache().path == tmp_path / "here" / "steps.sqlite"


def test_buffered_writes_are_visible_before_flush_but_not_on_disk(tmp_path):
    path = tmp_path / "steps.sqlite"
    writer = StepCache(path, flush_every=1000, flush_seconds=3600)
    reader = StepCache(path)
    writer.put("k", {"v": 1})
    assert writer.get("k") == {"v": 1}            # the writer sees its own buffer
    assert not reader.hit(reader.get("k"))       # nothing committed yet
    writer.flush()
    assert reader.get("k") == {"v": 1}
    writer.put("k", {"v": 2})                    # overwrite, buffered
    assert writer.get("k") == {"v": 2}
    writer.close()                               # close commits the rest
    assert reader.get("k") == {"v": 2}
    reader.close()


def test_flush_every_commits_in_batches(tmp_path):
    path = tmp_path / "steps.sqlite"
    writer = StepCache(path, flush_every=3, flush_seconds=3600)
    reader = StepCache(path)
    writer.put("a", 1)
    writer.put("b", 2)
    assert not reader.hit(reader.get("a"))
    writer.put("c", 3)  # the third put commits the batch
    assert [reader.get(k) for k in "abc"] == [1, 2, 3]
    writer.close()
    reader.close()


@pytest.mark.parametrize("mode", ["read-write", "refresh", "off", "replay"])
def test_modes(tmp_path, mode):
    path = tmp_path / "steps.sqlite"
    seed = StepCache(path)
    seed.put("old", "stored")
    seed.close()

    cache = StepCache(path, mode)
    assert cache.reads == (mode in ("read-write", "replay"))
    assert cache.writes == (mode in ("read-write", "refresh"))
    got = cache.get("old")
    if mode in ("read-write", "replay"):
        assert got == "stored"
    else:
        assert not cache.hit(got)
    if mode == "replay":
        with pytest.raises(CacheMiss, match="replay"):
            cache.get("new", "[h] 'question'")
    else:
        assert not cache.hit(cache.get("new"))
    cache.put("new", "fresh")
    cache.close()

    check = StepCache(path)
    stored = check.get("new")
    assert check.hit(stored) == (mode in ("read-write", "refresh"))
    assert check.get("old") == "stored"
    check.close()


def test_refresh_overwrites_and_off_touches_nothing(tmp_path):
    path = tmp_path / "steps.sqlite"
    first = StepCache(path)
    first.put("k", "v1")
    first.close()
    refresh = StepCache(path, "refresh")
    refresh.put("k", "v2")
    refresh.close()
    assert StepCache(path).get("k") == "v2"
    off_path = tmp_path / "off" / "steps.sqlite"
    off = StepCache(off_path, "off")
    off.put("k", "v")
    assert not off.hit(off.get("k"))
    off.flush()
    assert not off_path.exists()


def test_replay_miss_names_what_was_missing(tmp_path):
    cache = StepCache(tmp_path / "s.sqlite", "replay")
    with pytest.raises(CacheMiss) as caught:
        cache.get("nope", "[split] 'What are the words'")
    assert "[split]" in str(caught.value)


def test_unknown_mode_is_a_value_error():
    with pytest.raises(ValueError, match="unknown cache mode 'sometimes'") as caught:
        StepCache(mode="sometimes")
    for mode in MODES:
        assert mode in str(caught.value)


def test_file_uses_wal(tmp_path):
    path = tmp_path / "steps.sqlite"
    cache = StepCache(path)
    cache.put("k", 1)
    cache.flush()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    db.close()
    cache.close()


WRITER = textwrap.dedent('''
    import pathlib, sys, time
    from decomp.runtime.engine.cache import StepCache
    path, tag, n, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
    # a start line: write only once both writers are up (the deadline only stops a hang)
    (ready / tag).touch()
    deadline = time.monotonic() + 60
    while len(list(ready.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    cache = StepCache(path, flush_every=7, flush_seconds=3600)
    for i in range(n):
        cache.put(f"{tag}-{i}", {"tag": tag, "i": i})
        if i % 5 == 0:
            cache.get(f"{tag}-{i // 2}")
    cache.close()
    print("done", tag)
''')


@pytest.mark.slow
def test_two_processes_write_one_file_concurrently(tmp_path):
    path = tmp_path / "shared" / "steps.sqlite"
    ready = tmp_path / "ready"
    ready.mkdir()
    n = 400
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(n), str(ready)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in ("left", "right")]
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
        assert out.startswith("done")
    cache = StepCache(path)
    for tag in ("left", "right"):
        for i in range(n):
            assert cache.get(f"{tag}-{i}") == {"tag": tag, "i": i}
    assert len(cache) == 2 * n
    cache.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


# ------------------------------------------------------------------ cache_key
def test_cache_key_is_stable_under_key_order():
    one = {"kind": "regex", "options": {"pattern": "x", "all": True}, "query": "q", "values": [1, {"a": 1, "b": 2}]}
    two = {"values": [1, {"b": 2, "a": 1}], "query": "q", "options": {"all": True, "pattern": "x"}, "kind": "regex"}
    assert cache_key(one) == cache_key(two)
    assert len(cache_key(one)) == 64 and int(cache_key(one), 16) >= 0


def test_cache_key_differs_when_any_part_differs():
    base = {"kind": "regex", "version": "1", "options": {"pattern": "x"}, "query": "q", "values": [1, "a"]}
    variants = [
        {**base, "kind": "python"},
        {**base, "version": "2"},
        {**base, "options": {"pattern": "y"}},
        {**base, "options": {"pattern": "x", "all": True}},
        {**base, "query": "q "},
        {**base, "values": [1, "b"]},
        {**base, "values": ["a", 1]},
        {**base, "values": [1, "a", None]},
        {**base, "extra": None},
        {k: v for k, v in base.items() if k != "values"},
    ]
    keys = {cache_key(v) for v in variants}
    assert cache_key(base) not in keys
    assert len(keys) == len(variants)
    # 1, 1.0, "1" and True are different answers' inputs
    assert len({cache_key({"v": x}) for x in (1, "1", True, [1])}) == 4


# ------------------------------------------------------------------ Session.complete: samples
class Sampler(Model):
    """Answers every sample with a new number; logs each request."""

    def __init__(self, name="sampler"):
        self.name = self.endpoint = name
        self.requests: list[Request] = []
        self.counter = 0

    async def complete(self, request):
        self.requests.append(request)
        texts = []
        for _ in range(request.n):
            texts.append(f"sample-{self.counter}")
            self.counter += 1
        return Completion(tuple(texts), 10, request.n)


def complete_in_row(session, model, request):
    async def go():
        row = RowContext(0, Budget(), Usage())
        token = CURRENT_ROW.set(row)
        try:
            completion = await session.complete(model, request, "h")
        finally:
            CURRENT_ROW.reset(token)
        return completion, row.usage
    return asyncio.run(go())


def test_samples_are_cached_by_index(tmp_path):
    model = Sampler()
    session = Session(model=model, cache=StepCache(tmp_path / "s.sqlite"))
    first, usage = complete_in_row(session, model, Request("prompt", temperature=0.7, n=3))
    assert [r.n for r in model.requests] == [3]
    assert first.texts == ("sample-0", "sample-1", "sample-2")
    assert (usage.calls, usage.cache_hits) == (1, 0)

    again, usage = complete_in_row(session, model, Request("prompt", temperature=0.7, n=3))
    assert len(model.requests) == 1  # all three samples came from the cache
    assert again.texts == first.texts
    assert (usage.calls, usage.cache_hits) == (0, 3)

    more, usage = complete_in_row(session, model, Request("prompt", temperature=0.7, n=5))
    assert [r.n for r in model.requests] == [3, 2]  # only the two missing samples
    assert more.texts == ("sample-0", "sample-1", "sample-2", "sample-3", "sample-4")
    assert (usage.calls, usage.cache_hits) == (1, 3)

    fewer, usage = complete_in_row(session, model, Request("prompt", temperature=0.7, n=2))
    assert fewer.texts == ("sample-0", "sample-1") and len(model.requests) == 2

    # a different temperature, prompt or max_tokens is a different sample
    complete_in_row(session, model, Request("prompt", temperature=0.8, n=1))
    complete_in_row(session, model, Request("prompt2", temperature=0.7, n=1))
    complete_in_row(session, model, Request("prompt", temperature=0.7, n=1, max_tokens=5))
    assert len(model.requests) == 5


def test_samples_survive_a_new_session(tmp_path):
    path = tmp_path / "s.sqlite"
    model = Sampler()
    session = Session(model=model, cache=StepCache(path))
    first, _ = complete_in_row(session, model, Request("p", temperature=1.0, n=3))
    asyncio.run(session.aclose())
    fresh_model = Sampler()
    other = Session(model=fresh_model, cache=StepCache(path))
    again, usage = complete_in_row(other, fresh_model, Request("p", temperature=1.0, n=3))
    assert fresh_model.requests == [] and again.texts == first.texts and usage.cache_hits == 3


def test_temperature_zero_ignores_the_sample_index(tmp_path):
    model = Sampler()
    session = Session(model=model, cache=StepCache(tmp_path / "s.sqlite"))
    one, _ = complete_in_row(session, model, Request("prompt", temperature=0.0, n=1))
    three, usage = complete_in_row(session, model, Request("prompt", temperature=0.0, n=3))
    assert len(model.requests) == 1
    assert three.texts == (one.text,) * 3
    assert usage.cache_hits == 3


def test_cache_is_keyed_by_model_name(tmp_path):
    a, b = Sampler("a"), Sampler("b")
    session = Session(cache=StepCache(tmp_path / "s.sqlite"))
    complete_in_row(session, a, Request("p"))
    complete_in_row(session, b, Request("p"))
    assert len(a.requests) == len(b.requests) == 1


def test_replay_mode_session_raises_on_missing_sample(tmp_path):
    model = Sampler()
    session = Session(model=model, cache=StepCache(tmp_path / "s.sqlite", "replay"))
    with pytest.raises(CacheMiss):
        complete_in_row(session, model, Request("never seen"))
    assert model.requests == []


# ------------------------------------------------------------------ cached handlers
SYMBOLIC = '''
handler word  = regex(pattern=r'"([^"]*)"')
handler shout = fn(fn="shout")
program p(question) {
    QS: [word] #question
    QS: [shout] #1
}
main p
'''


def test_symbolic_handlers_are_cached(tmp_path):
    path = tmp_path / "steps.sqlite"
    calls: list = []
    functions = {"shout": lambda q: q.upper() + "!"}

    def run_once():
        session = Session(registry=registry_with(functions, calls), cache=StepCache(path))
        module = session.load("x.decomp", text=SYMBOLIC)
        return session.run(module, {"question": 'say "hello" now'})

    first = run_once()
    assert first.ok, first.error
    assert first.answer == '"HELLO"!'
    assert calls == [("shout", '"hello"')]
    assert first.usage.cache_hits == 0

    second = run_once()
    assert second.ok and second.answer == first.answer
    assert calls == [("shout", '"hello"')]  # not run again
    assert second.usage.cache_hits == 2  # regex and fn both answered from the cache
    assert second.usage.calls == 0
    hits = [n for n in second.trace.walk() if n.kind == "call" and n.cache_hit]
    assert {n.handler for n in hits} == {"word", "shout"}

    # a different question misses
    session = Session(registry=registry_with(functions, calls), cache=StepCache(path))
    third = session.run(session.load("x.decomp", text=SYMBOLIC), {"question": 'say "bye"'})
    assert third.answer == '"BYE"!' and len(calls) == 2


def test_cache_off_reruns_handlers(tmp_path):
    calls: list = []
    for _ in range(2):
        session = Session(registry=registry_with({"shout": str.upper}, calls),
                          cache=StepCache(tmp_path / "s.sqlite", "off"))
        result = session.run(session.load("x.decomp", text=SYMBOLIC), {"question": '"a"'})
        assert result.ok and result.usage.cache_hits == 0
    assert len(calls) == 2


PY = '''
handler h = python(function="f")
program p(question) {
    QS: [h] #question
}
main p
'''


def _py_run(path, fn):
    registry = registry_with({})
    registry.add_function(fn, "f")
    session = Session(registry=registry, cache=StepCache(path))
    return session.run(session.load("x.decomp", text=PY), {"question": "Hello"})


def _with_name(fn):
    fn.__name__ = fn.__qualname__ = "f"
    return fn


def test_python_handler_cache_hit_for_same_code(tmp_path):
    path = tmp_path / "s.sqlite"
    ran: list = []

    def f(query):
        ran.append(query)
        return query + "!"

    assert _py_run(path, f).answer == "Hello!"
    second = _py_run(path, f)
    assert second.answer == "Hello!" and second.usage.cache_hits == 1
    assert ran == ["Hello"]


def test_python_handler_with_changed_constant_misses(tmp_path):
    path = tmp_path / "s.sqlite"
    one = _with_name(lambda query: query + "!")
    two = _with_name(lambda query: query + "?")
    assert _py_run(path, one).answer == "Hello!"
    second = _py_run(path, two)
    assert second.answer == "Hello?"
    assert second.usage.cache_hits == 0


def test_python_handler_with_changed_called_name_misses(tmp_path):
    """Editing `query.upper()` into `query.lower()` changes only co_names (not co_code or
    co_consts): the edited function must still miss the cache."""
    path = tmp_path / "s.sqlite"
    one = _with_name(lambda query: query.upper())
    two = _with_name(lambda query: query.lower())
    assert _py_run(path, one).answer == "HELLO"
    second = _py_run(path, two)
    assert second.answer == "hello", "the edited function's answer, not the stale cached one"
    assert second.usage.cache_hits == 0


@pytest.mark.slow
def test_python_handler_with_a_comprehension_hits_the_cache_in_a_new_process(tmp_path):
    """The key of a python handler must not depend on the process: a function holding a
    nested code object (a comprehension, a lambda) must still hit the cache on the next run."""
    import os

    (tmp_path / "fnmod_cache_test.py").write_text(textwrap.dedent('''
        import os
        def f(query):
            with open(os.environ["FN_LOG"], "a") as log:
                log.write("ran\\n")
            return "-".join([c.upper() for c in query])
    '''))
    program = tmp_path / "p.decomp"
    program.write_text('handler h = python(function="fnmod_cache_test:f")\n'
                       'program p(question) {\n    QS: [h] #question\n}\nmain p\n')
    log = tmp_path / "ran.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "FN_LOG": str(log)}
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "run", str(program), "-q", "abc",
                               "--cache-dir", str(tmp_path / "cache")],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "A-B-C"
    assert log.read_text().count("ran") == 1, "the second run did not use the cached answer"


# ------------------------------------------------------------------ no secrets on disk
@pytest.mark.network
def test_api_key_never_reaches_the_cache_file(tmp_path, monkeypatch):
    import decomp.runtime.models.openai_backend  # noqa: F401  (registers `openai:`)
    from decomp.runtime.testing.mock_server import MockOpenAIServer

    marker = "sk-MARKER-3f9a1c77e2b54d0e"
    monkeypatch.setenv("OPENAI_API_KEY", marker)
    path = tmp_path / "secret-test" / "steps.sqlite"
    src = '''
handler ask = prompt(text="Q: ping?\\nA: pong\\n", temperature=0.5, n=2)
program p(question) {
    QS: [ask] #question
}
main p
'''
    with MockOpenAIServer(require_key=marker, responder=lambda prompt, req: "pong") as server:
        session = Session(model="openai:m", settings=ModelSettings(base_url=server.base_url),
                          cache=StepCache(path))
        result = session.run(session.load("x.decomp", text=src), {"question": "ping?"})
        session.cache.close()
    assert result.ok, result.error  # the key was sent: the server requires it
    assert result.answer == ["pong", "pong"]
    files = [p for p in path.parent.iterdir() if p.is_file()]
    assert path in files
    assert sum(len(p.read_bytes()) for p in files) > 0
    for p in files:
        data = p.read_bytes()
        assert marker.encode() not in data, p
        assert b"MARKER" not in data, p
    assert len(StepCache(path)) == 2


@pytest.mark.slow
@pytest.mark.network
def test_api_key_never_reaches_the_cache_file_through_the_cli(tmp_path):
    """`decomp run --model openai:NAME --base-url URL` in a fresh process (nothing imported
    beforehand), with the key in OPENAI_API_KEY and the cache in --cache-dir."""
    import os

    from decomp.runtime.testing.mock_server import MockOpenAIServer

    marker = "sk-MARKER-5b1e0f3d9c2a4e68"
    program = tmp_path / "ping.decomp"
    program.write_text('handler ask = prompt(text="Q: ping?\\nA: pong\\n")\n'
                       'program p(question) {\n    QS: [ask] #question\n}\nmain p\n')
    cache_dir = tmp_path / "cli-cache"
    env = {**os.environ, "OPENAI_API_KEY": marker}
    env.pop("OPENAI_BASE_URL", None)
    with MockOpenAIServer(require_key=marker, responder=lambda prompt, req: "pong") as server:
        proc = subprocess.run(
            [sys.executable, "-m", "decomp.runtime.cli", "run", str(program), "-q", "ping?",
             "--model", "openai:m", "--base-url", server.base_url, "--cache-dir", str(cache_dir)],
            capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "pong"
    files = [p for p in cache_dir.iterdir() if p.is_file()]
    assert any(p.name == "steps.sqlite" for p in files)
    for p in files:
        assert marker.encode() not in p.read_bytes(), p


# ------------------------------------------------------------------ batch re-run
BATCH = '''
handler ask  = prompt(text="Q: Who?\\nA: me\\n")
handler tail = fn(fn="tail")
program p(question) {
    QS: [ask] Name in #question
    QS: [tail] #1
}
main p
'''


def test_rerun_of_a_batch_makes_no_model_calls(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": f"question {i}"}) + "\n" for i in range(50)))
    cache_path = tmp_path / "cache" / "steps.sqlite"
    tail_calls: list = []

    def one_run(out_name):
        model = FakeModel(default=lambda req: f'"who {last_question(req.prompt).split()[-1]}"')
        session = Session(registry=registry_with({"tail": lambda q: q[::-1]}, tail_calls), model=model,
                          cache=StepCache(cache_path))
        module = session.load("x.decomp", text=BATCH)
        summary = run_file(session, module, data, tmp_path / out_name)
        session.cache.close()
        lines = [json.loads(line) for line in (tmp_path / out_name).read_text().splitlines()]
        return model, summary, lines

    model1, summary1, lines1 = one_run("one.jsonl")
    assert len(model1.history) == 50
    assert summary1.rows == 50 and summary1.failed == 0
    assert summary1.usage.calls == 50
    model2, summary2, lines2 = one_run("two.jsonl")
    assert model2.history == []
    assert summary2.usage.calls == 0 and summary2.usage.cache_hits == 100
    assert len(tail_calls) == 50  # the fn step was cached too

    answers1 = {line["index"]: line["answer"] for line in lines1}
    answers2 = {line["index"]: line["answer"] for line in lines2}
    assert answers1 == answers2
    assert sorted(answers1) == list(range(50))
    assert answers1[7] == '"7 ohw"'  # #1 is substituted as JSON text
    assert all(line["usage"]["calls"] == 0 and line["usage"]["cache_hits"] == 2 for line in lines2)


# ------------------------------------------------------------------ a sampled request repeated in a row
REPEATED = '''
handler ask = prompt(text="Q: ping?\\nA: pong\\n", temperature=0.7)
program p(question) {
    QS: [ask] #question
    QS: [ask] #question
    QS: [ask] #question
}
main p
'''


def _steps(result):
    return [n.answer for n in result.trace.walk() if n.kind == "step"]


def test_a_sampled_request_repeated_in_a_row_gets_new_samples_and_a_rerun_replays_them(tmp_path):
    path = tmp_path / "steps.sqlite"
    runs = []
    for _ in range(2):
        model = FakeModel(answers=["one", "two", "three", "four"])
        session = Session(model=model, cache=StepCache(path))
        result = session.run(session.load("x.decomp", text=REPEATED), {"question": "hi"})
        session.cache.close()
        assert result.error is None, result.error
        runs.append((model, result))
    (model1, first), (model2, again) = runs
    assert _steps(first) == ["one", "two", "three"]  # not the first sample three times
    assert len(model1.history) == 3 and first.usage.calls == 3
    assert _steps(again) == ["one", "two", "three"]  # the same samples, in the same order
    assert model2.history == [] and again.usage.cache_hits == 3


def test_each_row_counts_its_own_occurrences(tmp_path):
    model = FakeModel(answers=["one", "two", "three", "four"])
    session = Session(model=model, cache=StepCache(tmp_path / "steps.sqlite"))
    module = session.load("x.decomp", text=REPEATED.replace("    QS: [ask] #question\n", "", 1))
    assert _steps(session.run(module, {"question": "hi"})) == ["one", "two"]
    other = session.run(module, {"question": "hi"})
    assert _steps(other) == ["one", "two"] and other.usage.cache_hits == 2 and len(model.history) == 2


def test_a_greedy_request_repeated_in_a_row_is_answered_from_the_cache(tmp_path):
    model = FakeModel(answers=["one", "two", "three"])
    session = Session(model=model, cache=StepCache(tmp_path / "steps.sqlite"))
    result = session.run(session.load("x.decomp", text=REPEATED.replace("temperature=0.7", "temperature=0")),
                         {"question": "hi"})
    assert result.error is None, result.error
    assert _steps(result) == ["one", "one", "one"] and len(model.history) == 1
