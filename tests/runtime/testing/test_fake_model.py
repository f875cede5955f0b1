"""Tests of decomp.runtime.testing.fake.FakeModel: queue, mapping, script, default, errors,
history, samples and loading from a JSON file."""
from __future__ import annotations

import asyncio
import json

import pytest

from decomp.runtime.models.base import Completion, ModelError, Request
from decomp.runtime.testing.fake import FakeModel, last_question
from decomp.runtime.engine.session import Session


def ask(model: FakeModel, prompt: str, n: int = 1) -> Completion:
    return asyncio.run(model.complete(Request(prompt, n=n)))


def text(model: FakeModel, prompt: str) -> str:
    return ask(model, prompt).text


FEWSHOT = 'Q: What are the words in "a b"?\nA: ["a", "b"]\n\nQ: {q}\nA:'
DECOMP = 'QC: example\nQS: [x] y\nA: 1\nQS: [EOQ]\n\nQC: {q}\n{history}QS:'


# --- queue ---------------------------------------------------------------------------------------

def test_queue_answers_in_order():
    model = FakeModel(answers=["first", "second", "third"])
    assert [text(model, f"Q: {i}\nA:") for i in range(3)] == ["first", "second", "third"]


def test_queue_exhausted_is_an_error():
    model = FakeModel(answers=["only"])
    assert text(model, "Q: a\nA:") == "only"
    with pytest.raises(ModelError, match="'b'"):
        ask(model, "Q: b\nA:")


def test_queue_accepts_callables():
    model = FakeModel(answers=[lambda r: f"len={len(r.prompt)}"])
    assert text(model, "abc") == "len=3"


# --- mapping -------------------------------------------------------------------------------------

def test_mapping_by_exact_prompt():
    prompt = FEWSHOT.format(q="x")
    model = FakeModel(mapping={prompt: "exact", "x": "by question"})
    assert text(model, prompt) == "exact"
    assert text(model, FEWSHOT.format(q="x") + " ") == "by question"


def test_mapping_by_last_question():
    model = FakeModel(mapping={'What are the words in "a b"?': "first question", "target": "T"})
    assert text(model, FEWSHOT.format(q="target")) == "T"


def test_mapping_by_last_qc_line():
    model = FakeModel(mapping={"the complex question": "qc answer"})
    prompt = "QC: example\nQS: [x] y\nA: 1\n\nQC: the complex question\nQS:"
    assert text(model, prompt) == "qc answer"


def test_mapping_exact_question_beats_substring():
    model = FakeModel(mapping={"words": "substring", "the words": "exact"})
    assert text(model, "Q: the words\nA:") == "exact"


def test_mapping_by_substring_longest_key_first():
    mapping = {"words": "short", "the words in": "long", "in": "shortest"}
    model = FakeModel(mapping=mapping)
    assert text(model, FEWSHOT.format(q='What are the words in "x y"?')) == "long"
    # the order of insertion does not matter
    model = FakeModel(mapping=dict(reversed(list(mapping.items()))))
    assert text(model, FEWSHOT.format(q='What are the words in "x y"?')) == "long"
    assert text(model, "Q: many words\nA:") == "short"


def test_mapping_substring_is_searched_in_the_last_question_only():
    model = FakeModel(mapping={"a b": "from the examples"}, default="default")
    # "a b" occurs in the examples' question but not in the last question
    assert text(model, FEWSHOT.format(q="something else")) == "default"


def test_mapping_is_reusable_and_does_not_consume_the_queue():
    model = FakeModel(answers=["queued"], mapping={"q": "mapped"})
    assert text(model, "Q: q\nA:") == "mapped"
    assert text(model, "Q: q\nA:") == "mapped"
    assert text(model, "Q: other\nA:") == "queued"


def test_mapping_callable():
    model = FakeModel(mapping={"echo": lambda r: last_question(r.prompt).upper()})
    assert text(model, "Q: echo me\nA:") == "ECHO ME"


# --- script ----------------------------------------------------------------------------------------

