"""Tests of the `decomposer` kind: the DecomP loop replaying the official letter_cat examples
through FakeModel, its error cases, nesting and recursion bounds."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import decomp.handlers.kinds  # noqa: F401
from decomp.dsl.errors import DecompError
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.engine.session import Session

# the official DecomP prompt file, copied unchanged into tests/fixtures/ (tests/fixtures/README.md)
LETTER_CAT = Path(__file__).resolve().parents[2] / "fixtures" / "decomp" / "prompts" / "letter_cat" / \
    "letter_cat_n3_ex3_decomp.txt"


# --- a table-lookup kind, registered as a plugin would be ------------------------------------

from tests.helpers import registry_with  # noqa: E402


def echo(query):
    return query


# --- the official file, read independently of the package's parser -------------------------

def read_blocks(text: str) -> list[dict]:
    """Each example: its question, its QS lines (marker removed), its A values, its raw lines."""
    blocks = []
    for chunk in re.split(r"\n\s*\n", text.strip("\n")):
        lines = chunk.split("\n")
        qs = [l[len("QS:"):].strip() for l in lines if l.startswith("QS:")]
        answers = [json.loads(l[len("A:"):].strip()) for l in lines if l.startswith("A:")]
        question = next(l[len("QC:"):].strip() for l in lines if l.startswith("QC:"))
        blocks.append({"question": question, "qs": qs, "answers": answers, "lines": lines})
    return blocks


def lookup_tables(blocks) -> dict[str, dict[str, Any]]:
    """The answers the sub-handlers must give, worked out from the file by hand-rolled substitution:
    select steps see `#n` as JSON text, project_values steps see each raw item."""
    tables: dict[str, dict[str, Any]] = {}
    for block in blocks:
        for number, (line, answer) in enumerate(zip(block["qs"], block["answers"]), 1):
            m = re.match(r"(?:\((\w+)\) )?\[(\w+)\] (.*)", line)
            op, handler, query = m.groups()
            table = tables.setdefault(handler, {})
            if op == "project_values":
                ref = int(re.search(r"#(\d)", query).group(1))
                items = block["answers"][ref - 1]
                assert len(items) == len(answer)
                for item, one in zip(items, answer):
                    table[query.replace(f"#{ref}", item)] = one
            else:
                for ref in re.findall(r"#(\d)", query):
                    query = query.replace(f"#{ref}", json.dumps(block["answers"][int(ref) - 1]))
                table[query] = answer
    return tables


LETTER_CAT_MODULE = '''
handler split = fn(fn="split")
handler str_position = fn(fn="str_position")
handler merge = fn(fn="merge")
handler letter_cat = decomposer(file="{path}")
main letter_cat
'''


@pytest.fixture
def letter_cat():
    text = LETTER_CAT.read_text(encoding="utf-8")
    blocks = read_blocks(text)
    assert len(blocks) == 3
    return text, blocks


@pytest.mark.parametrize("with_marker", [False, True])
def test_official_letter_cat_examples_replay(letter_cat, with_marker):
    text, blocks = letter_cat
    tables = lookup_tables(blocks)
    calls: list = []
    functions = {name: (lambda table: lambda q: table[q])(table) for name, table in tables.items()}
    script = {b["question"]: [("QS: " if with_marker else "") + l for l in b["qs"]] for b in blocks}
    assert script[blocks[0]["question"]][-1] in ("[EOQ]", "QS: [EOQ]")
    model = FakeModel(script=script)
    session = Session(registry=registry_with(functions, calls), model=model)
    module = session.load("letter_cat.decomp", text=LETTER_CAT_MODULE.format(path=LETTER_CAT))

    answers = [session.run(module, {"question": b["question"]}) for b in blocks]
    assert [r.error for r in answers] == [None, None, None]
    assert [r.answer for r in answers] == ["a a g", "A M T", "b x o"]
    assert [r.answer for r in answers] == [b["answers"][-1] for b in blocks]

    # 4 model calls per question: three steps and [EOQ]
    assert len(model.prompts) == 12
    # each sub-handler was called with exactly the queries of the file
    first = [c for c in calls if c in {("split", 'What are the words in "Augusta Ada King"?')}]
    assert first == [("split", 'What are the words in "Augusta Ada King"?')]
    assert ("str_position", 'What is the last letter in "King"?') in calls
    assert ("merge", 'Concatenate ["a", "a", "g"] using a space.') in calls
    assert len(calls) == 3 * (1 + 3 + 1)


def test_rendered_prompt_reproduces_the_official_example(letter_cat):
    text, blocks = letter_cat
    tables = lookup_tables(blocks)
    functions = {name: (lambda table: lambda q: table[q])(table) for name, table in tables.items()}
    model = FakeModel(script={b["question"]: b["qs"] for b in blocks})
    session = Session(registry=registry_with(functions), model=model)
    module = session.load("letter_cat.decomp", text=LETTER_CAT_MODULE.format(path=LETTER_CAT))
    block = blocks[0]
    result = session.run(module, {"question": block["question"]})
    assert result.error is None, result.error

    examples = text.strip("\n")
    prompts = model.prompts
    assert prompts[0] == f"{examples}\n\nQC: {block['question']}\nQS:"
    # the history the decomposer writes is the official example itself, line for line
    without_eoq = [l for l in block["lines"] if l != "QS: [EOQ]"]
    assert prompts[-1] == examples + "\n\n" + "\n".join(without_eoq) + "\nQS:"
    assert prompts[-1].endswith(
        'QC: Take the last letters of the words in "Augusta Ada King" and concatenate them using a space.\n'
        'QS: [split] What are the words in "Augusta Ada King"?\n'
        'A: ["Augusta", "Ada", "King"]\n'
        'QS: (project_values) [str_position] What is the last letter in "#1"?\n'
        'A: ["a", "a", "g"]\n'
        'QS: [merge] Concatenate #2 using a space.\n'
        'A: "a a g"\n'
        'QS:')
    # each prompt extends the one before
    for before, after in zip(prompts, prompts[1:]):
        assert after.startswith(before[: -len("QS:")])
    # and asks for one line only
    assert all(r.stop == ("\n",) for r in model.history)


def test_official_example_with_prompt_sub_handlers_and_mapping(letter_cat, tmp_path, monkeypatch):
    """The same run with the sub-handlers as few-shot prompts answered through FakeModel.mapping."""
    monkeypatch.setenv("DECOMP_ALLOW_ROOTS", str(LETTER_CAT.parent))  # the examples live outside tmp_path
    text, blocks = letter_cat
    tables = lookup_tables(blocks)
    mapping = {q: json.dumps(a) for table in tables.values() for q, a in table.items()}
    model = FakeModel(script={b["question"]: b["qs"] for b in blocks}, mapping=mapping)
    (tmp_path / "qa.txt").write_text('Q: What are the words in "a b"?\nA: ["a", "b"]\n', encoding="utf-8")
    src = f'''
handler split = prompt(file="qa.txt")
handler str_position = prompt(file="qa.txt")
handler merge = prompt(file="qa.txt")
handler letter_cat = decomposer(file="{LETTER_CAT}")
main letter_cat
'''
    session = Session(model=model)
    module = session.load(tmp_path / "main.decomp", text=src)
    results = [session.run(module, {"question": b["question"]}) for b in blocks]
    assert [(r.answer, r.error) for r in results] == [("a a g", None), ("A M T", None), ("b x o", None)]
    assert 'Q: What is the letter at position 4 in "Alexander"?\nA:' in "\n".join(model.prompts)


def test_trace_of_a_decomposer_run(letter_cat):
    text, blocks = letter_cat
    tables = lookup_tables(blocks)
    functions = {name: (lambda table: lambda q: table[q])(table) for name, table in tables.items()}
    model = FakeModel(script={b["question"]: b["qs"] for b in blocks})
    session = Session(registry=registry_with(functions), model=model)
    module = session.load("letter_cat.decomp", text=LETTER_CAT_MODULE.format(path=LETTER_CAT))
    result = session.run(module, {"question": blocks[1]["question"]})
    assert result.answer == "A M T"
    steps = [n for n in result.trace.walk() if n.kind == "step"]
    assert [s.handler for s in steps] == ["split", "str_position", "merge"]
    assert steps[1].operator == "project_values"
    assert [i.label for i in steps[1].children if i.kind == "item"] == ["Alan", "Mathison", "Turing"]
    models = [n for n in result.trace.walk() if n.kind == "model"]
    assert len(models) == 4
    assert models[-1].raw_output.strip() == "[EOQ]"


# --- error cases ------------------------------------------------------------------------------

SIMPLE = '''
handler echo = fn(fn="echo")
handler dec = decomposer(examples="""QC: an example
QS: [echo] step one
A: "step one"
QS: [EOQ]
"""{extra})
main dec
'''


def run_simple(script, question="do it", extra="", functions=None, **kwargs):
    model = FakeModel(script={question: script})
    session = Session(registry=registry_with(functions or {"echo": echo}), model=model, **kwargs)
    module = session.load("x.decomp", text=SIMPLE.format(extra=extra))
    return session.run(module, {"question": question}), model


def test_simple_decomposition_answers_the_last_step():
    result, model = run_simple(["[echo] one", "[echo] two #1", "[EOQ]"])
    assert result.error is None, result.error
    assert result.answer == 'two "one"'
    assert model.prompts[-1].endswith('QC: do it\nQS: [echo] one\nA: "one"\nQS: [echo] two #1\nA: "two \\"one\\""\nQS:')


def test_model_line_may_repeat_the_qs_marker():
    result, _ = run_simple(["QS: [echo] one", "QS: [EOQ]"])
    assert (result.answer, result.error) == ("one", None)


def test_eoq_at_once_answers_none():
    result, model = run_simple(["[EOQ]"])
    assert result.error is None
    assert result.answer is None
    assert len(model.prompts) == 1


@pytest.mark.parametrize("line", ["(select [x", "[x"])
def test_unparseable_model_line_is_a_recorded_error(line):
    result, _ = run_simple(["[echo] fine", line, "[EOQ]"])
    assert result.answer is None
    assert result.error is not None
    assert "step 2" in result.error
    assert line in result.error
    assert result.trace.error == result.error


def test_model_line_with_no_handler():
    result, _ = run_simple(["just some words"])
    assert result.answer is None
    assert "step 1" in result.error
    assert "names no handler" in result.error
    assert "just some words" in result.error


def test_model_line_with_unknown_operator():
    result, _ = run_simple(["[echo] a", "(sideways) [echo] #1"])
    assert result.answer is None
    assert "unknown operator '(sideways)'" in result.error
    assert "step 2" in result.error


def test_model_line_with_unknown_handler():
    result, _ = run_simple(["[nosuch] a"])
    assert result.answer is None
    assert "unknown handler [nosuch]" in result.error


def test_model_line_with_missing_reference():
    result, _ = run_simple(["[echo] #3", "[EOQ]"])
    assert result.answer is None
    assert "#3 refers to an answer that does not exist" in result.error


@pytest.mark.parametrize("line, found", [("(foreach) [echo] #1 and #1", 2), ("(foreach) [echo] no refs", 0)])
def test_fan_out_line_needs_exactly_one_reference(line, found):
    result, _ = run_simple(["[echo] a", line, "[EOQ]"])
    assert result.answer is None
    assert f"needs exactly one #n reference to a list, found {found}" in result.error


def test_max_steps_exceeded():
    result, model = run_simple(["[echo] 1", "[echo] 2", "[echo] 3", "[EOQ]"], extra=", max_steps=2")
    assert result.answer is None
    assert "2 steps without [EOQ]" in result.error
    assert len(model.prompts) == 2


def test_max_steps_just_enough():
    result, _ = run_simple(["[echo] 1", "[echo] 2", "[EOQ]"], extra=", max_steps=3")
    assert (result.answer, result.error) == ("2", None)


def test_model_without_a_scripted_line_is_a_clean_error():
    result, _ = run_simple(["[echo] 1"])  # the script runs out before [EOQ]
    assert result.answer is None
    assert "do it" in result.error


def test_decomposer_steps_with_fan_out():
    functions = {"echo": echo, "split": lambda q: q.split(), "upper": lambda q: q.upper()}
    src = '''
handler split = fn(fn="split")
handler upper = fn(fn="upper")
handler dec = decomposer(examples="""QC: example
QS: [split] a b
A: ["a", "b"]
QS: (foreach) [upper] #1
A: ["A", "B"]
QS: [EOQ]
""")
main dec
'''
    model = FakeModel(script={"x y z": ["[split] x y z", "(foreach) [upper] #1", "[EOQ]"]})
    session = Session(registry=registry_with(functions), model=model)
    result = session.run(session.load("x.decomp", text=src), {"question": "x y z"})
    assert (result.answer, result.error) == (["X", "Y", "Z"], None)


def test_decomposer_without_examples_is_rejected_at_load():
    session = Session(registry=registry_with({"echo": echo}), model=FakeModel())
    with pytest.raises(DecompError, match="needs file=... or examples=..."):
        session.load("x.decomp", text="handler dec = decomposer()\nmain dec\n")


def test_decomposer_with_a_missing_file_is_rejected_at_load(tmp_path):
    session = Session(registry=registry_with({"echo": echo}), model=FakeModel())
    with pytest.raises(DecompError, match="prompt file not found"):
        session.load(tmp_path / "x.decomp", text='handler dec = decomposer(file="missing.txt")\nmain dec\n')


def test_decomposer_examples_naming_unknown_handlers_are_rejected_at_load():
    session = Session(registry=registry_with({"echo": echo}), model=FakeModel())
    src = 'handler dec = decomposer(examples="""QC: q\nQS: [ghost] x\nA: 1\nQS: [EOQ]\n""")\nmain dec\n'
    with pytest.raises(DecompError, match=r"unknown handler \[ghost\]"):
        session.load("x.decomp", text=src)


# --- nesting and recursion ---------------------------------------------------------------------

NESTED = '''
handler echo = fn(fn="echo")
handler inner = decomposer(examples="""QC: inner example
QS: [echo] x
A: "x"
QS: [EOQ]
""")
handler outer = decomposer(examples="""QC: outer example
QS: [inner] sub
A: "x"
QS: [echo] #1 done
A: "\\\\"x\\\\" done"
QS: [EOQ]
""")
main outer
'''


def test_nested_decomposers():
    model = FakeModel(script={
        "outer question": ["[inner] sub question", "[echo] #1 done", "[EOQ]"],
        "sub question": ["[echo] from inner", "[EOQ]"],
    })
    session = Session(registry=registry_with({"echo": echo}), model=model)
    result = session.run(session.load("x.decomp", text=NESTED), {"question": "outer question"})
    assert result.error is None, result.error
    assert result.answer == '"from inner" done'
    # outer step 1, inner step 1, inner EOQ, outer step 2, outer EOQ
    assert len(model.prompts) == 5
    inner_prompt = model.prompts[1]
    assert inner_prompt.startswith("QC: inner example")
    assert inner_prompt.endswith("QC: sub question\nQS:")
    assert model.prompts[3].endswith('QC: outer question\nQS: [inner] sub question\nA: "from inner"\nQS:')
    inner_calls = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "inner"]
    assert len(inner_calls) == 1 and inner_calls[0].answer == "from inner"
    inner_steps = [n for n in inner_calls[0].walk() if n.kind == "step"]
    assert [s.query for s in inner_steps] == ["from inner"]


RECURSIVE = '''
handler echo = fn(fn="echo")
handler dec = decomposer(examples="""QC: level 9
QS: [dec] level 10
A: "bottom"
QS: [EOQ]
"""{bound})
main dec
'''

RECURSIVE_SCRIPT = {
    "level 0": ["[dec] level 1", "[EOQ]"],
    "level 1": ["[dec] level 2", "[EOQ]"],
    "level 2": ["[echo] bottom", "[EOQ]"],
}


def test_recursive_decomposer_within_max_depth():
    model = FakeModel(script=RECURSIVE_SCRIPT)
    session = Session(registry=registry_with({"echo": echo}), model=model)
    module = session.load("x.decomp", text=RECURSIVE.format(bound=", max_depth=3"))
    result = session.run(module, {"question": "level 0"})
    assert result.error is None, result.error
    assert result.answer == "bottom"
    decs = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "dec"]
    assert [n.query for n in decs] == ["level 1", "level 2"]


def test_recursive_decomposer_beyond_max_depth():
    model = FakeModel(script=RECURSIVE_SCRIPT)
    session = Session(registry=registry_with({"echo": echo}), model=model)
    module = session.load("x.decomp", text=RECURSIVE.format(bound=", max_depth=2"))
    result = session.run(module, {"question": "level 0"})
    assert result.answer is None
    assert "max_depth of 2" in result.error
    assert "[dec]" in result.error


def test_recursive_decomposer_hits_the_session_limit():
    model = FakeModel(script=RECURSIVE_SCRIPT)
    session = Session(registry=registry_with({"echo": echo}), model=model, max_depth=2)
    module = session.load("x.decomp", text=RECURSIVE.format(bound=", max_depth=10"))
    result = session.run(module, {"question": "level 0"})
    assert result.answer is None
    assert "limit of 2" in result.error


def test_recursive_decomposer_without_max_depth_is_rejected_at_load():
    session = Session(registry=registry_with({"echo": echo}), model=FakeModel())
    with pytest.raises(DecompError, match="max_depth"):
        session.load("x.decomp", text=RECURSIVE.format(bound=""))
