"""Demonstrations harvested from real traces: a decomposer (the row's entry), its foreach
step, nested decomposers, a fixed program's inner prompts, answer_regex and QC-style prompts."""
from __future__ import annotations

from decomp.learning.optimize.harvest import harvest, labelled
from decomp.learning.optimize.targets import find_targets
from decomp.runtime.testing.fake import FakeModel

from tests.learning.optimize.optimize_helpers import PROMPTS, patterns, traced, write_program

QUESTION = 'Take the first letters of "cat dog".'


def _demos(tmp_path, source=None, prompts=None, question=QUESTION, model=None, **kwargs):
    path = write_program(tmp_path, **({"source": source} if source else {}), prompts=prompts)
    loaded, result = traced(path, question, model)
    targets, skipped = find_targets(loaded, tmp_path)
    return harvest(result.trace, "r1", targets, main=loaded.main, question=question, **kwargs), targets, skipped


def test_a_decomposer_row_gives_its_qs_lines_and_each_prompt_one_demo(tmp_path):
    demos, targets, skipped = _demos(tmp_path)
    assert {t: targets[t].form for t in targets} == {"join": "qa", "letter": "qa", "split": "qa", "top": "decomposer"}
    assert skipped == {}
    texts = {h: [d.text for d in demos if d.handler == h] for h in targets}
    assert texts["top"] == ['QC: Take the first letters of "cat dog".\n'
                            'QS: [split] What are the words in "cat dog"?\nA: ["cat", "dog"]\n'
                            'QS: (foreach) [letter] What is the first letter of "#1"?\nA: ["c", "d"]\n'
                            'QS: [join] Join #2.\nA: "cd"\nQS: [EOQ]']
    assert texts["split"] == ['Q: What are the words in "cat dog"?\nA: ["cat", "dog"]']
    assert texts["join"] == ['Q: Join ["c", "d"].\nA: "cd"']
    # foreach: one demonstration per row, the first item's
    assert texts["letter"] == ['Q: What is the first letter of "cat"?\nA: "c"']
    assert all(d.row == "r1" and d.source == "bootstrapped" for d in demos)


def test_foreach_demos_gives_more_items_when_asked(tmp_path):
    demos, _, _ = _demos(tmp_path, foreach_demos=2)
    assert [d.text for d in demos if d.handler == "letter"] == [
        'Q: What is the first letter of "cat"?\nA: "c"', 'Q: What is the first letter of "dog"?\nA: "d"']


def test_a_call_that_failed_gives_nothing(tmp_path):
    path = write_program(tmp_path)
    loaded, result = traced(path, QUESTION)
    targets, _ = find_targets(loaded, tmp_path)
    calls = [n for n in result.trace.walk() if n.kind == "call"]
    next(n for n in calls if n.handler == "split").error = "[split] went wrong"
    next(n for n in calls if n.handler == "join").failed = True
    demos = harvest(result.trace, "r1", targets, foreach_demos=2, main=loaded.main, question=QUESTION)
    assert sorted({d.handler for d in demos}) == ["letter", "top"]


DECOMPOSER_WITH_REGEX = """
handler split  = prompt(file="prompts/split.txt")
handler letter = prompt(file="prompts/letter.txt", answer_regex="letter is (\\\\w)")
handler join   = prompt(file="prompts/join.txt")
handler top    = decomposer(file="prompts/top.txt", max_steps=5)
main top
"""


def test_answer_regex_demos_keep_the_models_own_text(tmp_path):
    prompts = {"letter.txt": 'Q: What is the first letter of "owl"?\nA: The first letter is o\n'}
    model = FakeModel(patterns=[patterns()[0], patterns()[1], patterns()[3],
                                {"match": r'first letter of "(\w)\w*"', "answer": r" The first letter is \1"}])
    demos, targets, _ = _demos(tmp_path, source=DECOMPOSER_WITH_REGEX, prompts={**PROMPTS, **prompts}, model=model)
    assert targets["letter"].raw
    assert [d.text for d in demos if d.handler == "letter"] == [
        'Q: What is the first letter of "cat"?\nA: The first letter is c']


NESTED = """
handler split  = prompt(file="prompts/split.txt")
handler letter = prompt(file="prompts/letter.txt")
handler join   = prompt(file="prompts/join.txt")
handler inner  = decomposer(file="prompts/top.txt", max_steps=5)
handler outer  = decomposer(file="prompts/outer.txt", max_steps=3)
main outer
"""


