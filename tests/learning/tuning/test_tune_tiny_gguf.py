"""`decomp tune` end to end on a real GGUF file, the tiny random Gemma 3 (`tiny_gguf`): the CLI
loads it in transformers, trains, and writes a soft prompt bound to that file; llama.cpp then
serves it through `LocalModel`, where it raises the likelihood of the targets it was trained on
(what transformers learned holds in the other engine), and a program runs with it. The load of
the file in transformers takes about a minute here (its GGUF reader over 262,144 tokens): slow."""
import asyncio
import json

import pytest

pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from decomp.handlers.soft_prompts import read_soft_prompt  # noqa: E402
from decomp.runtime.cli import main  # noqa: E402
from decomp.runtime.models.base import ModelSettings, Request  # noqa: E402
from decomp.runtime.models.local import LocalModel, gguf_identity  # noqa: E402

pytestmark = pytest.mark.slow

PROGRAM = ('handler answer = prompt(file="answer.j2", soft_prompt="answer.safetensors", max_tokens=4, stop=["\\n"])\n'
           'program ask(question) {\n    QS: [answer] #question\n}\nmain ask\n')
ROWS = [{"question": f"Is {word} a colour?", "completion": " yes" if colour else " no"}
        for word, colour in [("red", True), ("table", False), ("blue", True), ("spoon", False),
                             ("green", True), ("river", False)]]


def test_tune_on_a_gguf_file_then_serve_it_in_llama_cpp(tmp_path, tiny_gguf):
    (tmp_path / "p.decomp").write_text(PROGRAM)
    (tmp_path / "answer.j2").write_text("Question: {{ question }}\nAnswer:")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    result = CliRunner().invoke(main, ["tune", str(tmp_path / "p.decomp"), "--handler", "answer", "--input",
                                       str(tmp_path / "rows.jsonl"), "--model", f"local:{tiny_gguf}", "--tokens",
                                       "4", "--epochs", "20", "--lr", "0.05", "--validation-split", "0", "-q"])
    assert result.exit_code == 0, result.output
    soft = read_soft_prompt(tmp_path / "answer.safetensors")  # --out: the handler's soft_prompt= file
    model_id, tokenizer_id = gguf_identity(tiny_gguf)
    assert soft.meta["base_model"] == model_id and soft.meta["tokenizer"] == tokenizer_id
    assert soft.embeddings.shape == (4, model_id["hidden_size"])
    losses = soft.meta["training"]["losses"]  # per epoch
    assert len(losses) == 20 and losses[-1] < losses[0]

    model = LocalModel(str(tiny_gguf), ModelSettings(options=(("n_ctx", 256),)))
    try:
        gain = [asyncio.run(model.score(f"Question: {row['question']}\nAnswer:", row["completion"] + "\n", soft)).logprob
                - asyncio.run(model.score(f"Question: {row['question']}\nAnswer:", row["completion"] + "\n")).logprob
                for row in ROWS]
        assert sum(gain) > 1.0, gain  # llama.cpp reads the soft prompt as transformers trained it
        done = asyncio.run(model.complete(Request("Question: Is red a colour?\nAnswer:", max_tokens=4,
                                                  stop=("\n",), soft_prompt=soft)))
        assert done.prompt_tokens > soft.n_tokens
    finally:
        model.unload()

    run = CliRunner().invoke(main, ["run", str(tmp_path / "p.decomp"), "--model", f"local:{tiny_gguf}", "-q",
                                    "Is red a colour?"])
    assert run.exit_code == 0, run.output
