"""The bundled DecomP programs: symbolic ones score on the real datasets, LLM ones run on the fake model."""
import json

import pytest
from click.testing import CliRunner

from decomp import FakeModel, Session
from decomp.runtime.cli import PROGRAMS_DIR, main

LETTER_CAT = PROGRAMS_DIR / "decomp" / "letter_cat.decomp"
LETTER_CAT_LLM = PROGRAMS_DIR / "decomp" / "letter_cat_llm.decomp"


def _run_and_score(tmp_path, program, data, metric="em"):
    runner = CliRunner()
    out = tmp_path / "out.jsonl"
    ran = runner.invoke(main, ["run", program, "--input", str(data), "--output", str(out)])
    assert ran.exit_code == 0, ran.output
    scored = runner.invoke(main, ["eval", "--gold", str(data), "--pred", str(out), "--metric", metric])
    assert scored.exit_code == 0, scored.output
    return json.loads(scored.output), [json.loads(line) for line in out.read_text().splitlines()]


# The real DecomP datasets, cut to their first 20 questions (tests/fixtures/README.md)
def test_symbolic_letter_cat_scores_20_of_20_real_questions(tmp_path, fixture_data):
    data = fixture_data / "decomp" / "datasets" / "letter_cat" / "n3_eg20_pos2_space.json"
    summary, rows = _run_and_score(tmp_path, "decomp/letter_cat_symbolic", data)
    assert summary == {"metric": "em", "score": 1.0, "n": 20, "missing": 0}
    assert len(rows) == 20 and not any("error" in r for r in rows)


def test_symbolic_reverse_scores_20_of_20_real_questions(tmp_path, fixture_data):
    data = fixture_data / "decomp" / "datasets" / "reverse" / "test_4_normal_words_eg20.json"
    summary, rows = _run_and_score(tmp_path, "decomp/reverse_symbolic", data)
    assert summary == {"metric": "em", "score": 1.0, "n": 20, "missing": 0}
    assert len(rows) == 20 and not any("error" in r for r in rows)


@pytest.mark.parametrize("question, answer", [
    ('Take the last letters of the words in "Augusta Ada King" and concatenate them using a space.', "a a g"),
    ('Take the letters at position 2 of the words in "Alan Mathison Turing" and concatenate them using a comma.',
     "l,a,u"),
    ('Take the letters at position 1 of the words in "Herbert Simon" and concatenate them using a semi-colon.',
     "H;S"),
])
def test_symbolic_letter_cat_reads_position_and_delimiter(question, answer):
    session = Session()
    module = session.load(PROGRAMS_DIR / "decomp" / "letter_cat_symbolic.decomp")
    assert session.run(module, {"question": question}).answer == answer


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 9, 16])
def test_symbolic_reverse_recurses_on_any_length(n):
    words = [f"w{i}" for i in range(n)]
    session = Session()
    module = session.load(PROGRAMS_DIR / "decomp" / "reverse_symbolic.decomp")
    result = session.run(module, {"question": f'Reverse the sequence "{", ".join(words)}".'})
    assert result.answer == ", ".join(reversed(words))
    assert (_reverse_depth(result.trace) > 1) == (n >= 4)


def _reverse_depth(node):
    """How many [reverse] calls are nested at the deepest point below `node`."""
    below = max((_reverse_depth(c) for c in node.children), default=0)
    return below + (node.kind == "call" and node.handler == "reverse")


def test_llm_letter_cat_runs_its_decomposition_on_the_fake_model():
    question = 'Take the letters at position 2 of the words in "Ada Byron" and concatenate them using a space.'
    model = FakeModel(
        script={question: ['[split] What are the words in "Ada Byron"?',
                           '(foreach) [str_position] What is the letter at position 2 of "#1"?',
                           "[merge] Concatenate #2 using a space.", "[EOQ]"]},
        mapping={'What are the words in "Ada Byron"?': '["Ada", "Byron"]',
                 'What is the letter at position 2 of "Ada"?': '"d"',
                 'What is the letter at position 2 of "Byron"?': '"y"',
                 'Concatenate ["d", "y"] using a space.': '"d y"'})
    session = Session(model=model)
    result = session.run(session.load(LETTER_CAT_LLM), {"question": question})
    assert result.error is None and result.answer == "d y"
    # 4 decomposer lines + 1 split + 2 letters + 1 merge
    assert len(model.history) == 8
    assert model.prompts[1].endswith('Q: What are the words in "Ada Byron"?\nA:')


def test_letter_cat_asks_the_model_only_for_its_decomposition():
    question = 'Take the letters at position 2 of the words in "Ada Byron" and concatenate them using a space.'
    model = FakeModel(script={question: ['[split] What are the words in "Ada Byron"?',
                                         '(foreach) [str_position] What is the letter at position 2 of "#1"?',
                                         "[merge] Concatenate #2 using a space.", "[EOQ]"]})
    session = Session(model=model)
    result = session.run(session.load(LETTER_CAT), {"question": question})
    assert (result.answer, result.error) == ("d y", None)
    assert len(model.history) == 4  # the decomposer's lines; symbolic handlers answer the rest
    assert model.prompts[0].count("QC:") == 5  # the 4 nearest examples and the question


def test_llm_reverse_recurses_through_its_decomposer():
    q = 'Reverse the sequence "a, b, c, d".'
    model = FakeModel(
        script={q: ['[first_half] What is the first half of "a, b, c, d"?',
                    '[second_half] What is the second half of "a, b, c, d"?',
                    "[reverse] Reverse the sequence #2.", "[reverse] Reverse the sequence #1.",
                    "[join] Join #3 and #4.", "[EOQ]"],
                'Reverse the sequence "c, d".': ['[reverse_short] Reverse the sequence "c, d".', "[EOQ]"],
                'Reverse the sequence "a, b".': ['[reverse_short] Reverse the sequence "a, b".', "[EOQ]"]},
        mapping={'What is the first half of "a, b, c, d"?': '"a, b"',
                 'What is the second half of "a, b, c, d"?': '"c, d"',
                 'Reverse the sequence "c, d".': '"d, c"',
                 'Reverse the sequence "a, b".': '"b, a"',
                 'Join "d, c" and "b, a".': '"d, c, b, a"'})
    session = Session(model=model)
    result = session.run(session.load(PROGRAMS_DIR / "decomp" / "reverse.decomp"), {"question": q})
    assert result.error is None, result.error
    assert result.answer == "d, c, b, a"


@pytest.mark.parametrize("name", ["letter_cat", "letter_cat_symbolic", "reverse", "reverse_symbolic"])
def test_every_bundled_program_checks_clean(name):
    result = CliRunner().invoke(main, ["check", f"decomp/{name}"])
    assert result.exit_code == 0, result.output