def test_script_by_qc_question_and_step_count():
    lines = ["[split] words?", "(foreach) [up] #1", "[EOQ]"]
    model = FakeModel(script={"Do it.": lines})
    assert text(model, DECOMP.format(q="Do it.", history="")) == " [split] words?"
    history = "QS: [split] words?\nA: [\"a\"]\n"
    assert text(model, DECOMP.format(q="Do it.", history=history)) == " (foreach) [up] #1"
    history += "QS: (foreach) [up] #1\nA: [\"A\"]\n"
    assert text(model, DECOMP.format(q="Do it.", history=history)) == " [EOQ]"


def test_script_keys_are_stripped():
    model = FakeModel(script={"  Do it.  ": ["[a] b"]})
    assert text(model, DECOMP.format(q="Do it.", history="")) == " [a] b"


def test_script_does_not_count_the_examples_steps():
    # the examples have QS lines too: only those after the last QC count
    model = FakeModel(script={"mine": ["[one]", "[two]"]})
    prompt = "QC: ex\nQS: [a] 1\nA: 1\nQS: [b] 2\nA: 2\nQS: [EOQ]\n\nQC: mine\nQS: [one]\nA: 1\nQS:"
    assert text(model, prompt) == " [two]"


def test_script_only_for_prompts_asking_for_a_qs_line():
    model = FakeModel(script={"Do it.": ["[a] b"]}, default="not scripted")
    assert text(model, "QC: Do it.\nQS: [a] b\nA:") == "not scripted"


def test_script_exhausted_falls_back():
    model = FakeModel(script={"Do it.": ["[a] b"]}, answers=["queued"])
    prompt = DECOMP.format(q="Do it.", history="QS: [a] b\nA: 1\n")
    assert text(model, prompt) == "queued"


def test_script_beats_mapping_and_queue():
    model = FakeModel(script={"Do it.": ["[a] b"]}, mapping={"Do it.": "mapped"}, answers=["queued"])
    assert text(model, DECOMP.format(q="Do it.", history="")) == " [a] b"
    assert list(model.queue) == ["queued"]


def test_unscripted_question_is_an_error_naming_it():
    model = FakeModel(script={"Do it.": ["[a] b"]})
    with pytest.raises(ModelError, match="Something else"):
        ask(model, DECOMP.format(q="Something else", history=""))


# --- default and errors ------------------------------------------------------------------------------

def test_default_string_and_callable():
    assert text(FakeModel(default="dflt"), "Q: anything\nA:") == "dflt"
    model = FakeModel(default=lambda r: f"<{last_question(r.prompt)}>")
    assert text(model, "Q: anything\nA:") == "<anything>"


def test_queue_before_default():
    model = FakeModel(answers=["q1"], default="d")
    assert [text(model, "Q: x\nA:") for _ in range(3)] == ["q1", "d", "d"]


def test_error_when_nothing_matches_names_the_question():
    model = FakeModel(mapping={"other": "x"})
    with pytest.raises(ModelError) as err:
        ask(model, FEWSHOT.format(q="What is the unanswerable thing?"))
    assert "What is the unanswerable thing?" in str(err.value)
    assert 'What are the words in "a b"?' not in str(err.value)


def test_error_without_question_markers_shows_the_prompt():
    with pytest.raises(ModelError, match="free text prompt"):
        ask(FakeModel(), "free text prompt")


def test_last_question():
    assert last_question(FEWSHOT.format(q="final")) == "final"
    assert last_question("QC: a\nQS: [x] y\nA: 1\nQS:") == "a"
    assert last_question("Q: first\nA: 1\nQC: second\nQS:") == "second"
    assert last_question("  no markers  ") == "no markers"
    assert last_question("Q:   spaced  \nA:") == "spaced"


# --- history and samples -----------------------------------------------------------------------------

def test_history_and_prompts():
    model = FakeModel(default="d")
    asyncio.run(model.complete(Request("Q: one\nA:", max_tokens=5, temperature=0.3, stop=("\n",))))
    ask(model, "Q: two\nA:")
    assert model.prompts == ["Q: one\nA:", "Q: two\nA:"]
    first = model.history[0]
    assert (first.max_tokens, first.temperature, first.stop) == (5, 0.3, ("\n",))


