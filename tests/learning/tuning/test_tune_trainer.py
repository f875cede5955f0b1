"""The training loop and the file it writes, on a tiny randomly initialised Gemma 3 with the
bundled model's tokenizer: the loss falls, the file reads back with its metadata, a seed gives
the same prompt, a list of sizes keeps the best on validation, and a failure writes nothing."""
import math

import numpy as np
import pytest

pytest.importorskip("torch")

from decomp.handlers.soft_prompts import read_soft_prompt, write_soft_prompt  # noqa: E402
from decomp.learning.tuning.api import tune  # noqa: E402
from decomp.learning.tuning.base import Base  # noqa: E402
from decomp.learning.tuning.examples import TuneError, find_handler, read_examples  # noqa: E402
from decomp.learning.tuning.trainer import TrainOptions, encode_examples, train  # noqa: E402
from tests.learning.tuning.tuning_helpers import IDENTITY, ROWS, real_tokenizer, setup_files, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def base():
    import torch

    torch.set_num_threads(1)
    return Base(tiny_model(), real_tokenizer(), IDENTITY, "tiny")


def run(tmp_path, base, rows=ROWS, handler="capital", **options):
    program, data = setup_files(tmp_path, rows)
    out = tmp_path / "out.safetensors"
    settings = {"epochs": 2, "lr": 0.05, "batch_size": 2, "seed": 0, **options.pop("train", {})}
    tuned = tune(program, handler, data, out, TrainOptions(**settings), query="question", base=base, **options)
    return tuned, out


def test_the_target_tokens_are_split_from_the_prompts(tmp_path, base):
    program, data = setup_files(tmp_path)
    _, handler = find_handler(program, "capital")
    example = read_examples(data, handler, query="question")[0]
    [encoded] = encode_examples(base, [example])
    assert encoded.ids[:encoded.start] == tuple(base.encode(example.prompt))
    assert encoded.ids[0] == 2 and len(encoded.ids) > encoded.start


def test_the_loss_falls_over_a_few_steps(tmp_path, base):
    program, data = setup_files(tmp_path)
    _, handler = find_handler(program, "capital")
    examples = encode_examples(base, read_examples(data, handler, query="question")[:3])
    trained = train(base, examples, [], TrainOptions(sizes=(4,), epochs=8, lr=1.0, batch_size=3,
                                                     init_text="capital"))
    losses = trained.chosen.losses
    assert len(losses) == 8 and trained.chosen.steps == 8
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < losses[0] - 0.3, losses


def test_the_file_round_trips_with_its_metadata(tmp_path, base):
    tuned, out = run(tmp_path, base)
    soft = read_soft_prompt(out)
    assert soft.embeddings.shape == (8, 32) and soft.digest == tuned.sha256
    meta = soft.meta
    assert meta["base_model"] == IDENTITY[0] and meta["tokenizer"] == IDENTITY[1] and meta["n_tokens"] == 8
    assert meta["handler"]["name"] == "capital" and meta["handler"]["kind"] == "prompt"
    assert meta["handler"]["program"].endswith("p.decomp") and len(meta["handler"]["template_sha256"]) == 64
    training = meta["training"]
    assert (training["rows"], training["validation_rows"], training["seed"]) == (3, 1, 0)
    assert len(training["data_sha256"]) == 64 and training["chosen"] == 8 and training["steps"] == 4
    assert len(training["losses"]) == 2 and math.isclose(training["validation"], tuned.validation)
    assert training["sizes"]["8"]["stopped"] is None and training["options"]["tokens"] == [8]
    assert tuned.summary().startswith(f"{out}: 8 virtual tokens, validation loss ")


def test_the_same_seed_gives_the_same_embeddings(tmp_path, base):
    first = read_soft_prompt(run(tmp_path / "a", base)[1]).embeddings
    again = read_soft_prompt(run(tmp_path / "b", base)[1]).embeddings
    assert np.array_equal(first, again)


