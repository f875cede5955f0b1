"""`decomp run --dry-run`: model calls per row counted on ReplayModel (answers from each prompt's
own few-shot examples), without calling a model or touching the step cache."""
from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from decomp.runtime.models.base import Request
from decomp.runtime.models.replay import ReplayModel
from decomp.runtime.runs.dryrun import dry_run_estimate
from tests.helpers import invoke, last_json

PROMPTS = Path(__file__).resolve().parents[2] / "programs" / "decomp" / "prompts"
LETTER_Q = 'Take the last letters of the words in "Ada Lovelace" and concatenate them using a space.'


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_dry_run_of_letter_cat_counts_nine_calls(tmp_path):
    cache_dir = tmp_path / "cache-dir"
    env_cache = Path(os.environ["DECOMP_CACHE_DIR"])
    before = tree(env_cache)
    result = invoke("run", "decomp/letter_cat_llm", "--dry-run", "-q", LETTER_Q, "--cache-dir", str(cache_dir))
    assert result.exit_code == 0, result.output
    estimate = last_json(result)
    # 4 decomposer lines (split, foreach, merge, [EOQ]) + split + 3 letters + merge: the split
    # prompt's first example has three words
    assert {k: estimate[k] for k in ("rows", "calls_per_row", "max_calls_per_row", "estimated_calls")} == \
        {"rows": 1, "calls_per_row": 9, "max_calls_per_row": 9, "estimated_calls": 9}
    # tokens: chars / 4 of the prompts and of the stand-in's answers; the calls' max_tokens an
    # upper bound (tests/runtime/runs/test_dryrun.py checks the sums exactly)
    assert estimate["estimated_prompt_tokens"] > 9 * 50 and 0 < estimate["estimated_completion_tokens"] < 9 * 20
    assert estimate["max_completion_tokens"] >= estimate["estimated_completion_tokens"]
    assert "estimated_cost" not in estimate  # no price: no cost figure
    assert not cache_dir.exists()
    assert tree(env_cache) == before


def test_dry_run_does_not_touch_the_default_cache_dir():
    env_cache = Path(os.environ["DECOMP_CACHE_DIR"])
    before = tree(env_cache)
    result = invoke("run", "decomp/letter_cat_llm", "--dry-run", "-q", LETTER_Q)
    assert result.exit_code == 0, result.output
    assert last_json(result)["calls_per_row"] == 9
    assert tree(env_cache) == before


def test_dry_run_ignores_the_real_model_and_replay_cache(tmp_path):
    result = invoke("run", "decomp/letter_cat_llm", "--dry-run", "-q", LETTER_Q, "--model", "openai:gpt-4o-mini",
                    "--base-url", "http://127.0.0.1:9", "--cache", "replay", "--cache-dir", str(tmp_path / "c"))
    assert result.exit_code == 0, result.output
    assert last_json(result)["calls_per_row"] == 9
    assert not (tmp_path / "c").exists()


def test_dry_run_of_a_symbolic_program_makes_no_calls():
    q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'
    result = invoke("run", "decomp/letter_cat_symbolic", "--dry-run", "-q", q)
    assert result.exit_code == 0, result.output
    assert last_json(result) == {"rows": 1, "calls_per_row": 0, "max_calls_per_row": 0,
                                        "estimated_calls": 0, "estimated_prompt_tokens": 0,
                                        "estimated_completion_tokens": 0, "max_completion_tokens": 0}


def test_dry_run_over_an_input_file(tmp_path):
    data = tmp_path / "rows.jsonl"
    questions = [LETTER_Q,
                 'Take the letters at position 1 of the words in "Alan Mathison Turing" and concatenate them.',
                 'Take the last letters of the words in "x" and concatenate them using a comma.']
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": q}) + "\n" for i, q in enumerate(questions)))
    cache_dir = tmp_path / "cache"
    result = invoke("run", "decomp/letter_cat_llm", "--dry-run", "--input", str(data), "--cache-dir", str(cache_dir))
    assert result.exit_code == 0, result.output
    estimate = last_json(result)
    assert estimate["rows"] == 3
    assert estimate["estimated_calls"] == 27
    assert estimate["calls_per_row"] == 9 and estimate["max_calls_per_row"] == 9
    assert not cache_dir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]  # no output file either


