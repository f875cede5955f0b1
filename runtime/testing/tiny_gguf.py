"""A tiny, randomly initialised Gemma 3 written as a real GGUF file, for fast tests of code that
runs the bundled model both ways: trained with transformers (which reads GGUF) and served by
llama.cpp.

    path = write_tiny_gemma3(tmp / "tiny.gguf", seed=0)      # about 75 MB, a few seconds
    model = build_tiny_gemma3(seed=0)                         # the same weights, in memory

The model has the bundled model's architecture (its config as transformers reads it from the
bundled GGUF: rope thetas, `query_pre_attn_scalar`, no softcapping, the layer-types pattern of
five sliding-window layers then one full-attention layer) and its vocabulary and tokenizer (the
bundled file's `tokenizer.*` metadata copied byte for byte, 262144 tokens), with small sizes:
hidden 64, 6 layers (so one full-attention layer, as in the real pattern), 2 heads, 1 kv head.
The head size stays the real one, 256: transformers reads no `query_pre_attn_scalar` from a
GGUF file (it keeps the config's default, 256) while llama.cpp scales queries by
1/sqrt(head_dim), so the two engines agree only when head_dim is 256.

The tensors are written as llama.cpp's converter (convert_hf_to_gguf.py, Gemma3Model) writes
them: under llama.cpp's names, the RMSNorm weights stored as (1 + w) (transformers' GGUF loader
subtracts 1 again), the output head tied to `token_embd.weight`; all in float32 (F32), so both
engines compute with the same numbers.

gguf, torch and transformers are imported inside the functions: the module imports without them.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

#: transformers' parameter names (a layer's with "N" for its index) -> llama.cpp's tensor names.
TENSOR_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "model.layers.N.input_layernorm.weight": "blk.N.attn_norm.weight",
    "model.layers.N.self_attn.q_proj.weight": "blk.N.attn_q.weight",
    "model.layers.N.self_attn.k_proj.weight": "blk.N.attn_k.weight",
    "model.layers.N.self_attn.v_proj.weight": "blk.N.attn_v.weight",
    "model.layers.N.self_attn.o_proj.weight": "blk.N.attn_output.weight",
    "model.layers.N.self_attn.q_norm.weight": "blk.N.attn_q_norm.weight",
    "model.layers.N.self_attn.k_norm.weight": "blk.N.attn_k_norm.weight",
    "model.layers.N.post_attention_layernorm.weight": "blk.N.post_attention_norm.weight",
    "model.layers.N.pre_feedforward_layernorm.weight": "blk.N.ffn_norm.weight",
    "model.layers.N.mlp.gate_proj.weight": "blk.N.ffn_gate.weight",
    "model.layers.N.mlp.up_proj.weight": "blk.N.ffn_up.weight",
    "model.layers.N.mlp.down_proj.weight": "blk.N.ffn_down.weight",
    "model.layers.N.post_feedforward_layernorm.weight": "blk.N.post_ffw_norm.weight",
}

#: The `gemma3.*` keys of the bundled file and the config attribute each is written from.
ARCH_KEYS = {
    "gemma3.context_length": ("max_position_embeddings", "uint32"),
    "gemma3.embedding_length": ("hidden_size", "uint32"),
    "gemma3.block_count": ("num_hidden_layers", "uint32"),
    "gemma3.feed_forward_length": ("intermediate_size", "uint32"),
    "gemma3.attention.head_count": ("num_attention_heads", "uint32"),
    "gemma3.attention.head_count_kv": ("num_key_value_heads", "uint32"),
    "gemma3.attention.key_length": ("head_dim", "uint32"),
    "gemma3.attention.value_length": ("head_dim", "uint32"),
    "gemma3.attention.layer_norm_rms_epsilon": ("rms_norm_eps", "float32"),
    "gemma3.attention.sliding_window": ("sliding_window", "uint32"),
    "gemma3.rope.freq_base": ("rope_theta", "float32"),
}


def gguf_name(hf_name: str) -> str:
    """llama.cpp's name for a transformers parameter of Gemma3ForCausalLM."""
    parts = hf_name.split(".")
    if len(parts) > 3 and parts[1] == "layers":
        index = parts[2]
        return TENSOR_NAMES[".".join(parts[:2] + ["N"] + parts[3:])].replace("N", index, 1)
    return TENSOR_NAMES[hf_name]


def _reference_path(reference: str | Path | None) -> Path:
    if reference is not None:
        return Path(reference)
    from decomp.runtime.models.local import DEFAULT, weights_path

    return weights_path(DEFAULT)


# GGUF metadata value types (gguf.GGUFValueType): the fixed-size ones and their struct formats
_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8",
          11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9


def read_metadata(path: str | Path) -> dict[str, tuple[int, int | None, Any]]:
    """A GGUF file's metadata, `{key: (type, array item type or None, value)}` (the types
    gguf.GGUFValueType's numbers), strings as their bytes, numeric arrays as lists."""
    return read_gguf(path)[0]


