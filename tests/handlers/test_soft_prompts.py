"""The soft prompt file (decomp.handlers.soft_prompts): written at once with its metadata and the
usual file mode, read back read-only with its sha256, every other file refused in words, and
`mismatch` naming why a soft prompt cannot serve a model."""
import hashlib
import json
import os
import stat

import numpy as np
import pytest
from safetensors.numpy import save

from decomp.handlers import soft_prompts as sp

META = {"base_model": {"name": "m", "hidden_size": 3, "sha256": "a" * 64},
        "tokenizer": {"vocab_size": 9, "sha256": "b" * 64}, "handler": {"name": "h"}}


def test_a_written_soft_prompt_reads_back_with_its_metadata_and_digest(tmp_path):
    path = tmp_path / "sub" / "s.safetensors"
    digest = sp.write_soft_prompt(path, np.arange(6, dtype=np.float64).reshape(2, 3), META)
    soft = sp.read_soft_prompt(path)
    assert soft.digest == digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert soft.embeddings.dtype == np.float32 and soft.embeddings.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert (soft.n_tokens, soft.hidden_size) == (2, 3) and not soft.embeddings.flags.writeable
    assert soft.meta["format"] == sp.FORMAT and soft.meta["n_tokens"] == 2 and soft.meta["handler"] == {"name": "h"}
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in path.parent.iterdir()] == ["s.safetensors"]  # no temporary file left


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "s.safetensors"
    sp.write_soft_prompt(path, np.ones((1, 3)), META)
    before = path.read_bytes()
    with pytest.raises(sp.SoftPromptError):
        sp.write_soft_prompt(path, np.array([[np.nan, 1, 2]]), META)
    with pytest.raises(ValueError):  # NaN in the metadata cannot be written as JSON
        sp.write_soft_prompt(path, np.ones((1, 3)), {**META, "loss": float("nan")})
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["s.safetensors"]


def _raw(path, tensors, meta):
    path.write_bytes(save(tensors, metadata=None if meta is None else {"decomp": json.dumps(meta)}))
    return path


GOOD = {"format": sp.FORMAT, **META, "n_tokens": 2}


@pytest.mark.parametrize("tensors, meta, words", [
    ({"other": np.ones((2, 3), np.float32)}, GOOD, "not one named 'soft_prompt'"),
    ({"soft_prompt": np.ones((2, 3, 1), np.float32)}, GOOD, "expected [tokens (1 to 4096), hidden size]"),
    ({"soft_prompt": np.ones((2, 3), np.float16)}, GOOD, "is float16, expected float32"),
    ({"soft_prompt": np.array([[1, np.inf, 0], [0, 0, 0]], np.float32)}, GOOD, "not finite"),
    ({"soft_prompt": np.ones((2, 3), np.float32)}, None, "has no decomp metadata"),
    ({"soft_prompt": np.ones((2, 3), np.float32)}, {**GOOD, "format": "v0"}, "metadata format 'v0'"),
    ({"soft_prompt": np.ones((2, 3), np.float32)}, {**GOOD, "tokenizer": None}, "lacks 'tokenizer'"),
    ({"soft_prompt": np.ones((2, 3), np.float32)}, {**GOOD, "n_tokens": 5}, "says 5 tokens, its tensor has 2"),
])
def test_files_that_are_not_soft_prompts_are_refused_in_words(tmp_path, tensors, meta, words):
    with pytest.raises(sp.SoftPromptError) as caught:
        sp.read_soft_prompt(_raw(tmp_path / "x.safetensors", tensors, meta))
    assert words in str(caught.value)


def test_missing_unreadable_and_oversized_files_are_refused(tmp_path, monkeypatch):
    with pytest.raises(sp.SoftPromptError, match="cannot read soft prompt file"):
        sp.read_soft_prompt(tmp_path / "none.safetensors")
    (tmp_path / "text.safetensors").write_text("hello")
    with pytest.raises(sp.SoftPromptError, match="not a safetensors file"):
        sp.read_soft_prompt(tmp_path / "text.safetensors")
    (tmp_path / "text.safetensors").write_text("hello" * 10)
    monkeypatch.setattr(sp, "MAX_BYTES", 10)
    with pytest.raises(sp.SoftPromptError, match="is 50 bytes, over 10: not a soft prompt"):
        sp.read_soft_prompt(tmp_path / "text.safetensors")


def test_mismatch_names_the_hidden_size_then_the_tokenizer_then_the_weights(tmp_path):
    sp.write_soft_prompt(tmp_path / "s.safetensors", np.ones((2, 3)), META)
    soft = sp.read_soft_prompt(tmp_path / "s.safetensors")
    model, tokenizer = dict(META["base_model"]), dict(META["tokenizer"])
    assert sp.mismatch(soft, model, tokenizer) is None
    assert "embeddings are 3 wide, the model's hidden size is 4" in sp.mismatch(soft, {**model, "hidden_size": 4}, tokenizer)
    assert "another tokenizer" in sp.mismatch(soft, model, {**tokenizer, "sha256": "c" * 64})
    assert "other weights" in sp.mismatch(soft, {**model, "sha256": "d" * 64}, tokenizer)


def _raw_text(path, text):
    """A soft prompt file whose decomp metadata is `text` as it is."""
    path.write_bytes(save({"soft_prompt": np.ones((2, 3), np.float32)}, metadata={"decomp": text}))
    return path


@pytest.mark.parametrize("field, value, words", [
    ("handler", "x", "'handler' is a string, expected an object (what it was trained for: program, name, kind, "
                     "template_sha256)"),
    ("handler", [1], "'handler' is a list, expected an object"),
    ("handler", {"name": 3}, "'handler.name' is a number, expected a string"),
    ("handler", {"template_sha256": ["a"]}, "'handler.template_sha256' is a list, expected a string"),
    ("training", 5, "'training' is a number, expected an object (how it was trained)"),
    ("n_tokens", "2", "'n_tokens' is a string, expected an integer (the tensor's rows)"),
    ("n_tokens", True, "'n_tokens' is a boolean, expected an integer"),
    ("base_model", {**META["base_model"], "hidden_size": "3"}, "'base_model.hidden_size' is a string, expected an "
                                                               "integer"),
    ("tokenizer", {**META["tokenizer"], "sha256": None}, "'tokenizer.sha256' is null, expected a string"),
])
def test_metadata_of_the_wrong_shape_names_the_field_and_what_was_expected(tmp_path, field, value, words):
    path = _raw_text(tmp_path / "x.safetensors", json.dumps({**GOOD, field: value}))
    with pytest.raises(sp.SoftPromptError) as caught:
        sp.read_soft_prompt(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: its metadata's {words}") and words in message
    assert message.endswith(": not a soft prompt as decomp tune writes it")


@pytest.mark.parametrize("where", ["training", "handler"])
def test_metadata_nested_200k_deep_is_said_to_be_nested_too_deeply(tmp_path, where):
    deep = "[" * 200_000 + "]" * 200_000
    text = json.dumps(GOOD)[:-1] + f', "{where}": {deep}}}'
    with pytest.raises(sp.SoftPromptError) as caught:
        sp.read_soft_prompt(_raw_text(tmp_path / "x.safetensors", text))
    assert "the soft prompt's metadata is nested too deeply to read" in str(caught.value)