def test_dry_run_needs_a_question_or_input():
    result = invoke("run", "decomp/letter_cat_llm", "--dry-run")
    assert result.exit_code != 0
    assert "--question" in result.output


def test_dry_run_estimate_summary():
    assert dry_run_estimate([9, 3, 0]) == {"rows": 3, "calls_per_row": 4.0, "max_calls_per_row": 9,
                                           "estimated_calls": 12}
    assert dry_run_estimate([1, 2]) == {"rows": 2, "calls_per_row": 1.5, "max_calls_per_row": 2,
                                        "estimated_calls": 3}
    assert dry_run_estimate([]) == {"rows": 0, "calls_per_row": 0.0, "max_calls_per_row": 0, "estimated_calls": 0}


# ------------------------------------------------------------------ ReplayModel
def ask(model, prompt, **kw):
    return asyncio.run(model.complete(Request(prompt, **kw)))


def test_replay_model_answers_qa_with_the_first_examples_answer():
    fewshot = (PROMPTS / "split.txt").read_text().strip("\n")
    model = ReplayModel()
    out = ask(model, fewshot + '\n\nQ: What are the words in "Ada Lovelace"?\nA:')
    assert out.texts == (' ["Edsger", "Wybe", "Dijkstra"]',)
    merge = (PROMPTS / "merge.txt").read_text().strip("\n")
    assert ask(model, merge + '\n\nQ: Concatenate ["a"] using a space.\nA:').text == ' "k n t"'
    assert len(model.history) == 2 and model.name == "dry-run"


def test_replay_model_decomposer_gives_next_example_line_then_eoq():
    fewshot = (PROMPTS / "letter_cat_decomp.txt").read_text().strip("\n")
    model = ReplayModel()
    prompt = fewshot + "\n\nQC: " + LETTER_Q
    seen = []
    history = ""
    answers = ['["Ada", "Lovelace"]', '["a", "e"]', '"a e"', '"x"', '"y"']
    for step in range(5):
        line = ask(model, prompt + history + "\nQS:").text
        seen.append(line)
        history += f"\nQS:{line}\nA: {answers[step]}"
    assert seen == [
        ' [split] What are the words in "Grace Brewster Hopper"?',
        ' (foreach) [str_position] What is the last letter of "#1"?',
        " [merge] Concatenate #2 using a space.",
        " [EOQ]",
        " [EOQ]",
    ]


def test_replay_model_without_examples():
    model = ReplayModel()
    assert ask(model, "Q: anything?\nA:").text == ' ""'
    assert ask(model, "QC: anything\nQS:").text == " [EOQ]"


def test_replay_model_uses_the_first_example_with_an_answer_or_program():
    model = ReplayModel()
    prompt = "Q: first?\nA: 1\n\nQ: second?\nA: 2\n\nQ: mine?\nA:"
    assert ask(model, prompt).text == " 1"
    n = ask(model, "Q: first?\nA: 1\n\nQ: mine?\nA:", n=3)
    assert n.texts == (" 1", " 1", " 1")


def test_a_recursive_decomposer_ends_in_a_dry_run_and_each_row_starts_afresh(tmp_path):
    """Replayed answers would recurse for ever; the stand-in replays the base case for the
    nested questions of a row, and forgets them before the next row."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": i, "question": f'Reverse the sequence "{q}".'}) + "\n"
                            for i, q in enumerate(["a, b, c, d, e", "f, g, h, i, j"])))
    result = invoke("run", "decomp/reverse", "--dry-run", "--input", str(data))
    assert result.exit_code == 0, result.output
    estimate = last_json(result)
    assert estimate["rows"] == 2 and estimate["max_calls_per_row"] * 2 == estimate["estimated_calls"] > 2
