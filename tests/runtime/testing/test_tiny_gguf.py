"""The tiny random Gemma 3 GGUF file (runtime/testing/tiny_gguf.py, the `tiny_gguf` fixture):
transformers and llama.cpp both load it, with the weights it was built from, llama.cpp tokenizes
as it does with the bundled model, and input embeddings fed to llama.cpp give what transformers
gives for `inputs_embeds`, unscaled.

Timings measured on the shared 2-core machine this was written on (load average 5-6): building
the model takes 3-4 s and writing the file (75 MB: the 262144 x 64 float32 token embedding and
the bundled file's tokenizer metadata) 1.5-2 s; `write_tiny_gemma3` in a fresh process, imports
of torch and transformers included, about 10 s. Reading the bundled file's metadata takes 0.2 s.
Loading the file with transformers takes far longer, 50-70 s: transformers' GGUF loader parses
the metadata with gguf.GGUFReader, 10-25 s over the 262144-token vocabulary, two or three times
(it would for the real model too); this module loads it once. llama.cpp loads it in about 1 s.
The whole module: about 2 minutes here.

Agreement measured (seed 0, float32 weights everywhere):
- the file read back by transformers against the model in memory: logits identical (max |diff|
  0.0), weights within 1e-7 (the norms' (1 + w) - 1 round trip); asserted atol 1e-4;
- llama.cpp against transformers on the same file, with llama.cpp's defaults (f16 KV cache,
  ggml's f16 GELU table): max |logit diff| over all positions and the whole vocabulary 0.016-0.017
  (logits' std about 4), the last position's log-probs of transformers' top 10 within
  0.002-0.009, the same argmax (top probability 0.10-0.13);
- input embeddings then tokens: max |logit diff| 0.019-0.023, top-10 log-probs within
  0.004-0.009, the same argmax. The control, the embeddings divided by sqrt(hidden) (what a
  second scaling by llama.cpp would undo): top-10 log-probs off by 6-8, logits by 15; without
  the soft prompt transformers' own top-10 log-probs move by 6-16.
Asserted: `LOGIT_ATOL` 0.05, `LOGPROB_ATOL` 0.03 (2-3x the measured), the controls > 10x
`LOGPROB_ATOL`.
"""
import ctypes
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")
pytest.importorskip("transformers")
np = pytest.importorskip("numpy")

from decomp.runtime.testing import tiny_gguf as tiny  # noqa: E402  (the fixture is `tiny_gguf`)

TEXTS = ["Task: make tea\nSteps:\n1.", "The capital of France is", "héllo <b> 日本語 \t\n  x"]
LOGIT_ATOL = 0.05
LOGPROB_ATOL = 0.03
TOP = 10


@pytest.fixture(scope="module")
def built():
    """The model the `tiny_gguf` file was written from, rebuilt from its seed."""
    return tiny.build_tiny_gemma3(seed=0)


@pytest.fixture(scope="module")
def hf(tiny_gguf):
    """The file as transformers loads it (the slow part of this module: see its docstring)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name,
                                                dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def llm(tiny_gguf):
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(tiny_gguf), n_ctx=256, logits_all=True, verbose=False)


def _reference():
    from decomp.runtime.models.local import DEFAULT, weights_path

    return weights_path(DEFAULT)


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def top_logprob_gap(ours, theirs, k=TOP) -> float:
    """max |log p_ours - log p_theirs| over `theirs`' top k tokens (last axis, one position)."""
    a, b = log_softmax(ours), log_softmax(theirs)
    top = np.argsort(-b)[:k]
    return float(np.abs(a[top] - b[top]).max())


def hf_logits(model, ids=None, embeds=None):
    with torch.no_grad():
        if embeds is not None:
            return model(inputs_embeds=embeds).logits[0].double().numpy()
        return model(torch.tensor([ids])).logits[0].double().numpy()


