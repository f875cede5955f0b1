"""Tests of the `prompt` kind: few-shot rendering, context, answer parsing and extraction,
samples, Jinja templates (strict and sandboxed)."""
from __future__ import annotations

import pytest

import decomp.handlers.kinds  # noqa: F401
from decomp.dsl.errors import DecompError
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.engine.session import Session

QA_FILE = 'Q: What are the words in "a b"?\nA: ["a", "b"]\n\nQ: What are the words in "c"?\nA: ["c"]\n'
QC_FILE = ('QC: Reverse "a b".\nQS: [split] What are the words in "a b"?\nA: ["a", "b"]\n'
           'QS: [EOQ]\n')


def run_one(tmp_path, handler_decl: str, fields: dict, model: FakeModel, files: dict | None = None,
            query: str = "#question"):
    """Run a one-step program whose step is `[h] <query>` with handler `h` declared as given."""
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    params = ", ".join(fields)
    src = f"{handler_decl}\nprogram p({params}) {{\n    QS: [h] {query}\n}}\nmain p\n"
    session = Session(model=model)
    module = session.load(tmp_path / "main.decomp", text=src)
    return session.run(module, fields)


# --- few-shot rendering ----------------------------------------------------------------------

def test_fewshot_qa_file_rendering(tmp_path):
    model = FakeModel(answers=['["x", "y"]'])
    result = run_one(tmp_path, 'handler h = prompt(file="qa.txt")', {"question": 'What are the words in "x y"?'},
                     model, {"qa.txt": QA_FILE})
    assert result.error is None, result.error
    assert result.answer == ["x", "y"]
    assert model.prompts == [QA_FILE.strip("\n") + '\n\nQ: What are the words in "x y"?\nA:']


def test_fewshot_file_with_surrounding_blank_lines(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(file="qa.txt")', {"question": "q"}, model,
            {"qa.txt": "\n\n" + QA_FILE + "\n\n\n"})
    assert model.prompts[0] == QA_FILE.strip("\n") + "\n\nQ: q\nA:"


