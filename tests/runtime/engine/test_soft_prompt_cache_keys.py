"""Step cache keys of samples and scores with a soft prompt: its file's sha256 is in them when
one is given, and only then (the keys of calls without one are those of before soft prompts,
so existing caches still answer)."""
from __future__ import annotations

import numpy as np

from decomp.handlers.soft_prompts import read_soft_prompt, write_soft_prompt
from decomp.runtime.engine.cache import StepCache, cache_key
from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import Request, Score
from decomp.runtime.testing.fake import FakeModel

META = {"base_model": {"name": "tiny", "hidden_size": 4, "sha256": "a" * 64},
        "tokenizer": {"vocab_size": 10, "sha256": "b" * 64}}


def soft(path, value=1.0):
    write_soft_prompt(path, np.full((2, 4), value, np.float32), META)
    return read_soft_prompt(path)


def old_sample_key(model, request, sample):
    """`Session._sample_key` as it was before soft prompts."""
    sampling = {"max_tokens": request.max_tokens, "temperature": request.temperature,
                "stop": list(request.stop), "seed": request.seed}
    return cache_key({"op": "complete", "model": model.cache_identity(), "sampling": sampling,
                      "sample": sample, "prompt": request.prompt})


def old_score_key(model, prompt, continuation):
    return cache_key({"op": "score", "model": model.cache_identity(), "prompt": prompt,
                      "continuation": continuation})


def test_keys_without_a_soft_prompt_are_those_of_before():
    model = FakeModel()
    for request in (Request("Q: a\nA:"), Request("x", max_tokens=9, temperature=0.7, stop=("\n",), n=2, seed=3)):
        for index in (0, 1):
            sample = index if request.temperature > 0 else 0
            assert Session._sample_key(model, request, index) == old_sample_key(model, request, sample)
    assert Session._score_key(model, "p", " c", None) == old_score_key(model, "p", " c")


def test_a_soft_prompt_is_in_the_keys_by_its_files_content(tmp_path):
    model = FakeModel()
    one, two = soft(tmp_path / "one.safetensors", 1.0), soft(tmp_path / "two.safetensors", 2.0)
    same = soft(tmp_path / "copy.safetensors", 1.0)  # another file, the same bytes
    plain = Request("Q: a\nA:")
    samples = [Session._sample_key(model, Request("Q: a\nA:", soft_prompt=s), 0) for s in (None, one, two, same)]
    scores = [Session._score_key(model, "p", " c", s) for s in (None, one, two, same)]
    for keys in (samples, scores):
        assert len(set(keys[:3])) == 3 and keys[1] == keys[3]
    assert samples[0] == old_sample_key(model, plain, 0)
    assert Request("a", soft_prompt=one) == Request("a")  # requests compare without it; keys do not


class Embedding(FakeModel):
    soft_prompts = True

    async def score(self, prompt, continuation, soft_prompt=None):
        self.history.append(Request(prompt + continuation, max_tokens=0, soft_prompt=soft_prompt))
        return Score(-1.0 if soft_prompt is None else -2.0, 1)


def test_the_session_caches_each_soft_prompt_apart(tmp_path):
    one, two = soft(tmp_path / "one.safetensors", 1.0), soft(tmp_path / "two.safetensors", 2.0)
    model = Embedding(default="x")
    session = Session(model=model, cache=StepCache(tmp_path / "c.sqlite"))
    calls = [(session.complete, Request("Q: a\nA:", soft_prompt=s)) for s in (None, one, two, one, None)]
    for run, request in calls:
        session.run_sync(run(model, request))
    scores = [session.run_sync(session.score(model, "p", " c", soft_prompt=s)).logprob for s in (None, one, one)]
    assert [r.soft_prompt for r in model.history] == [None, one, two, None, one]  # repeats answered by the cache
    assert scores == [-1.0, -2.0, -2.0]
