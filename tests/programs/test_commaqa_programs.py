"""The CommaQA-E programs (programs/commaqa/): fine and coarse decompositions with few-shot QA over
the row's passage, the chain-of-thought baseline, and the fine decomposition answered by Python
(facts.py). Each runs end to end on the fake model; the symbolic QA scores every question of the
real data (the fixture cut of iid_test_eg100.json) when the decomposer writes the decompositions
of the prompt's examples."""
import json
import re

import pytest
from click.testing import CliRunner

from decomp import FakeModel, Session
from decomp.runtime.runs.api import run_dataset
from decomp.dsl.parser import read_fewshot
from decomp.programs.commaqa import facts
from decomp.runtime.cli import PROGRAMS_DIR, main
from decomp.runtime.storage.datasets import read_rows

COMMAQA = PROGRAMS_DIR / "commaqa"
PROGRAMS = ["commaqa/fine", "commaqa/coarse", "commaqa/cot", "commaqa/fine_symbolic"]


@pytest.fixture
def data(fixture_data):
    """The first 10 questions of CommaQA-E's iid_test_eg100.json (two passages)."""
    return fixture_data / "decomp" / "datasets" / "commaqa_e" / "iid_test_eg10.json"


@pytest.fixture
def rows(data):
    return [row for row in read_rows(data) if row.error is None]


# ---- the decompositions of the prompt's examples, for any question of the five CommaQA-E forms
_FORMS = [
    (r"What movies have people from the country (.+) acted in\?",
     ["(select) [simp_qa] Which people are from the country {0}?",
      "(project_values_flat_unique) [pos_qa] Which movies did #1 act in?"]),
    (r"What awards did the movies directed by the (.+) winners receive\?",
     ["(select) [aw_qa] Which people won the {0} award?",
      "(project_values_flat_unique) [pos_qa] Which movies did #1 direct?",
      "(project_values_flat_unique) [aw_qa] Which awards did #2 win?"]),
    (r"What awards have movies (produced|written) by people born in (\d+) won\?",
     ["(select) [simp_qa] Which people were born in {1}?",
      "(project_values_flat_unique) [pos_qa] Which movies did #1 {verb}?",
      "(project_values_flat_unique) [aw_qa] Which awards did #2 win?"]),
    (r"What movies have the directors from (.+) directed\?",
     ["(select) [simp_qa] Which people are from the country {0}?",
      "(project_values_flat_unique) [pos_qa] Which movies did #1 direct?"]),
    (r"What awards have the actors of the (.+) winning movies received\?",
     ["(select) [aw_qa] Which movies won the {0} award?",
      "(project_values_flat_unique) [pos_qa] Who acted in the movie #1?",
      "(project_values_flat_unique) [aw_qa] Which awards did #2 win?"]),
]


def decomposition(question: str, coarse: bool = False) -> list[str]:
    for pattern, lines in _FORMS:
        match = re.fullmatch(pattern, question)
        if match:
            verb = {"produced": "produce", "written": "write"}.get(match.group(1), "")
            steps = [line.format(*match.groups(), verb=verb) for line in lines] + ["[EOQ]"]
            return [re.sub(r"\[(simp|pos|aw)_qa\]", "[qa]", s) for s in steps] if coarse else steps
    raise AssertionError(f"not a CommaQA-E question form: {question}")


def test_every_program_and_prompt_checks():
    runner = CliRunner()
    for name in PROGRAMS:
        result = runner.invoke(main, ["check", name])
        assert result.exit_code == 0 and result.output.strip().endswith(": ok"), result.output
    for prompt in sorted((COMMAQA / "prompts").glob("*.txt")):
        result = runner.invoke(main, ["check", str(prompt)])
        assert result.exit_code == 0 and "warning" not in result.output, result.output


def test_the_programs_score_order_free_lists():
    session = Session()
    for name in PROGRAMS:
        assert session.load(COMMAQA / f"{name.split('/')[1]}.decomp").metric == "set_em"


# ---- our prompts are right about their own made-up facts

def test_the_decomposition_examples_follow_the_five_question_forms():
    fine, coarse = (read_fewshot(COMMAQA / "prompts" / f"decomp_{kind}.txt") for kind in ("fine", "coarse"))
    assert len(fine.examples) == len(coarse.examples) == 10
    for f, c in zip(fine.examples, coarse.examples):
        assert [s.step.text for s in f.steps] == decomposition(f.question)
        assert [s.step.text for s in c.steps] == decomposition(c.question, coarse=True)
        assert [s.answer.value for s in f.steps[:-1]] == [s.answer.value for s in c.steps[:-1]]


@pytest.mark.parametrize("prompt, handler", [("simp_qa", facts.simp_qa), ("pos_qa", facts.pos_qa),
                                             ("aw_qa", facts.aw_qa), ("qa", facts.qa)])
def test_the_qa_examples_answer_from_their_passage(prompt, handler):
    examples = read_fewshot(COMMAQA / "prompts" / f"{prompt}.txt").examples
    assert examples
    for example in examples:
        assert example.context and example.question and example.answer is not None
        assert handler(example.question, {"context": example.context}) == example.answer.value


def test_the_cot_examples_end_with_their_answer():
    examples = read_fewshot(COMMAQA / "prompts" / "cot.txt").examples
    assert len(examples) == 2
    for example in examples:
        reasoning = example.steps[0].step.text
        assert reasoning.endswith(f"So the answer is {json.dumps(example.answer.value)}.")


# ---- facts.py on the real passages

def test_every_sentence_of_the_real_passages_is_read(data):
    for entry in json.loads(data.read_text()).values():
        sentences = [s for s in re.split(r"(?<=\.)\s+", entry["passage"].strip()) if s]
        assert len(facts.read_facts(entry["passage"]).triples) == len(sentences)