def test_inline_text_rendering(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(text="Q: 1+1?\\nA: 2\\n")', {"question": "2+2?"}, model)
    assert model.prompts[0] == "Q: 1+1?\nA: 2\n\nQ: 2+2?\nA:"


def test_empty_text_is_zero_shot(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(text="")', {"question": "2+2?"}, model)
    assert model.prompts[0] == "Q: 2+2?\nA:"


def test_qc_style_file_renders_qc_and_qs(tmp_path):
    model = FakeModel(answers=[" [split] What are the words in \"x\"?"])
    result = run_one(tmp_path, 'handler h = prompt(file="qc.txt")\nhandler split = prompt(text="")',
                     {"question": 'Reverse "x".'}, model, {"qc.txt": QC_FILE})
    assert result.error is None, result.error
    assert model.prompts == [QC_FILE.strip("\n") + '\n\nQC: Reverse "x".\nQS:']
    assert result.answer == '[split] What are the words in "x"?'


def test_the_query_is_the_substituted_step(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(text="")', {"question": "the q", "n": [1, 2]}, model,
            query="Is #question about #n?")
    assert model.prompts[0] == "Q: Is the q about [1, 2]?\nA:"


def test_context_option_prepends_the_row_context(tmp_path):
    model = FakeModel(answers=['"Paris"'])
    fields = {"question": "What is the capital?", "context": "France is a country. Its capital is Paris."}
    result = run_one(tmp_path, 'handler h = prompt(file="qa.txt", context="context")', fields, model,
                     {"qa.txt": QA_FILE})
    assert result.error is None, result.error
    assert result.answer == "Paris"
    assert model.prompts[0] == (QA_FILE.strip("\n") + "\n\nFrance is a country. Its capital is Paris.\n"
                                "Q: What is the capital?\nA:")


def test_context_option_with_another_field_name(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(text="", context="para")', {"question": "q", "para": "P."}, model)
    assert model.prompts[0] == "P.\nQ: q\nA:"


# --- answers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ('["a", "b"]', ["a", "b"]),
    (' "quoted"', "quoted"),
    ("42", 42),
    ("3.5", 3.5),
    ("true", True),
    ("null", None),
    ('{"k": [1]}', {"k": [1]}),
    (" plain words ", "plain words"),
    ("['single', 'quotes']", "['single', 'quotes']"),
    ("first line\nsecond line", "first line"),  # the default stop is a newline
])
def test_answer_is_json_or_string(tmp_path, raw, expected):
    model = FakeModel(answers=[raw])
    result = run_one(tmp_path, 'handler h = prompt(text="")', {"question": "q"}, model)
    assert result.error is None, result.error
    assert result.answer == expected
    assert type(result.answer) is type(expected)


def test_stop_option(tmp_path):
    model = FakeModel(answers=["yes. And more"])
    result = run_one(tmp_path, 'handler h = prompt(text="", stop=["."])', {"question": "q"}, model)
    assert result.answer == "yes"
    assert model.history[0].stop == (".",)


def test_request_carries_the_options(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(text="", max_tokens=17, temperature=0.5)', {"question": "q"}, model)
    request = model.history[0]
    assert (request.max_tokens, request.temperature, request.n) == (17, 0.5, 1)


def test_answer_regex_with_a_group(tmp_path):
    model = FakeModel(answers=["Let me think. So the answer is 42."])
    result = run_one(tmp_path, r'handler h = prompt(text="", answer_regex=r"answer is (\d+)")',
                     {"question": "q"}, model)
    assert result.error is None, result.error
    assert result.answer == 42


def test_answer_regex_without_a_group_takes_the_match(tmp_path):
    model = FakeModel(answers=['blah ["x", "y"] blah'])
    result = run_one(tmp_path, r'handler h = prompt(text="", answer_regex=r"\[.*\]")', {"question": "q"}, model)
    assert result.answer == ["x", "y"]


def test_answer_regex_no_match_is_a_clean_error(tmp_path):
    model = FakeModel(answers=["I do not know"])
    result = run_one(tmp_path, r'handler h = prompt(text="", answer_regex=r"answer is (\d+)")',
                     {"question": "q"}, model)
    assert result.answer is None
    assert "answer_regex" in result.error and "found nothing" in result.error
    assert "I do not know" in result.error


def test_answer_regex_that_does_not_compile_is_a_load_error(tmp_path):
    session = Session(model=FakeModel())
    with pytest.raises(DecompError, match="answer_regex does not compile"):
        session.load(tmp_path / "x.decomp", text='handler h = prompt(text="", answer_regex="(unclosed")\n')


def test_n_samples_give_a_list(tmp_path):
    model = FakeModel(answers=['"a"', "2"])
    result = run_one(tmp_path, 'handler h = prompt(text="", n=2)', {"question": "q"}, model)
    assert result.error is None, result.error
    assert result.answer == ["a", 2]
    assert len(model.history) == 1 and model.history[0].n == 2


def test_n_samples_with_answer_regex(tmp_path):
    model = FakeModel(answers=["answer is 1", "answer is 2", "answer is 3"])
    result = run_one(tmp_path, r'handler h = prompt(text="", n=3, answer_regex=r"is (\d)")', {"question": "q"},
                     model)
    assert result.answer == [1, 2, 3]


def test_model_without_an_answer_is_a_clean_error(tmp_path):
    result = run_one(tmp_path, 'handler h = prompt(text="")', {"question": "unanswerable"}, FakeModel())
    assert result.answer is None
    assert "unanswerable" in result.error
    assert "[h]" in result.error


def test_missing_prompt_file_is_a_load_error(tmp_path):
    session = Session(model=FakeModel())
    with pytest.raises(DecompError, match="prompt file not found"):
        session.load(tmp_path / "x.decomp", text='handler h = prompt(file="nope.txt")\n')


def test_prompt_without_file_or_text_is_a_load_error(tmp_path):
    session = Session(model=FakeModel())
    with pytest.raises(DecompError, match=r"needs file=\.\.\. or text=\.\.\."):
        session.load(tmp_path / "x.decomp", text="handler h = prompt()\n")


def test_unknown_option_is_a_load_error(tmp_path):
    session = Session(model=FakeModel())
    with pytest.raises(DecompError, match="unknown option 'colour'"):
        session.load(tmp_path / "x.decomp", text='handler h = prompt(text="", colour="red")\n')


# --- templates -------------------------------------------------------------------------------------

def test_jinja_template_with_inputs(tmp_path):
    model = FakeModel(answers=['"ok"'])
    decl = 'handler h = prompt(text="Context: {{ context }}\\nQuestion: {{ query }}\\nN={{ values[0] }}\\nAnswer:")'
    fields = {"question": "q?", "context": "ctx", "n": 3}
    result = run_one(tmp_path, decl, fields, model, query="#question #n")
    assert result.error is None, result.error
    assert result.answer == "ok"
    assert model.prompts == ["Context: ctx\nQuestion: q? 3\nN=q?\nAnswer:"]


def test_jinja_template_sees_inputs_mapping_and_loops(tmp_path):
    model = FakeModel(answers=["1"])
    decl = ('handler h = prompt(text="{% for w in inputs.words %}[{{ w }}]{% endfor %} {{ query | upper }}")')
    run_one(tmp_path, decl, {"question": "q", "words": ["a", "b"]}, model)
    assert model.prompts == ["[a][b] Q"]


def test_jinja_template_file_by_extension(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(file="p.j2")', {"question": "q"}, model, {"p.j2": "Q is {{ query }}\n"})
    assert model.prompts == ["Q is q\n"]


def test_template_false_treats_braces_as_text(tmp_path):
    model = FakeModel(answers=["1"])
    run_one(tmp_path, 'handler h = prompt(text="Q: {{ x }}\\nA: 1\\n", template=false)', {"question": "q"}, model)
    assert model.prompts == ["Q: {{ x }}\nA: 1\n\nQ: q\nA:"]


def test_missing_template_variable_is_a_clean_error(tmp_path):
    model = FakeModel(answers=["1"])
    result = run_one(tmp_path, 'handler h = prompt(text="{{ query }} {{ missing_var }}")', {"question": "q"}, model)
    assert result.answer is None
    assert "missing_var" in result.error
    assert "[h]" in result.error
    assert model.prompts == []  # nothing was sent


@pytest.mark.parametrize("expr", [
    "''.__class__.__mro__",
    "query.__class__.__mro__[1].__subclasses__()",
    "cycler.__init__.__globals__",
    "values.__class__.__base__",
])
def test_sandbox_blocks_attribute_access(tmp_path, expr):
    model = FakeModel(answers=["1"])
    decl = f'handler h = prompt(text="{{{{ {expr} }}}}")'
    result = run_one(tmp_path, decl, {"question": "q"}, model)
    assert result.answer is None
    assert result.error is not None
    assert "is unsafe" in result.error
    assert "object" not in "".join(model.prompts)  # nothing leaked into a prompt
    assert model.prompts == []


def test_template_syntax_error_is_a_load_error(tmp_path):
    session = Session(model=FakeModel())
    with pytest.raises(DecompError, match="template"):
        session.load(tmp_path / "x.decomp", text='handler h = prompt(text="{{ query ")\n')
