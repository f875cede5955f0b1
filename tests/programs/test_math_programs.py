"""The math word-problem programs (programs/math/): a chain of thought, then the answer taken by a
model (cot.decomp) or by a regular expression (cot_regex.decomp); and their 20 problems."""
import json
import re

import pytest
from click.testing import CliRunner

from decomp import FakeModel, Session
from decomp.runtime.runs.api import run_dataset
from decomp.dsl.parser import read_fewshot
from decomp.runtime.cli import PROGRAMS_DIR, main
from decomp.runtime.storage.datasets import read_rows

MATH = PROGRAMS_DIR / "math"
PROBLEMS = MATH / "problems.jsonl"


def test_programs_and_prompts_check():
    runner = CliRunner()
    for target in ["math/cot", "math/cot_regex", str(MATH / "prompts" / "cot.txt")]:
        result = runner.invoke(main, ["check", target])
        assert result.exit_code == 0 and result.output.strip().endswith(": ok"), result.output


def test_the_problems_are_twenty_rows_with_numeric_answers():
    rows = list(read_rows(PROBLEMS))
    assert len(rows) == 20 and all(row.error is None for row in rows)
    assert len({row.id for row in rows}) == 20
    assert all(isinstance(row.gold, int) and set(row.fields) == {"question"} for row in rows)
    examples = {e.question for e in read_fewshot(MATH / "prompts" / "cot.txt").examples}
    assert not examples & {row.fields["question"] for row in rows}   # no problem is a prompt example


def test_the_cot_examples_state_their_answer():
    for example in read_fewshot(MATH / "prompts" / "cot.txt").examples:
        reasoning = example.steps[0].step.text
        assert reasoning.endswith(f"So the answer is {example.answer.value}.")
        assert re.findall(r"= (\d+)", reasoning)[-1] == str(example.answer.value)  # the last result


# a fake chain of thought for each problem: right, and ending the way the prompt's examples do
def _reasoning(answer) -> str:
    return f" Working it out gives {answer}. So the answer is {answer}."


def _fake(rows, extract=True) -> FakeModel:
    mapping = {row.fields["question"]: _reasoning(row.gold) for row in rows}
    if extract:  # the extractor's prompt ends with the reasoning as it is
        mapping.update({f"Reasoning: {_reasoning(row.gold).strip()}\nNumber:": f" {row.gold}" for row in rows})
    return FakeModel(mapping=mapping)


@pytest.mark.parametrize("program, extract", [("math/cot", True), ("math/cot_regex", False)])
def test_both_extractors_score_every_problem_on_a_right_fake_model(tmp_path, program, extract):
    rows = list(read_rows(PROBLEMS))
    model = _fake(rows, extract)
    done = run_dataset(program, PROBLEMS, model=model, run_dir=tmp_path / "run")
    assert (done.rows, done.failed, done.score, done.summary["metric"]) == (20, 0, 1.0, "em")
    assert done.summary["calls"] == (40 if extract else 20)     # the regex needs no model


def test_model_extraction_sees_the_reasoning_as_it_is():
    """The extractor works when the line states no "answer is" (where the regex fails)."""
    question = "A box holds 3 eggs. How many eggs are in 2 boxes?"
    model = FakeModel(mapping={question: " 2 * 3 = 6 eggs in all.", "Reasoning: 2 * 3 = 6 eggs in all.\nNumber:": " 6"})
    session = Session(model=model)
    result = session.run(session.load(MATH / "cot.decomp"), {"question": question})
    assert result.error is None and result.answer == 6
    cot, extract = model.prompts
    assert cot.endswith(f"QC: {question}\nQS:")
    assert extract.endswith("Number: 5\n\nReasoning: 2 * 3 = 6 eggs in all.\nNumber:")


@pytest.mark.parametrize("reasoning, answer", [
    ("6 - 2 = 4. So the answer is 4.", "4"),
    ("So the answer is 12", "12"),
    ("Each costs 2.5, so the answer is 7.5.", "7.5"),
    ("So the answer is 5 apples.", "5 apples"),      # the regex takes what follows, words and all
])
def test_regex_extraction_takes_what_follows_answer_is(reasoning, answer):
    session = Session(model=FakeModel(mapping={"Q?": " " + reasoning}))
    result = session.run(session.load(MATH / "cot_regex.decomp"), {"question": "Q?"})
    assert result.error is None and result.answer == answer


def test_regex_extraction_fails_the_row_when_the_reasoning_states_no_answer():
    session = Session(model=FakeModel(mapping={"Q?": " 6 - 2 = 4 apples are left."}))
    result = session.run(session.load(MATH / "cot_regex.decomp"), {"question": "Q?"})
    assert result.answer is None and "[answer]" in result.error


def test_cot_and_cot_regex_share_the_cached_chain_of_thought(tmp_path):
    """The same prompt with the same options: a regex run after a model-extraction run finds every
    chain of thought in the step cache and calls no model."""
    rows = list(read_rows(PROBLEMS))[:3]
    data = tmp_path / "three.jsonl"
    data.write_text("".join(json.dumps({"id": r.id, "question": r.fields["question"], "answer": r.gold}) + "\n"
                            for r in rows))
    answers = tmp_path / "answers.json"
    fake = _fake(rows)
    answers.write_text(json.dumps({"mapping": fake.mapping}))
    first = run_dataset("math/cot", data, model=f"fake:{answers}", run_dir=tmp_path / "a")
    second = run_dataset("math/cot_regex", data, model=f"fake:{answers}", run_dir=tmp_path / "b")
    assert first.score == second.score == 1.0
    assert (second.summary["calls"], second.summary["cache_hits"]) == (0, 3)