def eval_embeddings(llm, embeddings) -> int:
    """Decode float32 `embeddings` (n x hidden) into llama.cpp's context from position 0, as a
    soft prompt is served; `llm.eval(tokens)` then continues at position n. Returns n."""
    from llama_cpp._internals import LlamaBatch

    embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
    n, hidden = embeddings.shape
    llm.reset()
    llm._ctx.kv_cache_seq_rm(-1, 0, -1)
    batch = LlamaBatch(n_tokens=n, embd=hidden, n_seq_max=1)
    batch.batch.n_tokens = n
    ctypes.memmove(batch.batch.embd, embeddings.ctypes.data, embeddings.nbytes)
    for i in range(n):
        batch.batch.pos[i] = i
        batch.batch.n_seq_id[i] = 1
        batch.batch.seq_id[i][0] = 0
        batch.batch.logits[i] = i == n - 1
    llm._ctx.decode(batch)
    llm.n_tokens = n
    return n


# ---- the file
def test_the_file_has_the_real_model_s_keys_tokenizer_and_tensor_names(tiny_gguf):
    meta, tensors = tiny.read_gguf(tiny_gguf)
    real_meta, real_tensors = tiny.read_gguf(_reference())
    assert meta["general.architecture"][2] == b"gemma3"
    assert {k for k in meta if k.startswith("gemma3.")} == {k for k in real_meta if k.startswith("gemma3.")}
    real_tokenizer = {k: v for k, v in real_meta.items() if k.startswith("tokenizer.")}
    assert {k: v for k, v in meta.items() if k.startswith("tokenizer.")} == real_tokenizer
    assert len(real_tokenizer["tokenizer.ggml.tokens"][2]) == 262144
    layers = meta["gemma3.block_count"][2]
    assert (layers, meta["gemma3.embedding_length"][2], meta["gemma3.attention.key_length"][2]) == (6, 64, 256)
    # llama.cpp's names, the real file's for the same layers (it has 18), every tensor F32 (type 0)
    expected = {name for name in real_tensors
                if not name.startswith("blk.") or int(name.split(".")[1]) < layers}
    assert set(tensors) == expected
    assert {ggml_type for _shape, ggml_type in tensors.values()} == {0}
    assert tensors["token_embd.weight"][0] == (64, 262144)
    assert tensors["blk.0.attn_q.weight"][0] == (64, 2 * 256)
    assert tensors["blk.0.attn_k.weight"][0] == (64, 256)
    assert tensors["blk.0.attn_output.weight"][0] == (2 * 256, 64)
    assert tensors["blk.0.attn_q_norm.weight"][0] == (256,)
    # the same dimensions as the real file's wherever the real file's are its sizes
    assert real_tensors["blk.0.attn_q.weight"][0] == (640, 4 * 256)


def test_the_same_seed_writes_the_same_bytes(tiny_gguf, tmp_path):
    """Also times the writer (reported with -s): about 1.5 s here, after the ~4 s build."""
    start = time.perf_counter()
    model = tiny.build_tiny_gemma3(seed=0)
    built_s = time.perf_counter() - start
    again = tiny.write_gemma3_gguf(model, tmp_path / "again.gguf")
    print(f"build {built_s:.1f} s, write {time.perf_counter() - start - built_s:.1f} s")
    assert again.read_bytes() == tiny_gguf.read_bytes()


# ---- transformers
def test_transformers_reads_back_the_built_model(hf, built):
    """The writer's conventions (names, shapes, (1 + w) norms, tied head, config keys) are the
    ones transformers' GGUF loader undoes: same config, same weights, same logits."""
    for attribute in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                      "head_dim", "intermediate_size", "vocab_size", "layer_types", "sliding_window",
                      "query_pre_attn_scalar", "rope_parameters", "rms_norm_eps", "final_logit_softcapping",
                      "attn_logit_softcapping", "tie_word_embeddings"):
        assert getattr(hf.config, attribute) == getattr(built.config, attribute), attribute
    assert hf.config.layer_types[-1] == "full_attention"
    ours, theirs = built.state_dict(), hf.state_dict()
    assert set(ours) == set(theirs)
    for name, tensor in ours.items():
        torch.testing.assert_close(theirs[name], tensor, atol=1e-6, rtol=0, msg=name)
    for ids in ([2, 6804], [2, 818, 5279], [2, 236754, 7869, 844, 236743, 200, 33375]):
        np.testing.assert_allclose(hf_logits(hf, ids), hf_logits(built, ids), atol=1e-4, rtol=0)


