"""A trained soft prompt's file: the learned input embeddings of one prompt or score handler.

One safetensors file holds one float32 tensor `soft_prompt` of shape (tokens, hidden size),
the embeddings the model reads before the rendered prompt's own tokens (beginning-of-text
included), in the space after the model's input embedding layer (for Gemma: after its
sqrt(hidden) scaling). Its metadata, one JSON object under the key `decomp`, says what it was
trained for and from what:

    format         "decomp-soft-prompt/1"
    base_model     {"name", "architecture", "hidden_size", "vocab_size", "sha256"}: the weights
    tokenizer      {"vocab_size", "sha256"}: the token texts, in id order
    n_tokens       the number of virtual tokens (the tensor's rows)
    handler        {"program", "name", "kind", "template_sha256"}: what it was trained for
    training       {"data_sha256", "rows", "seed", "options", "losses", "validation", ...}

`decomp tune` writes it (`write_soft_prompt`); `prompt(..., soft_prompt=FILE)` and
`score(..., soft_prompt=FILE)` read it (`read_soft_prompt`) and the local model refuses one
trained for other weights, another tokenizer or another hidden size (`mismatch`). Reading needs
numpy and safetensors only, never torch.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from decomp.dsl.errors import DecompError
from decomp.dsl.values import json_kind
from decomp.handlers.files import write_whole

__all__ = ["FORMAT", "SoftPrompt", "SoftPromptError", "TENSOR", "mismatch", "read_soft_prompt",
           "write_soft_prompt"]

FORMAT = "decomp-soft-prompt/1"
TENSOR = "soft_prompt"
#: The most virtual tokens a soft prompt may have (the paper's largest is 100s; a bigger file is
#: more likely a mistake than a prompt).
MAX_TOKENS = 4096
#: The largest file read as a soft prompt (4096 tokens of a 4096-wide model, in float32).
MAX_BYTES = 80 * 1024 * 1024


class SoftPromptError(DecompError, ValueError):
    """A file that is not a usable soft prompt, in words (the caller positions it)."""


@dataclass(frozen=True, eq=False)
class SoftPrompt:
    """A soft prompt as read from its file: `embeddings` (tokens x hidden, float32, read-only),
    its metadata and the sha256 of the file's bytes (what stands for it in cache keys)."""

    path: str
    embeddings: np.ndarray = field(repr=False)
    meta: Mapping[str, Any] = field(repr=False)
    digest: str = ""

    @property
    def n_tokens(self) -> int:
        return int(self.embeddings.shape[0])

    @property
    def hidden_size(self) -> int:
        return int(self.embeddings.shape[1])


def read_soft_prompt(path: str | os.PathLike) -> SoftPrompt:
    """The soft prompt in the file at `path`; `SoftPromptError` says why a file is not one."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SoftPromptError(f"soft prompt file {path} is {size:,} bytes, over {MAX_BYTES:,}: not a soft prompt")
        data = path.read_bytes()
    except OSError as err:
        raise SoftPromptError(f"cannot read soft prompt file {path}: {err.strerror or err}") from None
    try:
        tensors = load(data)
        meta_text = _metadata(data).get("decomp")
    except (SafetensorError, ValueError, KeyError) as err:
        raise SoftPromptError(f"{path} is not a safetensors file ({err})") from None
    if set(tensors) != {TENSOR}:
        raise SoftPromptError(f"{path} holds tensors {sorted(tensors)}, not one named {TENSOR!r}: not a soft prompt "
                              "written by decomp tune")
    embeddings = tensors[TENSOR]
    if embeddings.ndim != 2 or not 0 < embeddings.shape[0] <= MAX_TOKENS or embeddings.shape[1] == 0:
        raise SoftPromptError(f"{path}: the soft prompt's tensor has shape {list(embeddings.shape)}, "
                              f"expected [tokens (1 to {MAX_TOKENS}), hidden size]")
    if embeddings.dtype != np.float32:
        raise SoftPromptError(f"{path}: the soft prompt's tensor is {embeddings.dtype}, expected float32")
    if not np.isfinite(embeddings).all():
        raise SoftPromptError(f"{path}: the soft prompt holds values that are not finite (NaN or infinity)")
    meta = _meta(path, meta_text)
    if meta.get("n_tokens") != embeddings.shape[0]:
        raise SoftPromptError(f"{path}: its metadata says {meta.get('n_tokens')!r} tokens, its tensor has "
                              f"{embeddings.shape[0]}")
    embeddings = np.ascontiguousarray(embeddings)
    embeddings.setflags(write=False)
    return SoftPrompt(str(path), embeddings, meta, hashlib.sha256(data).hexdigest())


def _metadata(data: bytes) -> dict[str, str]:
    """The `__metadata__` of a safetensors file's header (the numpy loader drops it)."""
    length = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8:8 + length])
    except RecursionError:  # the safetensors reader refuses deep headers first; never a traceback all the same
        raise ValueError("its header is nested too deeply to read") from None
    found = header.get("__metadata__") if isinstance(header, dict) else None
    return found if isinstance(found, dict) else {}


