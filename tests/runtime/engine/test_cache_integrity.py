"""The step cache is never trusted blindly: a damaged or foreign file is reported by path and
bypassed (the run goes on, uncached; in replay mode the row says why), a full disk stops caching
instead of aborting, and an entry changed behind the cache's back is recomputed, never served."""
import json
import sqlite3

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.engine.cache import CacheMiss, CacheWarning, StepCache, cache_key

PROGRAM = 'handler up = python(function="helpers:up")\nprogram p(question) {\n  QS: [up] #question\n}\nmain p\n'
HELPERS = 'CALLS = []\n\ndef up(query):\n    CALLS.append(query)\n    return query.upper()\n'


def _program(tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (tmp_path / "p.decomp").write_text(PROGRAM, encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": str(i), "question": f"q{i}"}) + "\n" for i in range(5)), encoding="utf-8")
    return tmp_path / "p.decomp", rows


def test_a_damaged_cache_file_is_named_once_and_bypassed(tmp_path):
    program, rows = _program(tmp_path)
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "steps.sqlite").write_bytes(b"this is not a database, it is a damaged file" * 100)
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(rows), "--run-dir", str(tmp_path / "r"),
                                       "--cache-dir", str(cache_dir)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rows"] == 5 and summary["failed"] == 0  # every row answered, none an internal error
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: step cache")]
    assert len(warned) == 1 and str(cache_dir / "steps.sqlite") in warned[0] and "bypassed" in warned[0]


def test_replay_over_a_damaged_cache_ends_rows_naming_the_file(tmp_path):
    path = tmp_path / "steps.sqlite"
    path.write_bytes(b"\x00garbage" * 500)
    cache = StepCache(path, "replay")
    with pytest.warns(CacheWarning):
        with pytest.raises(CacheMiss, match="steps.sqlite"):
            cache.get(cache_key({"a": 1}))
    with pytest.raises(CacheMiss, match="bypassed"):  # every later lookup says why too
        cache.get(cache_key({"a": 2}))


def test_an_entry_changed_behind_the_caches_back_is_recomputed(tmp_path):
    path = tmp_path / "steps.sqlite"
    cache = StepCache(path)
    key = cache_key({"q": "capital of France"})
    cache.put(key, "Paris")
    cache.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE entries SET value = ? WHERE key = ?", (json.dumps("Lyon"), key))
    db.commit()
    db.close()
    again = StepCache(path)
    assert not again.hit(again.get(key)) and again.rejected == 1  # a miss: the answer is recomputed
    again.put(key, "Paris")
    again.flush()
    assert StepCache(path).get(key) == "Paris"


def test_a_full_disk_stops_caching_and_the_run_goes_on(tmp_path, monkeypatch):
    cache = StepCache(tmp_path / "steps.sqlite", flush_every=1)
    cache.put(cache_key({"n": 0}), "kept")  # a first write works

    class Full:
        def __init__(self, db):
            self.db = db

        def execute(self, sql, *args):
            return self.db.execute(sql, *args)

        def executemany(self, sql, rows):
            raise sqlite3.OperationalError("database or disk is full")

        def close(self):
            self.db.close()

    monkeypatch.setattr(cache, "_db", Full(cache._connect()))
    with pytest.warns(CacheWarning, match="database or disk is full"):
        cache.put(cache_key({"n": 1}), "lost")
    assert cache.problem is not None and not cache.writes and not cache.reads
    cache.put(cache_key({"n": 2}), "ignored")  # no error, nothing raised: the run goes on uncached
    assert not cache.hit(cache.get(cache_key({"n": 0})))
    assert StepCache(tmp_path / "steps.sqlite").get(cache_key({"n": 0})) == "kept"  # the file is intact


def _forge(path, value: str) -> int:
    """Every entry's value replaced by `value` with its checksum recomputed (what a tool that
    knows the scheme could do); returns how many."""
    from decomp.runtime.engine.cache import _checksum

    db = sqlite3.connect(path)
    with db:
        keys = [key for (key,) in db.execute("SELECT key FROM entries")]
        for key in keys:
            db.execute("UPDATE entries SET value = ?, checksum = ? WHERE key = ?", (value, _checksum(key, value), key))
    db.close()
    return len(keys)


@pytest.mark.parametrize("forged", ['{"txt": "hijacked"}', '["hijacked"]', '{"text": 4}', '"hijacked"'])
def test_a_forged_model_sample_of_the_wrong_shape_is_recomputed(tmp_path, forged):
    program = tmp_path / "p.decomp"
    program.write_text('handler ask = prompt(text="Q: a?\\nA: 1\\n")\nprogram p(question) {\n'
                       '    QS: [ask] #question\n}\nmain p\n', encoding="utf-8")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"mapping": {"What is 2+2?": " 4"}}), encoding="utf-8")
    args = ["run", str(program), "--model", f"fake:{answers}", "-q", "What is 2+2?", "--cache-dir", str(tmp_path / "c")]
    assert CliRunner().invoke(main, args).output.strip() == "4"
    assert _forge(tmp_path / "c" / "steps.sqlite", forged) >= 1
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and again.output.strip() == "4", again.output  # recomputed, not an internal error
    replay = CliRunner().invoke(main, [*args, "--cache", "replay"])
    assert replay.exit_code == 0 and replay.output.strip() == "4"  # the recomputed entry was stored again
    _forge(tmp_path / "c" / "steps.sqlite", forged)
    replay = CliRunner().invoke(main, [*args, "--cache", "replay"])
    assert replay.exit_code == 1 and "internal error" not in replay.output
    assert "replay mode: the entry for [ask] on " in replay.output and "is damaged (" in replay.output


def test_a_cached_value_nested_100000_deep_is_a_miss_read_in_linear_time(tmp_path):
    import time

    from decomp.runtime.engine import deepjson

    path = tmp_path / "steps.sqlite"
    cache = StepCache(path)
    key = cache_key({"q": "deep"})
    cache.put(key, "shallow")
    cache.close()
    started = time.perf_counter()
    _forge(path, "[" * 100_000 + "]" * 100_000)
    again = StepCache(path)
    assert not again.hit(again.get(key)) and again.rejected == 1
    assert time.perf_counter() - started < 10
    with pytest.raises(CacheMiss, match=r"the entry for call is damaged \(nested more than 500 levels deep\)"):
        StepCache(path, "replay").get(key)
    deep = [[[["ok"]]]]
    again.put(key, deep)
    again.flush()
    assert StepCache(path).get(key) == deep and deepjson.depth(deep, 10) == 4


def test_a_shape_names_the_fields_a_reader_needs():
    from decomp.runtime.engine.cache import _shape_problem

    assert _shape_problem({"text": "a"}, {"text": str}) is None
    assert _shape_problem({"txt": "a"}, {"text": str}) == "no 'text'"
    assert _shape_problem({"logprob": True, "tokens": 1}, {"logprob": (int, float), "tokens": int}) == \
        "its 'logprob' is a boolean"
    assert _shape_problem([1], {"answer": object}) == "a list, not an object"