def test_symbolic_qa_reads_rewordings(rows):
    context = {"context": rows[0].fields["context"]}
    assert facts.simp_qa("Who is from the country Whime?", context) == ["Midcareer", "Muntaril"]
    assert facts.simp_qa("Who were born in the year 1921?", context) == ["Carpoon", "Muntaril"]
    assert facts.pos_qa("For which movies was Carpoon the producer?", context) == ["Geissant", "Riften",
                                                                                     "Myristorrhoid"]
    assert facts.pos_qa("Who directed the movie Riften?", context) == ["Muntaril"]
    assert facts.aw_qa("Who has been awarded the Modiparity award?", context) == ["Muntaril"]
    assert facts.aw_qa("Which awards were given to Riften?", context) == ["Neuropsychotaxis"]
    assert facts.qa("Which movies were given the Monoxandrite award?", context) == ["Myristorrhoid"]
    assert facts.pos_qa("Which movies did Nobody act in?", context) == []   # the passage says nothing of him
    with pytest.raises(ValueError, match="not a question about acting"):
        facts.pos_qa("How tall is Carpoon?", context)


def test_fine_symbolic_scores_every_real_question(tmp_path, data, rows):
    """The model only writes the decompositions (scripted here); Python answers every sub-question
    from the passage: 10 of 10 by set_em, the program's metric, which `decomp eval` reads from the run."""
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"script": {r.fields["question"]: decomposition(r.fields["question"])
                                              for r in rows}}))
    runner = CliRunner()
    ran = runner.invoke(main, ["run", "commaqa/fine_symbolic", "--input", str(data), "--model", f"fake:{answers}",
                               "--run-dir", str(tmp_path / "run")])
    assert ran.exit_code == 0, ran.output
    summary = json.loads(ran.output.strip().splitlines()[-1])
    assert (summary["rows"], summary["failed"], summary["score"], summary["metric"]) == (10, 0, 1.0, "set_em")
    scored = runner.invoke(main, ["eval", "--gold", str(data), "--pred", str(tmp_path / "run")])
    assert json.loads(scored.output) == {"metric": "set_em", "score": 1.0, "n": 10, "missing": 0}


# ---- the LLM programs on the fake model

def test_fine_runs_on_the_fake_model_and_shows_each_qa_prompt_the_passage(rows):
    row = rows[0]
    question, context = row.fields["question"], row.fields["context"]
    model = FakeModel(script={question: decomposition(question)},
                      mapping={"Which people are from the country Whime?": '["Midcareer", "Muntaril"]',
                               "Which movies did Midcareer act in?": '["Myristorrhoid", "Chimpwurst"]',
                               "Which movies did Muntaril act in?": '["Geissant", "Riften"]'})
    session = Session(model=model)
    result = session.run(session.load(COMMAQA / "fine.decomp"), {"question": question, "context": context})
    assert result.error is None
    assert result.answer == ["Myristorrhoid", "Chimpwurst", "Geissant", "Riften"]
    qa_prompts = [p for p in model.prompts if p.rstrip().endswith("A:")]
    assert len(qa_prompts) == 3
    assert all(f"{context}\nQ: " in p for p in qa_prompts)       # the row's passage, just before the question
    assert "Which people are from the country Quellany?" not in qa_prompts[0]  # the QA prompt, not the decomposer's
    decomposer_prompts = [p for p in model.prompts if p.rstrip().endswith("QS:")]
    assert all(context not in p for p in decomposer_prompts)    # the decomposer sees no passage


def perfect_qa(request) -> str:
    """A QA model that reads the passage: the prompt's last passage (the line before its last
    `Q:`) answers its last question, in reverse order (set_em does not mind)."""
    lines = request.prompt.rstrip().split("\n")
    question, passage = lines[-2].removeprefix("Q: "), lines[-3]
    return " " + json.dumps(list(reversed(facts.qa(question, {"context": passage}))))


@pytest.mark.parametrize("program, coarse", [("commaqa/fine", False), ("commaqa/coarse", True)])
def test_fine_and_coarse_score_the_real_rows_with_a_perfect_fake_qa(tmp_path, data, rows, program, coarse):
    """A fake model that decomposes like the examples and answers each sub-question from the
    passage it is shown: every row scores 1 by set_em."""
    script = {r.fields["question"]: decomposition(r.fields["question"], coarse) for r in rows}
    model = FakeModel(script=script, default=perfect_qa)
    done = run_dataset(program, data, model=model, run_dir=tmp_path / "run")
    assert (done.rows, done.failed, done.score, done.summary["metric"]) == (10, 0, 1.0, "set_em")
    assert done.summary["calls_per_row"] > 4


def test_cot_takes_the_list_after_answer_is(tmp_path, rows):
    row = rows[1]
    reasoning = ('The winners of the Modiparity award are Muntaril. Muntaril directed Riften. Riften won '
                 'Neuropsychotaxis. So the answer is ["Neuropsychotaxis"].')
    model = FakeModel(mapping={row.fields["question"]: " " + reasoning})
    session = Session(model=model)
    result = session.run(session.load(COMMAQA / "cot.decomp"), row.fields)
    assert result.error is None and result.answer == ["Neuropsychotaxis"]
    (prompt,) = model.prompts
    assert prompt.endswith(f"{row.fields['context']}\nQC: {row.fields['question']}\nQS:")

    model = FakeModel(mapping={row.fields["question"]: " Muntaril directed Riften."})
    session = Session(model=model)
    failed = session.run(session.load(COMMAQA / "cot.decomp"), row.fields)
    assert failed.answer is None and "answer_regex" in failed.error