# ---- llama.cpp
def test_llama_cpp_tokenizes_as_with_the_real_model(llm):
    import llama_cpp

    real = llama_cpp.Llama(model_path=str(_reference()), vocab_only=True, verbose=False)
    for text in [*TEXTS, "<start_of_turn>user\nhi<end_of_turn>", "  spaces   and\ttabs\n\n"]:
        for special in (False, True):
            ids = llm.tokenize(text.encode(), add_bos=True, special=special)
            assert ids == real.tokenize(text.encode(), add_bos=True, special=special), (text, special)
    assert llm.n_vocab() == real.n_vocab() == 262144
    assert (llm.token_bos(), llm.token_eos()) == (real.token_bos(), real.token_eos()) == (2, 1)


def test_llama_cpp_logits_match_transformers(llm, hf):
    for text in TEXTS:
        ids = llm.tokenize(text.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(ids)
        ours = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
        theirs = hf_logits(hf, ids)
        assert np.abs(ours - theirs).max() < LOGIT_ATOL, text
        assert top_logprob_gap(ours[-1], theirs[-1]) < LOGPROB_ATOL, text
        assert ours[-1].argmax() == theirs[-1].argmax(), text
        assert np.exp(log_softmax(theirs[-1]).max()) < 0.5  # a distribution, not one token


def test_llama_cpp_takes_input_embeddings_unscaled(llm, hf):
    """Embeddings from transformers' scaled embedding layer (which multiplies by sqrt(hidden)),
    decoded into llama.cpp then followed by tokens, give transformers' `inputs_embeds` result:
    llama.cpp scales token ids' embeddings, not embeddings given to it. The control: the same
    embeddings divided by sqrt(hidden) (what would match if llama.cpp scaled them again) differ."""
    embed = hf.get_input_embeddings()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        soft = embed(torch.tensor([[2, 6804, 236787, 1386, 11115, 1386]]))[0]
        soft = soft + 0.3 * soft.std() * torch.randn(soft.shape, generator=generator)
    hidden = soft.shape[1]
    gaps = []
    for text in TEXTS:
        ids = llm.tokenize(text.encode(), add_bos=True, special=False)
        with torch.no_grad():
            theirs = hf_logits(hf, embeds=torch.cat([soft, embed(torch.tensor([ids]))[0]])[None])
        theirs = theirs[len(soft):]
        n = eval_embeddings(llm, soft.numpy())
        llm.eval(ids)
        ours = np.asarray(llm.scores[n:n + len(ids)], dtype=np.float64)
        assert np.abs(ours - theirs).max() < LOGIT_ATOL, text
        assert top_logprob_gap(ours[-1], theirs[-1]) < LOGPROB_ATOL, text
        assert ours[-1].argmax() == theirs[-1].argmax(), text
        # the soft prompt matters: without it the distribution is another
        assert top_logprob_gap(hf_logits(hf, ids)[-1], theirs[-1]) > 10 * LOGPROB_ATOL, text

        n = eval_embeddings(llm, soft.numpy() / hidden ** 0.5)
        llm.eval(ids)
        control = np.asarray(llm.scores[n:n + len(ids)], dtype=np.float64)
        gaps.append(top_logprob_gap(control[-1], theirs[-1]))
    assert min(gaps) > 10 * LOGPROB_ATOL, gaps
