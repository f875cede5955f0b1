"""The model a soft prompt is tuned on: a GGUF file's weights in transformers (dequantised to
float32) and llama.cpp's own tokenizer of that file, the one serving uses, with the file's
identity (`gguf_identity`) the soft prompt is bound to.

`load_base(spec)` is the one place a model is loaded; a test builds a `Base` from a model and
tokenizer of its own instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from decomp.runtime.models.base import ModelError, sendable
from decomp.runtime.models.local import (DEFAULT, _quiet_llama_logs, gguf_identity, prompt_tokens, score_tokens,
                                         weights_path)
from decomp.learning.tuning.examples import TuneError

__all__ = ["Base", "LlamaTokenizer", "load_base", "model_path"]


@dataclass
class Base:
    """A model to tune on: `model` (a transformers causal LM, frozen by the trainer), `encode`
    (text -> token ids, beginning-of-text included) and `identity` (the `base_model` and
    `tokenizer` entries of the soft prompt's metadata)."""

    model: Any
    encode: Callable[[str], list[int]]
    identity: tuple[dict, dict]
    name: str = ""


class LlamaTokenizer:
    """llama.cpp's tokenizer of a GGUF file (a vocabulary-only load), as `LocalModel` tokenises
    what it serves: a prompt as a completion reads it (`prompt_tokens`), or with `scoring`, a
    text as `score` reads it (`score_tokens`)."""

    def __init__(self, path: Path, scoring: bool = False):
        from llama_cpp import Llama

        _quiet_llama_logs()
        self._vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
        self._tokens = score_tokens if scoring else prompt_tokens

    def __call__(self, text: str) -> list[int]:
        return self._tokens(self._vocab, sendable(text))


def model_path(spec: str) -> Path:
    """The GGUF file of `local:NAME` (`local:gemma-3-270m`, the bundled model, or
    `local:/path/to/file.gguf`); a `TuneError` for another kind of model, a missing file or one
    that is not GGUF."""
    scheme, _, name = spec.partition(":")
    if scheme != "local" or not name:
        raise TuneError(f"--model {spec}: only a local model can be tuned (local:{DEFAULT} or local:/path/to/file.gguf)")
    try:
        path = weights_path(name)
    except ModelError as err:
        raise TuneError(str(err)) from None
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except OSError as err:
        raise TuneError(f"cannot read the model file {path}: {err.strerror or err}") from None
    if magic != b"GGUF":
        raise TuneError(f"the model file {path} is not a GGUF file (give local:{DEFAULT} or a .gguf file)")
    return path


def load_base(spec: str, scoring: bool = False) -> Base:
    """The model `spec` names (see `model_path`), loaded for training: its identity first (a
    file llama.cpp cannot read fails fast), then the weights in transformers, float32, eager
    attention; its tokenizer reads text as a completion's prompt, or with `scoring` as `score`."""
    path = model_path(spec)
    try:
        identity = gguf_identity(path)
        encode = LlamaTokenizer(path, scoring)
    except (ModelError, ValueError) as err:
        raise TuneError(f"cannot load the model {spec}: {err}") from None
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                     attn_implementation="eager")
    except Exception as err:  # transformers raises many kinds for a file it cannot convert
        raise TuneError(f"transformers cannot load the model file {path}: {type(err).__name__}: {err}") from None
    return Base(model, encode, identity, spec)
