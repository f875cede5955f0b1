"""The decomposer's `nearest` option: only the N examples most like the question, closest last."""
from decomp import FakeModel, Session
from decomp.dsl.parser import parse_fewshot
from decomp.handlers.kinds.fewshot import examples_text, nearest_examples

EXAMPLES = '''QC: Take the last letters of the words in "Ada King" and concatenate them using a space.
QS: [split] What are the words in "Ada King"?
A: ["Ada", "King"]
QS: [EOQ]

QC: Take the letters at position 2 of the words in "Alan Turing" and concatenate them using a comma.
QS: [split] What are the words in "Alan Turing"?
A: ["Alan", "Turing"]
QS: [EOQ]

QC: Reverse the sequence "a, b, c".
QS: [split] What are the items of "a, b, c"?
A: ["a", "b", "c"]
QS: [EOQ]
'''


def test_the_closest_examples_come_last_and_the_rest_are_left_out():
    examples = parse_fewshot(EXAMPLES).examples
    chosen = nearest_examples(examples, 'Take the last letters of the words in "Bo Li" and concatenate them using a comma.', 2)
    assert [e.question[:26] for e in chosen] == ["Take the letters at positi", "Take the last letters of t"]
    text = examples_text(chosen)
    assert text.startswith("QC: Take the letters at position 2") and text.endswith("QS: [EOQ]\n\n")
    assert "Reverse" not in text


def test_ties_keep_the_files_order():
    examples = parse_fewshot(EXAMPLES).examples
    assert [e.question for e in nearest_examples(examples, "unrelated words", 3)] == \
        [e.question for e in examples][::-1]


def test_the_decomposer_prompt_holds_only_the_nearest(tmp_path):
    (tmp_path / "ex.txt").write_text(EXAMPLES)
    program = tmp_path / "p.decomp"
    program.write_text('handler split = regex(pattern=r\'"([^"]*)"\')\n'
                       'handler d = decomposer(file="ex.txt", nearest=1)\nmain d\n')
    model = FakeModel(default="[EOQ]")
    session = Session(model=model)
    question = 'Reverse the sequence "x, y".'
    session.run(session.load(program), {"question": question})
    prompt = model.prompts[0]
    assert prompt.startswith('QC: Reverse the sequence "a, b, c".') and prompt.count("QC:") == 2
    assert prompt.endswith(f"QC: {question}\nQS:")
