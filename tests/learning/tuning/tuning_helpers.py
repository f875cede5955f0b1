"""What the tuning tests share: a tiny randomly initialised Gemma 3 (the real architecture, 2
layers, 32 wide, the real vocabulary size so llama.cpp's tokenizer of the bundled model fits),
that tokenizer, a program with a prompt and a score handler, and rows to train on."""
import json
from pathlib import Path

import pytest

PROGRAM = '''handler capital = prompt(text="Q: What is the capital of France?\\nA: Paris\\n")
handler fluency = score(prefix="Country: {{ country }}\\nCapital:")
handler upper = python(function="decomp.programs.decomp.letters:words")
main capital
'''
ROWS = [
    {"question": "What is the capital of Italy?", "completion": " Rome", "country": "Italy"},
    {"question": "What is the capital of Spain?", "completion": " Madrid", "country": "Spain"},
    {"question": "What is the capital of Peru?", "completion": " Lima", "country": "Peru"},
    {"question": "What is the capital of Kenya?", "completion": " Nairobi", "country": "Kenya"},
]
IDENTITY = ({"name": "tiny", "architecture": "gemma3", "hidden_size": 32, "vocab_size": 262144, "sha256": "ab" * 32},
            {"vocab_size": 262144, "sha256": "cd" * 32})


def tiny_model(seed: int = 0):
    """A Gemma3ForCausalLM of the real architecture, randomly initialised (seeded; weights 10 times the usual spread, so that a soft prompt moves its
    outputs), float32."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    config = Gemma3TextConfig(vocab_size=262144, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=16,
                              max_position_embeddings=512, initializer_range=0.2)
    return Gemma3ForCausalLM(config).float()


def real_tokenizer():
    """llama.cpp's tokenizer of the bundled GGUF, or skip when the local model is not installed."""
    from decomp.runtime.models.base import ModelError
    from decomp.runtime.models.local import weights_path
    from decomp.learning.tuning.base import LlamaTokenizer

    pytest.importorskip("llama_cpp")
    try:
        return LlamaTokenizer(weights_path("gemma-3-270m"))
    except ModelError as err:
        pytest.skip(str(err))


def write_rows(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def setup_files(folder: Path, rows=ROWS) -> tuple[Path, Path]:
    """The program and a training file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "p.decomp"
    program.write_text(PROGRAM)
    return program, write_rows(folder / "train.jsonl", rows)