def test_failed_requests_are_in_the_history_too():
    model = FakeModel()
    with pytest.raises(ModelError):
        ask(model, "Q: x\nA:")
    assert model.prompts == ["Q: x\nA:"]


def test_n_samples_from_the_queue():
    model = FakeModel(answers=["1", "2", "3", "4"])
    completion = ask(model, "Q: x\nA:", n=3)
    assert completion.texts == ("1", "2", "3")
    assert completion.text == "1"
    assert list(model.queue) == ["4"]
    assert len(model.history) == 1


def test_n_samples_from_mapping_repeat():
    model = FakeModel(mapping={"x": "same"})
    assert ask(model, "Q: x\nA:", n=2).texts == ("same", "same")


def test_n_zero_still_gives_one_text():
    assert ask(FakeModel(default="d"), "Q: x\nA:", n=0).texts == ("d",)


def test_token_counts():
    completion = ask(FakeModel(answers=["two words"]), "Q: a b\nA:")
    assert completion.prompt_tokens == 3  # one token per 4 characters, rounded up: 10 chars
    assert completion.completion_tokens == 3  # 9 chars


# --- from_file -----------------------------------------------------------------------------------------

def test_from_file(tmp_path):
    path = tmp_path / "fake.json"
    path.write_text(json.dumps({
        "answers": ["queued"],
        "mapping": {"mapped q": "mapped a"},
        "script": {"Do it.": ["[a] b"]},
        "default": "dflt",
    }), encoding="utf-8")
    model = FakeModel.from_file(path)
    assert str(path) in model.name and model.name.startswith("fake:")
    assert text(model, DECOMP.format(q="Do it.", history="")) == " [a] b"
    assert text(model, "Q: mapped q\nA:") == "mapped a"
    assert text(model, "Q: other\nA:") == "queued"
    assert text(model, "Q: other\nA:") == "dflt"


def test_from_file_partial(tmp_path):
    path = tmp_path / "fake.json"
    path.write_text('{"answers": ["x"]}', encoding="utf-8")
    model = FakeModel.from_file(str(path))
    assert text(model, "Q: q\nA:") == "x"
    with pytest.raises(ModelError):
        ask(model, "Q: q\nA:")


def test_from_file_rejects_unknown_keys(tmp_path):
    path = tmp_path / "fake.json"
    path.write_text('{"answers": [], "mappings": {}, "defaults": "x"}', encoding="utf-8")
    with pytest.raises(ModelError) as err:
        FakeModel.from_file(path)
    assert "mappings" in str(err.value) and "defaults" in str(err.value)


def test_session_builds_fake_models_from_specs(tmp_path):
    path = tmp_path / "fake.json"
    path.write_text('{"mapping": {"hello": "\\"hi\\""}}', encoding="utf-8")
    session = Session()
    model = session.model(f"fake:{path}")
    assert isinstance(model, FakeModel)
    assert session.model(f"fake:{path}") is model  # cached per spec
    assert isinstance(session.model("fake"), FakeModel)
    with pytest.raises(ModelError, match="unknown model"):
        session.model("nosuch:thing")


def test_module_default_model_is_a_fake_file(tmp_path):
    (tmp_path / "fake.json").write_text('{"mapping": {"hello": "\\"hi\\""}}', encoding="utf-8")
    src = ('model default = "fake:' + str(tmp_path / "fake.json") + '"\n'
           'handler ask = prompt(text="")\n'
           'program p(question) {\n    QS: [ask] #question\n}\nmain p\n')
    session = Session()
    result = session.run(session.load(tmp_path / "x.decomp", text=src), {"question": "hello"})
    assert (result.answer, result.error) == ("hi", None)


def test_no_model_configured_is_a_clean_error(tmp_path):
    src = 'handler ask = prompt(text="")\nprogram p(question) {\n    QS: [ask] #question\n}\nmain p\n'
    session = Session(default_model=None)
    result = session.run(session.load(tmp_path / "x.decomp", text=src), {"question": "hello"})
    assert result.answer is None
    assert "no model is configured" in result.error


def test_the_embedded_local_model_is_the_default():
    assert Session().resolve_model(None, None).name == "local:gemma-3-270m"
    assert Session().resolve_model(None, "fake").name == "fake"
