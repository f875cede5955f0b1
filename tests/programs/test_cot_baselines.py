"""The chain-of-thought baselines of letter concatenation and list reversal (programs/decomp/
*_cot.decomp, *_cot_rollout.decomp): our prompts' examples are right (the symbolic programs agree
with every one), the answer is what follows "answer is" in the model's line, and on the real
data a model that reasons right scores every question."""
import json

import pytest
from click.testing import CliRunner

from decomp import FakeModel, Session
from decomp.runtime.runs.api import run_dataset
from decomp.dsl.parser import read_fewshot
from decomp.runtime.cli import PROGRAMS_DIR, main
from decomp.runtime.storage.datasets import read_rows

DECOMP = PROGRAMS_DIR / "decomp"
BASELINES = {  # program -> (prompt file, the symbolic program that answers its questions)
    "letter_cat_cot": ("letter_cat_cot.txt", "letter_cat_symbolic"),
    "letter_cat_cot_rollout": ("letter_cat_cot_rollout.txt", "letter_cat_symbolic"),
    "reverse_cot": ("reverse_cot.txt", "reverse_symbolic"),
    "reverse_cot_rollout": ("reverse_cot_rollout.txt", "reverse_symbolic"),
}


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_program_and_prompt_check(name):
    runner = CliRunner()
    for target in (f"decomp/{name}", str(DECOMP / "prompts" / BASELINES[name][0])):
        result = runner.invoke(main, ["check", target])
        assert result.exit_code == 0 and result.output.strip().endswith(": ok"), result.output


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_example_is_right_and_ends_with_its_answer(name):
    prompt, symbolic = BASELINES[name]
    session = Session()
    solver = session.load(DECOMP / f"{symbolic}.decomp")
    examples = read_fewshot(DECOMP / "prompts" / prompt).examples
    assert len(examples) == 4
    for example in examples:
        (reasoning, end) = [s.step.text for s in example.steps]
        assert end == "[EOQ]"
        assert reasoning.endswith(f"So the answer is {json.dumps(example.answer.value)}.")
        assert session.run(solver, {"question": example.question}).answer == example.answer.value


def test_the_rollouts_spell_out_more_than_the_plain_chains():
    for task in ("letter_cat", "reverse"):
        plain, rollout = (read_fewshot(DECOMP / "prompts" / f"{task}_cot{kind}.txt").examples
                          for kind in ("", "_rollout"))
        assert [e.question for e in plain] == [e.question for e in rollout]
        assert all(len(r.steps[0].step.text) > len(p.steps[0].step.text) for p, r in zip(plain, rollout))


@pytest.mark.parametrize("name, question, line, answer", [
    ("letter_cat_cot", 'Take the letters at position 2 of the words in "Ada Byron" and concatenate them using a space.',
     'The letter at position 2 of "Ada" is "d". The letter at position 2 of "Byron" is "y". So the answer is "d y".',
     "d y"),
    ("reverse_cot", 'Reverse the sequence "cup, hat, key".',
     'From the last to the first: 3. key. 2. hat. 1. cup. So the answer is "key, hat, cup".', "key, hat, cup"),
])
def test_the_answer_is_the_quoted_text_after_answer_is(name, question, line, answer):
    model = FakeModel(mapping={question: " " + line})
    session = Session(model=model)
    result = session.run(session.load(DECOMP / f"{name}.decomp"), {"question": question})
    assert result.error is None and result.answer == answer
    (prompt,) = model.prompts
    assert prompt.endswith(f"QS: [EOQ]\n\nQC: {question}\nQS:")


def test_a_line_without_an_answer_is_the_row_error():
    question = 'Reverse the sequence "cup, hat, key".'
    session = Session(model=FakeModel(mapping={question: " First is cup. Second is hat."}))
    result = session.run(session.load(DECOMP / "reverse_cot_rollout.decomp"), {"question": question})
    assert result.answer is None and "[cot]" in result.error and "answer_regex" in result.error


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_right_chain_of_thought_scores_the_real_questions(tmp_path, fixture_data, name):
    """The first 20 questions of the DecomP datasets; the fake model's line for each ends with the
    symbolic program's answer, so em is 1 on every row: the answer is read and scored as gold is."""
    task = "letter_cat" if name.startswith("letter_cat") else "reverse"
    data = fixture_data / "decomp" / "datasets" / task / (
        "n3_eg20_pos2_space.json" if task == "letter_cat" else "test_4_normal_words_eg20.json")
    session = Session()
    solver = session.load(DECOMP / f"{BASELINES[name][1]}.decomp")
    rows = [row for row in read_rows(data) if row.error is None]
    mapping = {row.fields["question"]: " So the answer is " + json.dumps(session.run(solver, row.fields).answer) + "."
               for row in rows}
    done = run_dataset(f"decomp/{name}", data, model=FakeModel(mapping=mapping), run_dir=tmp_path / "run")
    assert (done.rows, done.failed, done.score, done.summary["metric"]) == (20, 0, 1.0, "em")
