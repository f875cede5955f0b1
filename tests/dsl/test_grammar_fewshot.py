"""Few-shot files (the `fewshot` start symbol): the official DecomP prompt files and small
synthetic inputs (METADATA lines, CRLF, no trailing newline, multi-digit references)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from decomp.dsl import nodes
from decomp.dsl.parser import parse_fewshot, read_fewshot

# the official DecomP prompt files, all 20 copied unchanged into tests/fixtures/ (its README.md)
PROMPTS = Path(__file__).resolve().parents[1] / "fixtures" / "decomp" / "prompts"

PROMPT_FILES = sorted(str(p.relative_to(PROMPTS)) for p in PROMPTS.rglob("*") if p.is_file())

# Examples per file, counted by hand from the files: one per `Q:` line in Q/A files, one per
# `QC:` line in decomposition files (plus the first example of decomp_fine/coarse, whose
# question has no `QC:` marker), one block for the word list.
EXPECTED_EXAMPLES = {
    "commaqa_e/aw_qa.txt": 8,
    "commaqa_e/cot.txt": 4,
    "commaqa_e/decomp_coarse.txt": 6,
    "commaqa_e/decomp_fine.txt": 6,
    "commaqa_e/pos_qa.txt": 8,
    "commaqa_e/qa.txt": 8,
    "commaqa_e/simp_qa.txt": 8,
    "letter_cat/cot_letter_cat_n3_ex3_decomp.txt": 3,
    "letter_cat/cot_rollout_letter_cat_n3_ex3_decomp.txt": 3,
    "letter_cat/letter_cat_n3_ex3_decomp.txt": 3,
    "reverse/cot.txt": 3,
    "reverse/decomp.txt": 3,
    "reverse/join.txt": 5,
    "reverse/rm_num.txt": 3,
    "reverse/unrolled.txt": 3,
    "reverse/wordlist.txt": 1,
    "task_primitives/arr_position.txt": 6,
    "task_primitives/merge.txt": 5,
    "task_primitives/split.txt": 4,
    "task_primitives/str_position.txt": 3,
}


def _read(rel: str) -> nodes.FewShot:
    return read_fewshot(PROMPTS / rel)


def _source_lines(rel: str) -> list[str]:
    return (PROMPTS / rel).read_text(encoding="utf-8").split("\n")


def _cut(lines: list[str], span: nodes.Span) -> str:
    """The source text a one-line span covers."""
    assert span.line == span.end_line, span
    return lines[span.line - 1][span.column - 1: span.end_column - 1]


def _all_steps(fs: nodes.FewShot) -> list[nodes.ExampleStep]:
    return [s for e in fs.examples for s in e.steps]


# ------------------------------------------------------------------ every official file
def test_prompt_folder_holds_the_known_files():
    assert set(EXPECTED_EXAMPLES) == set(PROMPT_FILES)


@pytest.mark.parametrize("rel", PROMPT_FILES)
def test_every_prompt_file_parses(rel):
    fs = _read(rel)
    assert isinstance(fs, nodes.FewShot)
    assert fs.path == str(PROMPTS / rel)
    assert fs.examples, f"{rel}: no examples"
    if rel in EXPECTED_EXAMPLES:
        assert len(fs.examples) == EXPECTED_EXAMPLES[rel]


@pytest.mark.parametrize("rel", PROMPT_FILES)
def test_every_step_and_answer_is_accounted_for_with_exact_spans(rel):
    """Counts of QS:/A: lines agree with the parse; spans cut exactly the written text."""
    fs = _read(rel)
    text = (PROMPTS / rel).read_text(encoding="utf-8")
    lines = text.split("\n")
    qs_lines = len(re.findall(r"^QS:", text, re.M))
    a_lines = len(re.findall(r"^A:", text, re.M))
    steps = _all_steps(fs)
    assert len(steps) == qs_lines
    step_answers = [s.answer for s in steps if s.answer is not None]
    own_answers = [e.answer for e in fs.examples if not e.steps and e.answer is not None]
    assert len(step_answers) + len(own_answers) == a_lines
    assert fs.is_decomposition == (qs_lines > 0)
    for item in steps:
        step = item.step
        assert lines[step.span.line - 1].startswith("QS:")
        if step.handler is not None:
            assert _cut(lines, step.handler_span) == f"[{step.handler}]"
        if step.operator is not None:
            assert _cut(lines, step.operator_span) == f"({step.operator})"
        for ref in step.refs:
            assert _cut(lines, ref.span) == ref.text
        if step.query:
            assert _cut(lines, step.query_span).rstrip() == step.query
    for answer in step_answers + own_answers:
        assert lines[answer.span.line - 1].startswith("A:")
        assert _cut(lines, answer.span).strip() == answer.text
        if answer.is_json:
            assert answer.value == json.loads(answer.text)
        else:
            assert answer.value == answer.text.strip()
            with pytest.raises(ValueError):
                json.loads(answer.text)


@pytest.mark.parametrize("rel", PROMPT_FILES)
def test_every_question_is_a_written_line(rel):
    fs = _read(rel)
    lines = _source_lines(rel)
    for example in fs.examples:
        if example.question_kind == "QC":
            assert f"QC: {example.question}" in lines
        elif example.question_kind == "Q":
            assert f"Q: {example.question}" in lines
        elif example.question_kind == "implicit":
            assert example.question in lines
        else:
            assert example.question is None


# ------------------------------------------------------------------ letter_cat
def test_letter_cat_examples_steps_operators_and_handlers():
    fs = _read("letter_cat/letter_cat_n3_ex3_decomp.txt")
    assert len(fs.examples) == 3
    assert fs.is_decomposition
    questions = [e.question for e in fs.examples]
    assert questions == [
        'Take the last letters of the words in "Augusta Ada King" and concatenate them using a space.',
        'Take the letters at position 1 of the words in "Alan Mathison Turing" and concatenate them '
        'using a space.',
        'Take the letters at position 4 of the words in "Herbert Alexander Simon" and concatenate them '
        'using a space.',
    ]
    for example in fs.examples:
        assert example.question_kind == "QC"
        assert example.context == ""
        assert len(example.steps) == 4
        assert [s.step.operator for s in example.steps] == [None, "project_values", None, None]
        assert [s.step.handler for s in example.steps] == ["split", "str_position", "merge", "EOQ"]
        assert [s.step.is_end for s in example.steps] == [False, False, False, True]
        assert example.steps[-1].answer is None
        assert example.steps[-1].step.query == ""


def test_letter_cat_answers_are_json():
    fs = _read("letter_cat/letter_cat_n3_ex3_decomp.txt")
    values = [[s.answer.value if s.answer else None for s in e.steps] for e in fs.examples]
    assert values == [
        [["Augusta", "Ada", "King"], ["a", "a", "g"], "a a g", None],
        [["Alan", "Mathison", "Turing"], ["A", "M", "T"], "A M T", None],
        [["Herbert", "Alexander", "Simon"], ["b", "x", "o"], "b x o", None],
    ]
    assert all(s.answer.is_json for e in fs.examples for s in e.steps[:3])
    assert [e.answer.value for e in fs.examples] == ["a a g", "A M T", "b x o"]
    first = fs.examples[0].steps[0].answer
    assert first.text == '["Augusta", "Ada", "King"]'
    assert (first.span.line, first.span.column, first.span.end_column) == (3, 4, 30)


def test_letter_cat_refs_have_exact_positions():
    fs = _read("letter_cat/letter_cat_n3_ex3_decomp.txt")
    path = str(PROMPTS / "letter_cat/letter_cat_n3_ex3_decomp.txt")
    first = fs.examples[0]
    s2 = first.steps[1].step
    assert s2.query == 'What is the last letter in "#1"?'
    assert s2.refs == (nodes.Ref(nodes.Span(path, 4, 65, 4, 67), index=1),)
    assert s2.operator_span == nodes.Span(path, 4, 5, 4, 21)
    assert s2.handler_span == nodes.Span(path, 4, 22, 4, 36)
    assert s2.query_span == nodes.Span(path, 4, 37, 4, 69)
    assert s2.span.line == 4 and s2.span.column == 1
    s3 = first.steps[2].step
    assert s3.refs == (nodes.Ref(nodes.Span(path, 6, 25, 6, 27), index=2),)
    assert s3.index_refs == s3.refs
    # the same references in the later examples, further down the file
    assert fs.examples[1].steps[1].step.refs[0].span == nodes.Span(path, 13, 74, 13, 76)
    assert fs.examples[2].steps[1].step.refs[0].span == nodes.Span(path, 22, 74, 22, 76)
    assert fs.examples[2].steps[2].step.refs[0].span == nodes.Span(path, 24, 25, 24, 27)
    assert fs.examples[1].span.line == 10
    assert fs.examples[2].span.line == 19


def test_letter_cat_cot_steps_have_no_handler():
    fs = _read("letter_cat/cot_letter_cat_n3_ex3_decomp.txt")
    first = fs.examples[0].steps[0].step
    assert first.handler is None and first.operator is None
    assert first.query.startswith('The last letter of "Augusta" is "a".')
    assert fs.examples[0].steps[0].answer.value == "a a g"
    assert fs.examples[0].steps[1].step.is_end


# ------------------------------------------------------------------ commaqa_e
def test_commaqa_decomp_fine_first_question_is_implicit():
    fs = _read("commaqa_e/decomp_fine.txt")
    first = fs.examples[0]
    assert first.question_kind == "implicit"
    assert first.question == "What awards have movies produced by people born in 1910 won?"
    assert first.context == ""  # the question line is not also context
    assert [s.step.handler for s in first.steps] == ["simp_qa", "pos_qa", "aw_qa", "EOQ"]
    assert [s.step.operator for s in first.steps] == [
        "select", "project_values_flat_unique", "project_values_flat_unique", None]
    assert first.steps[0].answer.value == ["Teeplemole", "Muntaril"]
    assert first.answer.value == ["Zorgion", "Chowwurst", "Hallowcock"]
    assert [e.question_kind for e in fs.examples[1:]] == ["QC"] * 5
    assert fs.examples[1].question == "What movies have people from the country Stridery acted in?"


def test_commaqa_qa_context_paragraph_and_pairs():
    fs = _read("commaqa_e/qa.txt")
    assert not fs.is_decomposition
    first = fs.examples[0]
    assert first.question_kind == "Q"
    assert first.question == "Which awards were given to Zalate?"
    assert first.context.startswith("movie: Premercy ; directed by: Muntaril. movie: Skirtsicine ;")
    assert first.context.endswith("Teeplemole was one of the writers for the movie Skirtsicine.")
    assert "\n" not in first.context
    assert first.steps == ()
    assert first.answer.value == ["Hallowcock"] and first.answer.is_json
    assert fs.examples[2].context.startswith("movie: Nilitude ; director: Monsterscar.")
    assert fs.examples[2].question == "Which movies has Gastrat been an actor in?"


def test_commaqa_qa_malformed_answer_stays_a_string():
    fs = _read("commaqa_e/qa.txt")
    second = fs.examples[1]
    assert second.question == "For which movies was Muntaril the producer?"
    assert second.answer.text == '["Premercy]'
    assert second.answer.value == '["Premercy]'
    assert second.answer.is_json is False
    assert (second.answer.span.line, second.answer.span.column) == (6, 4)


def test_commaqa_cot_context_then_qc():
    fs = _read("commaqa_e/cot.txt")
    first = fs.examples[0]
    assert first.question_kind == "QC"
    assert first.question == "What awards have movies produced by people born in 1910 won?"
    assert first.context.startswith("movie: Premercy ; directed by: Muntaril.")
    assert first.steps[0].step.handler is None
    assert first.answer.value == ["Zorgion", "Chowwurst", "Hallowcock"]


# ------------------------------------------------------------------ reverse, task primitives
def test_reverse_decomp_join_refs():
    fs = _read("reverse/decomp.txt")
    path = str(PROMPTS / "reverse/decomp.txt")
    assert [len(e.steps) for e in fs.examples] == [8, 3, 8]
    join = fs.examples[0].steps[6].step
    assert join.handler == "join"
    assert join.query == "#6 #5"
    assert [r.index for r in join.refs] == [6, 5]
    assert [r.span for r in join.refs] == [nodes.Span(path, 14, 12, 14, 14), nodes.Span(path, 14, 15, 14, 17)]
    assert fs.examples[0].steps[6].answer.value == "shoe, identity card, packet, button, driving license"
    # a trailing space after the query is not part of it
    assert fs.examples[0].steps[4].step.query == "Reverse the sequence #3."
    assert [s.step.handler for s in fs.examples[1].steps] == ["extract", "cot", "EOQ"]
    assert fs.examples[2].steps[6].step.refs[0].span == nodes.Span(path, 38, 12, 38, 14)


def test_reverse_wordlist_is_one_plain_block():
    fs = _read("reverse/wordlist.txt")
    (only,) = fs.examples
    assert only.steps == () and only.answer is None
    assert only.context.split("\n")[:3] == ["diary", "bottle", "water"]
    assert only.context.split("\n")[-1] == "alarm clock"


def test_join_answer_after_two_spaces():
    fs = _read("reverse/join.txt")
    assert fs.examples[2].answer.value == "passport, umbrella, radio, mobile phone, photo, player"
    assert fs.examples[0].question == '"bottle, laptop" "glasses, newspaper".'


def test_str_position_string_answers_that_look_like_lists():
    fs = _read("task_primitives/str_position.txt")
    answer = fs.examples[0].steps[0].answer
    assert answer.is_json
    assert answer.value == "[(A, 1), (u, 2), (g, 3), (u, 4), (s, 5), (t, 6), (a, 7)]"
    assert [s.step.operator for s in fs.examples[0].steps] == ["select", "select", None]


# ------------------------------------------------------------------ synthetic inputs
def test_multi_digit_ref():
    fs = parse_fewshot('QC: q?\nQS: [a] x\nA: 1\nQS: [b] take #12 and #3, not # 4\nA: 2\n', "t.txt")
    step = fs.examples[0].steps[1].step
    assert [(r.index, r.name) for r in step.refs] == [(12, None), (3, None)]
    assert step.refs[0].span == nodes.Span("t.txt", 4, 14, 4, 17)
    assert step.refs[1].span == nodes.Span("t.txt", 4, 22, 4, 24)


def test_named_ref():
    fs = parse_fewshot("QC: q\nQS: [a] the #question_2 now\n", "t.txt")
    (ref,) = fs.examples[0].steps[0].step.refs
    assert (ref.index, ref.name, ref.text) == (None, "question_2", "#question_2")
    assert ref.span == nodes.Span("t.txt", 2, 13, 2, 24)


def test_metadata_lines():
    text = '# METADATA: {"k": 1}\nQC: q?\nQS: [a] x\nA: [1, 2]\nQS: [EOQ]\n\n#METADATA: {"k": [2]}\nQ: a?\nA: "b"\n'
    fs = parse_fewshot(text, "t.txt")
    first, second = fs.examples
    assert first.metadata == ({"k": 1},)
    assert first.question == "q?" and first.question_kind == "QC"
    assert first.context == ""
    assert first.steps[0].answer.value == [1, 2]
    assert second.metadata == ({"k": [2]},)
    assert second.context == "" and second.question == "a?"


def test_metadata_that_is_not_json_is_kept_as_text():
    fs = parse_fewshot("# METADATA: not json\nQ: a\nA: 1\n", "t.txt")
    assert fs.examples[0].metadata == ({"text": "not json"},)


def test_crlf_input_values():
    text = 'QC: q?\r\nQS: (foreach) [a] #1 and #12\r\nA: ["x"]\r\nQS: [EOQ]\r\n\r\nQ: second?\r\nA: "two"\r\n'
    fs = parse_fewshot(text, "t.txt")
    assert len(fs.examples) == 2
    first, second = fs.examples
    assert first.question == "q?"
    step = first.steps[0]
    assert (step.step.operator, step.step.handler, step.step.query) == ("foreach", "a", "#1 and #12")
    assert [r.index for r in step.step.refs] == [1, 12]
    assert step.answer.text == '["x"]' and step.answer.value == ["x"]
    assert first.steps[1].step.is_end
    assert (second.question, second.question_kind, second.answer.value) == ("second?", "Q", "two")
    assert all("\r" not in line for e in fs.examples for line in (e.question or "", e.context))


def test_crlf_input_has_the_same_spans_as_lf():
    lf = 'QC: q?\nQS: (foreach) [a] #1 and #12\nA: ["x"]\nQS: [EOQ]\n\nQ: second?\nA: "two"\n'
    a = parse_fewshot(lf, "t.txt")
    b = parse_fewshot(lf.replace("\n", "\r\n"), "t.txt")
    for ea, eb in zip(a.examples, b.examples, strict=True):
        assert ea.steps == eb.steps  # spans included: the \r is not part of any node
        assert ea.answer == eb.answer


def test_file_without_trailing_newline(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text('QC: q?\nQS: [a] x\nA: "y"\nQS: [EOQ]', encoding="utf-8")
    fs = read_fewshot(path)
    (example,) = fs.examples
    assert [s.step.handler for s in example.steps] == ["a", "EOQ"]
    assert example.answer.value == "y"
    qa = parse_fewshot('Q: a?\nA: "b"', "t.txt")
    assert qa.examples[0].answer.value == "b"
    assert qa.examples[0].answer.span == nodes.Span("t.txt", 2, 4, 2, 7)


def test_blank_lines_separate_examples_and_extra_blanks_are_ignored():
    fs = parse_fewshot("\n\n\nQ: a\nA: 1\n\n \n\t\nQ: b\nA: 2\n\n", "t.txt")
    assert [(e.question, e.answer.value) for e in fs.examples] == [("a", 1), ("b", 2)]
    assert fs.examples[0].span.line == 4
    assert fs.examples[1].span.line == 9


def test_two_pairs_in_one_block_share_the_context():
    fs = parse_fewshot("Some context.\nQ: a\nA: 1\nQ: b\nA: 2\n", "t.txt")
    assert [(e.question, e.context, e.answer.value) for e in fs.examples] == [
        ("a", "Some context.", 1), ("b", "Some context.", 2)]


def test_empty_text_has_no_examples():
    assert parse_fewshot("", "t.txt").examples == ()
    assert parse_fewshot("\n\n", "t.txt").examples == ()


def test_answer_without_text():
    fs = parse_fewshot("Q: a\nA:\n", "t.txt")
    answer = fs.examples[0].answer
    assert (answer.text, answer.value, answer.is_json) == ("", "", False)