def read_tensors(path: str | Path) -> dict[str, tuple[tuple[int, ...], int]]:
    """A GGUF file's tensor table, `{name: (shape as ggml lists it, fastest-moving first; ggml
    type number)}`, in the file's order."""
    return read_gguf(path)[1]


def read_gguf(path: str | Path) -> tuple[dict, dict]:
    """`(read_metadata(path), read_tensors(path))`, read once for each version of the file. A
    reader of its own: gguf.GGUFReader takes seconds (tens of seconds on a loaded machine) over
    a 262144-token vocabulary, this one a fraction of a second."""
    stat = Path(path).stat()
    return _read_gguf(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read_gguf(path: str, _mtime_ns: int, _size: int) -> tuple[dict, dict]:
    import mmap
    import struct

    import numpy as np

    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as blob:
        magic, version, tensor_count, count = struct.unpack_from("<4sIQQ", blob, 0)
        if magic != b"GGUF" or version not in (2, 3):
            raise ValueError(f"{path} is not a GGUF v2/v3 file")
        pos = 24

        def string(pos: int) -> tuple[bytes, int]:
            (size,) = struct.unpack_from("<Q", blob, pos)
            return blob[pos + 8:pos + 8 + size], pos + 8 + size

        def scalar(kind: int, pos: int) -> tuple[Any, int]:
            if kind == _STRING:
                return string(pos)
            fmt = "<" + _FORMATS[kind]
            return struct.unpack_from(fmt, blob, pos)[0], pos + struct.calcsize(fmt)

        metadata = {}
        for _ in range(count):
            key, pos = string(pos)
            (kind,) = struct.unpack_from("<I", blob, pos)
            pos += 4
            if kind != _ARRAY:
                value, pos = scalar(kind, pos)
                metadata[key.decode()] = (kind, None, value)
                continue
            item, n = struct.unpack_from("<IQ", blob, pos)
            pos += 12
            if item in _NUMPY:
                dtype = np.dtype(_NUMPY[item])
                values = np.frombuffer(blob[pos:pos + n * dtype.itemsize], dtype=dtype)
                pos += n * dtype.itemsize
                value = values.astype(bool).tolist() if item == 7 else values.tolist()
            else:
                value = []
                for _ in range(n):
                    element, pos = scalar(item, pos)
                    value.append(element)
            metadata[key.decode()] = (kind, item, value)
        tensors = {}
        for _ in range(tensor_count):
            name, pos = string(pos)
            (dims,) = struct.unpack_from("<I", blob, pos)
            shape = struct.unpack_from(f"<{dims}Q", blob, pos + 4)
            ggml_type, _offset = struct.unpack_from("<IQ", blob, pos + 4 + 8 * dims)
            pos += 4 + 8 * dims + 12
            tensors[name.decode()] = (tuple(shape), ggml_type)
        return metadata, tensors


def reference_config(reference: str | Path | None = None):
    """The reference (bundled) model's Gemma3TextConfig as transformers' GGUF loader
    (modeling_gguf_pytorch_utils.load_gguf_checkpoint) builds it: the file's `gemma3.*` and
    `tokenizer.ggml.*_token_id` keys renamed by transformers' own table (GGUF_CONFIG_MAPPING),
    the vocabulary size the number of tokens, the rest Gemma3TextConfig's defaults (the loader
    reads nothing else for gemma3: rope_local_base_freq, query_pre_attn_scalar, the layer types
    and softcapping are the defaults, as they are when it loads the file this module writes)."""
    from transformers import Gemma3TextConfig
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    values = {}
    metadata = read_metadata(_reference_path(reference))
    for key, (_kind, _item, value) in metadata.items():
        prefix, _, name = key.partition(".")
        rename = GGUF_CONFIG_MAPPING.get(prefix, {}).get(name) if prefix in ("gemma3", "tokenizer") else None
        if rename is not None and rename != -1:
            values[rename] = value
    values.setdefault("vocab_size", len(metadata["tokenizer.ggml.tokens"][2]))
    return Gemma3TextConfig(**values)


def tiny_config(*, hidden: int = 64, layers: int = 6, heads: int = 2, kv_heads: int = 1,
                head_dim: int = 256, intermediate: int = 128, sliding_window: int | None = None,
                reference: str | Path | None = None):
    """The bundled model's config with small sizes (see the module's docstring)."""
    from transformers import Gemma3TextConfig

    real = reference_config(reference)
    values = real.to_dict()
    for key in ("layer_types", "_name_or_path", "_model_name_or_path", "architectures",
                "transformers_version", "dtype", "torch_dtype"):
        values.pop(key, None)
    values.update(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, head_dim=head_dim, intermediate_size=intermediate)
    if sliding_window is not None:
        values["sliding_window"] = sliding_window
    config = Gemma3TextConfig(**values)
    pattern = getattr(real, "_sliding_window_pattern", 6)
    # the real model's pattern (llama.cpp hard-codes it for gemma3: every 6th layer is global)
    config.layer_types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                          for i in range(layers)]
    return config


