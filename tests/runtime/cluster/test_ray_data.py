"""A program inside a user's own Ray Data pipeline (`ray_data.Predictor` for `map_batches`, an
actor pool on a real local cluster): every row's answer, outcome, score and usage equal a
single-process `decomp run`'s, a bad row is that row's error, and a `shared_limits` actor holds
the concurrency for the whole pool."""
from __future__ import annotations

import json

import pytest

from benchmarks.letter_cat_oracle import respond
from decomp.runtime.runs.api import RunOptions
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.runtime.cluster.ray_helpers import cluster, dataset, needs_ray, whole  # noqa: F401
from tests.runtime.runs.run_helpers import complete_records

pytestmark = needs_ray


def test_a_program_in_a_ray_data_pipeline(cluster, dataset, whole):
    import ray

    from decomp.runtime.cluster.data import COLUMNS, Predictor, shared_limits

    if not ray.is_initialized():
        ray.init(address=cluster.address, log_to_driver=False)
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    rows.append({"id": "bad", "question": None, "answer": "x", "source": "extra"})  # no question to decompose
    with MockOpenAIServer(responder=respond, latency=0.05) as server:
        options = RunOptions(model="openai:mock", base_url=server.base_url, cache_mode="off", concurrency=3)
        answered = ray.data.from_items(rows).map_batches(
            Predictor, fn_constructor_kwargs={"program": "decomp/letter_cat_llm", "options": options,
                                              "limits": shared_limits(3)},
            batch_size=5, concurrency=2, num_cpus=0.5).take_all()
        stats = server.stats()
    assert stats["max_in_flight"] == 3  # two actors, each allowed 3: the shared limit held for both
    assert list(answered[0])[:len(COLUMNS)] == list(COLUMNS)
    by_id = {row["id"]: row for row in answered}
    assert len(by_id) == len(rows)
    for expected in complete_records(whole).values():
        got = by_id[expected["id"]]
        assert json.loads(got["answer"]) == expected["answer"]
        assert (got["outcome"], got["error"], got["score"]) == ("ok", None, 1.0)
        assert json.loads(got["gold"]) == expected["gold"]
        assert got["calls"] == expected["usage"]["calls"] > 0
        assert got["prompt_tokens"] == expected["usage"]["prompt_tokens"]
        assert got["question"] == next(r["question"] for r in rows if r["id"] == expected["id"])
    bad = by_id["bad"]
    assert bad["source"] == "extra" and bad["score"] == 0.0 and bad["outcome"] == "error" and bad["error"]


def test_rows_are_read_as_a_results_line_reads_them():
    from decomp.runtime.cluster.data import _records, _row

    import numpy

    batch = {"id": numpy.array([1, 2]), "question": numpy.array(["a", "b"], dtype=object),
             "answer": numpy.array([None, "x"], dtype=object), "tags": numpy.array([[1, 2], [3, 4]])}
    records_ = _records(batch)
    assert records_[0] == {"id": 1, "question": "a", "answer": None, "tags": [1, 2]}
    assert type(records_[0]["id"]) is int and type(records_[1]["tags"][0]) is int
    row = _row(7, records_[1])
    assert (row.index, row.id, row.fields, row.gold, row.error) == (7, "2", {"question": "b", "tags": [3, 4]}, "x",
                                                                     None)
    assert "the 'id' must be a string or an integer" in _row(0, {"id": [1], "question": "q"}).error
    # numpy's null in a column of numbers is NaN: a missing value, and the other ids stay whole
    with_null = _records({"id": numpy.array([1.0, numpy.nan]), "answer": numpy.array([3.0, numpy.nan])})
    assert with_null == [{"id": 1.0, "answer": 3.0}, {"id": None, "answer": None}]
    assert _row(0, with_null[0]).id == "1" and _row(1, with_null[1]).gold is None
    assert "the 'id' must be a string or an integer" in _row(0, {"id": True, "question": "q"}).error


@pytest.mark.parametrize("frame", [False, True], ids=["columns", "pandas"])
def test_a_batch_runs_in_process_with_an_error_row_kept(tmp_path, frame):
    """The class itself, outside Ray: a symbolic program, a row whose id is bad and one that fails."""
    import pandas

    from decomp.runtime.cluster.data import Predictor

    batch = {"id": ["q1", "q2", "q3"], "answer": ["a a g", None, None],
             "question": ['Take the last letters of the words in "Augusta Ada King" and concatenate them using a '
                          'space.', "not a letter question", 'Take the letters at position 1 of the words in '
                          '"Alan Mathison Turing" and concatenate them using a comma.']}
    predictor = Predictor("decomp/letter_cat_symbolic", options=RunOptions(cache_mode="off"))
    out = predictor(pandas.DataFrame(batch) if frame else batch)
    assert out["id"] == ["q1", "q2", "q3"] and out["question"] == batch["question"]
    assert json.loads(out["answer"][0]) == "a a g" and out["score"][0] == 1.0 and out["outcome"][0] == "ok"
    assert out["outcome"][1] == "error" and out["error"][1] and out["answer"][1] is None
    assert json.loads(out["answer"][2]) == "A,M,T" and out["score"][2] is None and out["gold"][2] is None
    assert out["calls"] == [0, 0, 0]
    again = predictor(batch)  # the same actor serves the next batch
    assert again["answer"] == out["answer"]


def test_a_dropped_predictor_closes_its_event_loop():
    """Its session is closed and its loop stopped and closed: nothing is left to warn about
    (an unclosed loop would warn, later, in whatever code the garbage collector interrupts)."""
    import gc
    import time
    import warnings

    from decomp.runtime.cluster.data import Predictor

    predictor = Predictor("decomp/letter_cat_symbolic", options=RunOptions(cache_mode="off"))
    loop = predictor._loop
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del predictor
        gc.collect()
        deadline = time.monotonic() + 10
        while not loop.is_closed() and time.monotonic() < deadline:
            time.sleep(0.01)
        del loop
        gc.collect()
    assert not [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
