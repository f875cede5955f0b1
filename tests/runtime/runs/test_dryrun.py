"""Dry runs' token and cost estimates (decomp.runtime.runs.dryrun): prompt tokens are the rendered
prompts at characters / 4, completion tokens the stand-in's answers at characters / 4, with
the requests' max_tokens as the upper bound; a cost only when the run's model has a price."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.models.prices import Price
from decomp.runtime.runs.api import RunOptions, find_program
from decomp.runtime.storage.datasets import Row
from decomp.runtime.runs.dryrun import dry_run, dry_run_estimate
from decomp.runtime.models.replay import ReplayModel, estimated_tokens as fake_tokens

LETTER_Q = 'Take the last letters of the words in "Ada Lovelace" and concatenate them using a space.'


def test_token_estimates_are_the_stand_ins_requests_and_answers():
    replay = ReplayModel()
    session = RunOptions(cache_mode="off").session(replay)
    loaded = session.load(find_program("decomp/letter_cat_llm"))
    rows = [Row(i, f"r{i}", {"question": LETTER_Q}, None) for i in range(2)]
    found = dry_run(session, loaded, rows)
    assert found.calls == [9, 9] and len(replay.history) == 18
    assert found.prompt_tokens == sum(fake_tokens(r.prompt) for r in replay.history)
    assert found.completion_tokens == sum(fake_tokens(t) for texts in replay.replies for t in texts)
    assert found.max_completion_tokens == sum(r.max_tokens * r.n for r in replay.history) > found.completion_tokens
    estimate = found.estimate(Price(1.0, 4.0))
    assert estimate["estimated_prompt_tokens"] == found.prompt_tokens
    assert estimate["estimated_cost"] == pytest.approx(found.prompt_tokens / 1e6 + 4 * found.completion_tokens / 1e6)
    assert estimate["max_cost"] == pytest.approx(found.prompt_tokens / 1e6 + 4 * found.max_completion_tokens / 1e6)
    assert "estimated_cost" not in found.estimate()


def test_estimate_without_tokens_is_the_calls_only():
    assert dry_run_estimate([9, 3, 0], 1) == {"rows": 3, "calls_per_row": 4.0, "max_calls_per_row": 9,
                                              "estimated_calls": 12, "failed": 1}
    assert dry_run_estimate([1], 0, (100, 10, 50), Price(10, 20)) == {
        "rows": 1, "calls_per_row": 1.0, "max_calls_per_row": 1, "estimated_calls": 1,
        "estimated_prompt_tokens": 100, "estimated_completion_tokens": 10, "max_completion_tokens": 50,
        "estimated_cost": 0.0012, "max_cost": 0.002}


def test_dry_run_prices_the_model_the_run_would_use(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-4o-mini": {"price_in": 0.15, "price_out": 0.6}}))
    args = ["run", "decomp/letter_cat_llm", "--dry-run", "-q", LETTER_Q, "--prices", str(prices)]
    priced = CliRunner().invoke(main, args + ["--model", "openai:gpt-4o-mini"])
    assert priced.exit_code == 0, priced.output
    estimate = json.loads(priced.output.strip().splitlines()[-1])
    expected = estimate["estimated_prompt_tokens"] * 0.15 / 1e6 + estimate["estimated_completion_tokens"] * 0.6 / 1e6
    assert estimate["estimated_cost"] == pytest.approx(expected, abs=1e-6) and estimate["max_cost"] > 0
    unpriced = CliRunner().invoke(main, args + ["--model", "openai:gpt-4o"])
    assert unpriced.exit_code == 0, unpriced.output
    assert "estimated_cost" not in json.loads(unpriced.output.strip().splitlines()[-1])