def build_tiny_gemma3(*, seed: int = 0, hidden: int = 64, layers: int = 6, heads: int = 2,
                      kv_heads: int = 1, head_dim: int = 256, intermediate: int = 128,
                      sliding_window: int | None = None, reference: str | Path | None = None):
    """A Gemma3ForCausalLM in float32 with random weights drawn from `seed` (the same weights
    for the same arguments): linear layers N(0, 1/fan_in); the RMSNorm weights N(0, 0.1^2), so
    the (1 + w) convention is exercised; the token embedding N(0, 0.1^2), so the layers' outputs
    outweigh a token's own embedding in the residual stream (else the tied head predicts the
    input token again); the final norm's weights N(4, 0.1^2), a gain of about 5 that makes the
    tied head's logits vary by about 4 (distributions neither flat nor one-hot)."""
    import torch
    from transformers import Gemma3ForCausalLM

    config = tiny_config(hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                         head_dim=head_dim, intermediate=intermediate,
                         sliding_window=sliding_window, reference=reference)
    model = Gemma3ForCausalLM(config).to(torch.float32).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():  # the tied lm_head is listed once, as embed_tokens
            mean, std = 0.0, 0.1 if name.endswith("norm.weight") else param.shape[1] ** -0.5
            if name == "model.embed_tokens.weight":
                std = 0.1
            elif name == "model.norm.weight":
                mean = 4.0
            param.copy_(mean + std * torch.randn(param.shape, generator=generator, dtype=torch.float32))
    return model


def write_gemma3_gguf(model, path: str | Path, *, reference: str | Path | None = None) -> Path:
    """Write a Gemma3ForCausalLM to `path` as llama.cpp's converter would, with the reference
    file's (the bundled model's) tokenizer metadata; every tensor F32."""
    import gguf
    import numpy as np

    ref = str(_reference_path(reference))
    config = model.config
    path = Path(path)
    part = path.with_name(path.name + ".part")
    writer = gguf.GGUFWriter(str(part), "gemma3")
    writer.add_type("model")
    writer.add_name("tiny random Gemma 3")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    metadata = read_metadata(ref)
    missing = [key for key in metadata if key.startswith("gemma3.") and key not in ARCH_KEYS]
    if missing:
        raise ValueError(f"the reference file has gemma3 keys this writer does not know: {missing}")
    for key, (attribute, kind) in ARCH_KEYS.items():
        value = _rope_theta(config) if attribute == "rope_theta" else getattr(config, attribute)
        getattr(writer, f"add_{kind}")(key, value)
    for key, (kind, item, value) in metadata.items():  # copied as they are
        if key.startswith("tokenizer."):
            writer.add_key_value(key, value, gguf.GGUFValueType(kind),
                                 sub_type=None if item is None else gguf.GGUFValueType(item))
    state = model.state_dict()
    tensors = {}
    for name, tensor in state.items():
        if name == "lm_head.weight":  # tied to the token embedding: llama.cpp reuses token_embd
            continue
        array = tensor.detach().to("cpu").float().numpy()
        if name.endswith("norm.weight"):
            array = array + np.float32(1.0)  # Gemma's RMSNorm scales by (1 + w); llama.cpp by w
        tensors[gguf_name(name)] = np.ascontiguousarray(array)
    for name in sorted(tensors, key=_tensor_order):
        writer.add_tensor(name, tensors[name])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(part, path)
    return path


def _rope_theta(config) -> float:
    """The full-attention layers' rope theta (transformers 5: rope_parameters; 4.x: rope_theta)."""
    parameters = getattr(config, "rope_parameters", None)
    if parameters and "full_attention" in parameters:
        return parameters["full_attention"]["rope_theta"]
    return config.rope_theta


def _tensor_order(name: str) -> tuple:
    parts = name.split(".")
    return (1, int(parts[1]), name) if parts[0] == "blk" else (0, 0, name)


def write_tiny_gemma3(path: str | Path, *, seed: int = 0, hidden: int = 64, layers: int = 6,
                      heads: int = 2, kv_heads: int = 1, head_dim: int = 256,
                      intermediate: int = 128, sliding_window: int | None = None,
                      reference: str | Path | None = None) -> Path:
    """Build `build_tiny_gemma3(...)` and write it to `path` (see `write_gemma3_gguf`); returns
    the path. `reference` is the GGUF file whose config and tokenizer are copied (default: the
    bundled Gemma 3 270M)."""
    model = build_tiny_gemma3(seed=seed, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                              head_dim=head_dim, intermediate=intermediate,
                              sliding_window=sliding_window, reference=reference)
    return write_gemma3_gguf(model, path, reference=reference)
