"""Honest counters in a run's summary (decomp.runtime.storage.summary `Totals`): `calls` and
`calls_per_row` are model requests only, cache hits and handler calls their own figures; per
model the requests' tokens, latency (mean, p50, p95) and cost, aggregated exactly over
sessions and shards; `--prices` and `--max-cost` from the command line against the mock
OpenAI server (whose replies report the usage it is told to)."""
from __future__ import annotations

import json

import numpy
import pytest

from decomp.runtime.storage.summary import summarize
from tests.helpers import last_json
from tests.runtime.runs.run_helpers import invoke

DATA = "tests/fixtures/decomp/datasets/letter_cat/n3_eg20_pos2_space.json"
ONE_CALL = '''
handler ask = prompt(text="Q: x?\\nA: y\\n")
program p(question) {
    QS: [ask] #question
    QS: [ask] again #1
}
main p
'''

# the `server` fixture (tests/conftest.py): every reply reports 1,000 prompt and 200 completion tokens, after 30 ms
MOCK_SERVER = {"latency": 0.03, "usage": {"prompt_tokens": 1000, "completion_tokens": 200}}


@pytest.fixture
def rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "question": f"q{i}"}) + "\n" for i in range(5)))
    (tmp_path / "p.decomp").write_text(ONE_CALL)
    return path


def model_args(server, tmp_path, rows, *more):
    return ("run", tmp_path / "p.decomp", "--input", rows, "--model", "openai:mock", "--base-url", server.base_url,
            "--cache", "off", "--run-dir", tmp_path / "run", *more)


def test_letter_cat_symbolic_makes_no_model_calls_even_from_the_cache(tmp_path):
    first = invoke(["run", "decomp/letter_cat_symbolic", "--input", DATA, "--run-dir", tmp_path / "a"])
    second = invoke(["run", "decomp/letter_cat_symbolic", "--input", DATA, "--run-dir", tmp_path / "b"])
    assert first.exit_code == second.exit_code == 0, first.output + second.output
    for summary in map(last_json, (first, second)):
        assert (summary["calls"], summary["calls_per_row"], summary["models"]) == (0, 0, {})
        assert summary["handler_calls"] == sum(h["calls"] for h in summary["handlers"].values()) > 20
        assert "cost" not in summary and summary["prompt_tokens"] == summary["completion_tokens"] == 0
    assert last_json(first)["cache_hits"] == 0 and last_json(second)["cache_hits"] > 0


def test_model_requests_latency_and_cost_in_the_summary(tmp_path, rows, server):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"mock": {"price_in": 2.5, "price_out": 10}}))
    result = invoke(model_args(server, tmp_path, rows, "--prices", prices))
    assert result.exit_code == 0, result.output
    summary = last_json(result)
    assert (summary["calls"], summary["calls_per_row"]) == (10, 2.0)
    assert (summary["prompt_tokens"], summary["completion_tokens"]) == (10_000, 2_000)
    model = summary["models"]["openai:mock"]
    assert (model["requests"], model["prompt_tokens"], model["completion_tokens"]) == (10, 10_000, 2_000)
    assert 0.03 <= model["p50_s"] <= model["p95_s"] < 5 and model["mean_s"] >= 0.03
    cost = 10 * (1000 * 2.5 / 1e6 + 200 * 10 / 1e6)
    assert summary["cost"] == model["cost"] == pytest.approx(cost)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["cost"] == pytest.approx(cost)
    record = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert len(record["usage"]["models"]["openai:mock"]["seconds"]) == 2  # each request's latency kept


def test_no_price_no_cost_figure(tmp_path, rows, server):
    summary = last_json(invoke(model_args(server, tmp_path, rows)))
    assert "cost" not in summary and "cost" not in summary["models"]["openai:mock"]


def test_max_cost_stops_the_calls_once_spent(tmp_path, rows, server):
    prices = tmp_path / "prices.toml"
    prices.write_text('[mock]\nprice_in = 0\nprice_out = 5000\n')  # 200 tokens: 1 a request
    result = invoke(model_args(server, tmp_path, rows, "--prices", prices, "--max-cost", 3))
    assert result.exit_code == 3, result.output  # rows ended in an error, nothing crashed
    summary = last_json(result)
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 5 and summary["rows"] == 5
    refused = [r for r in records if "error" in r]
    assert refused and all("cost for the run reached 3" in r["error"] for r in refused)
    # the five rows start at once: each call in flight holds the most it may cost (max_tokens
    # 256 at 5000 a million: 1.28), so only three are sent, and no row's second call
    assert summary["cost"] == 3 and summary["calls"] == 3


def test_max_cost_needs_a_price_and_a_bad_prices_file_is_a_usage_error(tmp_path, rows, server):
    result = invoke(model_args(server, tmp_path, rows, "--max-cost", 1))
    assert result.exit_code == 3
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert all("--max-cost needs a price for model openai:mock" in r["error"] for r in records)
    bad = tmp_path / "bad.json"
    bad.write_text('{"mock": {"price_in": 1}}')
    result = invoke(model_args(server, tmp_path, rows, "--prices", bad, "--force"))
    assert result.exit_code == 2 and "give exactly price_in and price_out" in result.output


def test_latency_percentiles_are_over_every_request_of_every_session():
    """Summaries are computed from the rows' own latencies: a resumed or merged run's p95 is the
    p95 of all its requests, not an average of its sessions'."""
    seconds = [[0.1, 0.2], [0.3], [5.0, 0.4, 0.5]]
    records = [{"index": i, "usage": {"calls": len(s), "models": {"m": {"requests": len(s), "seconds": s,
                                                                         "prompt_tokens": 3, "completion_tokens": 1,
                                                                         "cost": 0.5}}}}
               for i, s in enumerate(seconds)]
    summary = summarize(records, {"sessions": [{"seconds": 1.0}, {"seconds": 2.0}]})
    every = [s for row in seconds for s in row]
    p50, p95 = numpy.percentile(every, [50, 95])
    assert summary["models"]["m"] == {"requests": 6, "prompt_tokens": 9, "completion_tokens": 3,
                                      "mean_s": round(float(numpy.mean(every)), 6), "p50_s": round(float(p50), 6),
                                      "p95_s": round(float(p95), 6), "cost": 1.5,
                                      # records written before queue times were kept: nothing queued
                                      "service_mean_s": round(float(numpy.mean(every)), 6), "queue_mean_s": 0.0}
    assert summary["cost"] == 1.5 and summary["calls_per_row"] == 2.0
    records[1]["usage"]["models"]["m"].pop("cost")  # one row's requests had no price: no total
    assert "cost" not in summarize(records, {"sessions": []})