def test_a_list_of_sizes_keeps_the_best_validation_loss(tmp_path, base):
    tuned, out = run(tmp_path, base, train={"sizes": (1, 4, 2)})
    training = read_soft_prompt(out).meta["training"]
    losses = {int(size): figures["validation"] for size, figures in training["sizes"].items()}
    assert sorted(losses) == [1, 2, 4]
    best = min(losses, key=losses.get)
    assert tuned.n_tokens == best == training["chosen"] and read_soft_prompt(out).n_tokens == best


def test_a_score_handler_trains_without_validation_rows(tmp_path, base):
    tuned, out = run(tmp_path, base, handler="fluency", validation_split=0)
    meta = read_soft_prompt(out).meta
    assert meta["handler"]["kind"] == "score" and meta["training"]["validation_rows"] == 0
    assert meta["training"]["chosen_by"] == "last training loss" and tuned.validation is None
    assert "training loss" in tuned.summary()


def test_a_time_budget_stops_cleanly_and_writes_what_was_trained(tmp_path, base):
    tuned, out = run(tmp_path, base, train={"epochs": 1000, "max_seconds": 1.0})
    meta = read_soft_prompt(out).meta["training"]
    assert tuned.stopped == "max_seconds" == meta["stopped"] and meta["steps"] < 2000
    assert "--max-seconds" in tuned.summary()


def test_max_steps_stops_each_size(tmp_path, base):
    tuned, out = run(tmp_path, base, train={"sizes": (1, 2), "max_steps": 1})
    sizes = read_soft_prompt(out).meta["training"]["sizes"]
    assert [figures["steps"] for figures in sizes.values()] == [1, 1] and tuned.stopped == "max_steps"


def test_a_non_finite_loss_stops_at_its_step_and_writes_nothing(tmp_path):
    import torch

    model = tiny_model()
    with torch.no_grad():
        model.model.norm.weight.fill_(float("nan"))
    broken = Base(model, real_tokenizer(), IDENTITY, "tiny")
    out = tmp_path / "out.safetensors"
    write_soft_prompt(out, np.ones((2, 32), np.float32), {"base_model": {}, "tokenizer": {}})
    before = out.read_bytes()
    with pytest.raises(TuneError, match="not finite .* at step 1 of the 8-token soft prompt"):
        run(tmp_path, broken)
    assert out.read_bytes() == before  # an existing file stays as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.safetensors", "p.decomp", "train.jsonl"]


def test_bad_rows_stop_before_the_model_loads(tmp_path):
    program, data = setup_files(tmp_path, [{"question": "no target"}])

    def load(spec, scoring=False):
        raise AssertionError("the model was loaded")

    with pytest.raises(TuneError, match="no 'completion' field"):
        tune(program, "capital", data, tmp_path / "out.safetensors", TrainOptions(), load=load)
    assert not (tmp_path / "out.safetensors").exists()


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")
def test_the_loss_is_peft_prompt_tunings_for_the_same_embeddings(tmp_path, base):
    """The layout serving and peft share: the virtual tokens before every token, beginning-of-text
    included; the loss the mean over the target tokens."""
    import torch

    peft = pytest.importorskip("peft")
    from decomp.learning.tuning.trainer import batch_loss, initial_embeddings

    program, data = setup_files(tmp_path)
    _, handler = find_handler(program, "capital")
    [example] = encode_examples(base, read_examples(data, handler, query="question")[:1])
    soft = initial_embeddings(torch, base, "capital city", 3)
    with torch.no_grad():
        ours, count = batch_loss(torch, base.model, soft, [example])
        wrapped = peft.get_peft_model(tiny_model(), peft.PromptTuningConfig(task_type=peft.TaskType.CAUSAL_LM,
                                                                             num_virtual_tokens=3))
        wrapped.prompt_encoder["default"].embedding.weight.copy_(soft)
        ids = torch.tensor([example.ids])
        labels = ids.clone()
        labels[0, :example.start] = -100
        theirs = wrapped(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
    assert math.isclose((ours / count).item(), theirs.item(), rel_tol=1e-5)