def test_a_nested_decomposer_gives_its_own_demonstration(tmp_path):
    outer = ('QC: Shout the first letters of "ant bee".\n'
             'QS: [inner] Take the first letters of "ant bee".\nA: "ab"\nQS: [EOQ]\n')
    model = FakeModel(patterns=[{"match": r'^Shout the first letters of "([^"]*)"', "steps": [
        r'[inner] Take the first letters of "\1".', "[EOQ]"]}, *patterns()])
    demos, _, _ = _demos(tmp_path, source=NESTED, prompts={**PROMPTS, "outer.txt": outer},
                         question='Shout the first letters of "cat dog".', model=model)
    texts = {d.handler: d.text for d in demos}
    assert texts["outer"] == ('QC: Shout the first letters of "cat dog".\n'
                              'QS: [inner] Take the first letters of "cat dog".\nA: "cd"\nQS: [EOQ]')
    assert texts["inner"].startswith('QC: Take the first letters of "cat dog".\nQS: [split]')
    assert set(texts) == {"outer", "inner", "split", "letter", "join"}


PROGRAM = """
handler split  = prompt(file="prompts/split.txt")
handler letter = prompt(file="prompts/letter.txt")
handler join   = prompt(file="prompts/join.txt")

program firsts(question) {
    QS: [split] What are the words in "#question"?
    QS: (foreach) [letter] What is the first letter of "#1"?
    QS: [join] Join #2.
}
main firsts
"""


def test_a_fixed_programs_inner_prompts_give_demonstrations(tmp_path):
    demos, targets, _ = _demos(tmp_path, source=PROGRAM, question="cat dog")
    assert set(targets) == {"split", "letter", "join"}  # a program itself has no examples to add to
    assert [(d.handler, d.text) for d in demos] == [
        ("split", 'Q: What are the words in "cat dog"?\nA: ["cat", "dog"]'),
        ("letter", 'Q: What is the first letter of "cat"?\nA: "c"'),
        ("join", 'Q: Join ["c", "d"].\nA: "cd"'),
    ]


QC_PROMPT = """
handler solve = prompt(file="prompts/solve.txt", answer_regex="answer is (\\\\w+)")
main solve
"""


def test_a_qc_style_prompt_gives_qc_qs_a_eoq(tmp_path):
    prompts = {"solve.txt": "QC: First letter of owl?\nQS: owl starts with o, so the answer is o\nA: \"o\"\nQS: [EOQ]\n"}
    model = FakeModel(patterns=[{"match": r"First letter of (\w)\w*\?", "answer": r" \1 it is, so the answer is \1"}])
    demos, targets, _ = _demos(tmp_path, source=QC_PROMPT, prompts=prompts, question="First letter of cat?",
                               model=model)
    assert targets["solve"].form == "qc"
    assert [d.text for d in demos] == ['QC: First letter of cat?\nQS: c it is, so the answer is c\nA: "c"\nQS: [EOQ]']


def test_labelled_demos_only_where_the_format_allows(tmp_path):
    path = write_program(tmp_path, source='handler split = prompt(file="prompts/split.txt")\nmain split\n')
    loaded, _ = traced(path, 'What are the words in "cat dog"?')
    targets, _ = find_targets(loaded, tmp_path)
    demo = labelled(targets["split"], "r9", "What are the words in \"x y\"?", ["x", "y"])
    assert demo.text == 'Q: What are the words in "x y"?\nA: ["x", "y"]' and demo.source == "labelled"
    assert labelled(targets["split"], "r9", "q", None) is None


COT = """
handler cot    = prompt(file="prompts/cot.txt")
handler answer = regex(pattern="answer is (\\\\w+)")

program solve(question) {
    QS: [cot] #question
    QS: [answer] #1
}
main solve
"""


def test_a_qc_prompt_asked_the_rows_question_shows_the_gold_answer(tmp_path):
    prompts = {"cot.txt": "QC: First letter of owl?\nQS: owl starts with o, so the answer is o\nA: \"o\"\nQS: [EOQ]\n"}
    path = write_program(tmp_path, source=COT, prompts=prompts)
    model = FakeModel(patterns=[{"match": r"First letter of (\w)\w*\?", "answer": r" It starts with \1, so the answer is \1"}])
    loaded, result = traced(path, "First letter of cat?", model)
    targets, _ = find_targets(loaded, tmp_path)
    demos = harvest(result.trace, "r1", targets, main=loaded.main, question="First letter of cat?", gold="c")
    assert [d.text for d in demos] == ['QC: First letter of cat?\nQS: It starts with c, so the answer is c\nA: "c"\nQS: [EOQ]']