#: What `decomp tune` writes in the metadata, and what each field must be when it is there:
#: (the type, its words, the fields inside an object and theirs). `base_model` and `tokenizer`
#: are required; the others are what the soft prompt was trained for and from.
_SHAPE: dict[str, tuple[type, str, dict[str, tuple[type, str]]]] = {
    "n_tokens": (int, "an integer (the tensor's rows)", {}),
    "base_model": (dict, "an object (the weights it was trained on)",
                   {"name": (str, "a string"), "architecture": (str, "a string"), "hidden_size": (int, "an integer"),
                    "vocab_size": (int, "an integer"), "sha256": (str, "a string")}),
    "tokenizer": (dict, "an object (the tokenizer it was trained with)",
                  {"vocab_size": (int, "an integer"), "sha256": (str, "a string")}),
    "handler": (dict, "an object (what it was trained for: program, name, kind, template_sha256)",
                {"program": (str, "a string"), "name": (str, "a string"), "kind": (str, "a string"),
                 "template_sha256": (str, "a string")}),
    "training": (dict, "an object (how it was trained)", {}),
}


def _meta(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        raise SoftPromptError(f"{path} has no decomp metadata: not a soft prompt written by decomp tune")
    try:
        meta = json.loads(text)
    except ValueError as err:
        raise SoftPromptError(f"{path}: its decomp metadata is not JSON ({err})") from None
    except RecursionError:
        raise SoftPromptError(f"{path}: the soft prompt's metadata is nested too deeply to read (decomp tune "
                              "writes a few levels): not a soft prompt written by decomp tune") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise SoftPromptError(f"{path}: metadata format {found!r}, expected {FORMAT!r}")
    for key in ("base_model", "tokenizer"):
        if not isinstance(meta.get(key), dict):
            raise SoftPromptError(f"{path}: its metadata lacks {key!r} (what it was trained on)")
    problem = _shape_problem(meta)
    if problem:
        raise SoftPromptError(f"{path}: its metadata's {problem}: not a soft prompt as decomp tune writes it")
    return meta


def _shape_problem(meta: dict[str, Any]) -> str:
    """The first field of `meta` of the wrong type, in words ('' when none): "'handler' is a
    string, expected an object (...)"."""
    for key, (kind, words, inner) in _SHAPE.items():
        if key not in meta:
            continue
        if not _is(meta[key], kind):
            return f"{key!r} is {json_kind(meta[key])}, expected {words}"
        for name, (inner_kind, inner_words) in inner.items():
            value = meta[key].get(name)
            if name in meta[key] and not _is(value, inner_kind):
                return f"'{key}.{name}' is {json_kind(value)}, expected {inner_words}"
    return ""


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def write_soft_prompt(path: str | os.PathLike, embeddings: np.ndarray, meta: Mapping[str, Any]) -> str:
    """Write `embeddings` (tokens x hidden) and `meta` (without format and n_tokens: they are
    set here) to `path` at once: a temporary file beside it, renamed over it, so a failed write
    leaves nothing half. Returns the file's sha256."""
    from safetensors.numpy import save

    embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 2 or not np.isfinite(embeddings).all():
        raise SoftPromptError("a soft prompt is a 2-D array of finite numbers")
    full = {"format": FORMAT, **meta, "n_tokens": int(embeddings.shape[0])}
    data = save({TENSOR: embeddings}, metadata={"decomp": json.dumps(full, sort_keys=True, allow_nan=False)})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, data)
    return hashlib.sha256(data).hexdigest()


def mismatch(soft: SoftPrompt, model: Mapping[str, Any], tokenizer: Mapping[str, Any]) -> str | None:
    """Why `soft` cannot serve a model of identity `model` (as `base_model` in the metadata)
    with tokenizer `tokenizer`, in words; None when it can. The hidden size is checked first
    (the tensor must fit), then the tokenizer, then the weights."""
    trained, vocab = soft.meta["base_model"], soft.meta["tokenizer"]
    if soft.hidden_size != model.get("hidden_size"):
        return (f"its embeddings are {soft.hidden_size} wide, the model's hidden size is "
                f"{model.get('hidden_size')} (trained for {trained.get('name')!r})")
    if vocab.get("sha256") != tokenizer.get("sha256"):
        return (f"it was trained with another tokenizer ({vocab.get('vocab_size')} tokens, sha256 "
                f"{str(vocab.get('sha256'))[:12]}), the model's has {tokenizer.get('vocab_size')} tokens, sha256 "
                f"{str(tokenizer.get('sha256'))[:12]}")
    if trained.get("sha256") != model.get("sha256"):
        return (f"it was trained for other weights ({trained.get('name')!r}, sha256 "
                f"{str(trained.get('sha256'))[:12]}), not {model.get('name')!r} (sha256 {str(model.get('sha256'))[:12]})")
    return None
