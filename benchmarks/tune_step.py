"""Benchmark: seconds per `decomp tune` training step and the memory it takes, on the real model.

Loads the model as `decomp tune` does (`load_base`: the bundled Gemma 3 270M GGUF dequantised
into transformers, float32), then times STEPS training steps (after one warm-up step) of a soft
prompt of TOKENS virtual tokens on BATCH rows of LENGTH tokens each (random ids), the last
TARGET tokens of each the target, with `--threads` torch threads. Each step is the trainer's own
(`batch_loss`: logits at the target positions only, then backward and Adam); with `--compare`,
the same steps computing the logits of every position too (the usual causal-LM loss), for what
the selection saves. Peak memory is the process's high-water mark (VmHWM) reset after the load.
`--tiny` uses a 2-layer random model of the same architecture instead (seconds, no download).

Prints one JSON line: model, batch, length, target, tokens, threads, load_s, step_s (median),
steps_s (each), peak_rss_mb (during the steps), rss_after_load_mb, and with --compare
full_logits_step_s, full_logits_peak_rss_mb.

    python benchmarks/tune_step.py [--batch 4] [--length 100] [--target 10] [--tokens 8] [--steps 3]
                                   [--threads 2] [--compare] [--tiny] [--model local:gemma-3-270m]
"""
from __future__ import annotations

import random
import statistics
import time

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import emit, parser  # noqa: E402


def memory_mb(field: str) -> float:
    """A figure of /proc/self/status (VmRSS, VmHWM), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> None:
    """Start the high-water mark again from the resident set now (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def tiny_base():
    """A random 2-layer Gemma 3 of the real vocabulary size (no weights read)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from decomp.learning.tuning.base import Base

    config = Gemma3TextConfig(vocab_size=262144, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=32)
    return Base(Gemma3ForCausalLM(config), lambda text: [2] + [1000 + b for b in text.encode()], ({}, {}), "tiny")


def full_logits_loss(torch, model, soft, batch):
    """The causal-LM loss with every position's logits (what `batch_loss` avoids)."""
    ids = torch.tensor([e.ids for e in batch])
    labels = torch.full((len(batch), soft.shape[0] + ids.shape[1]), -100)
    for row, example in enumerate(batch):
        labels[row, soft.shape[0] + example.start:] = ids[row, example.start:]
    inputs = torch.cat([soft.unsqueeze(0).expand(len(batch), -1, -1), model.get_input_embeddings()(ids)], dim=1)
    logits = model(inputs_embeds=inputs).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                             reduction="sum")
    return loss, int((labels != -100).sum())


def time_steps(torch, loss_fn, model, soft, batch, steps: int) -> tuple[list[float], float]:
    """Seconds of each step after one warm-up, and the peak RSS (MiB) over them."""
    optimizer = torch.optim.Adam([soft], lr=0.01)
    reset_peak()
    seconds = []
    for step in range(steps + 1):
        began = time.perf_counter()
        loss, count = loss_fn(torch, model, soft, batch)
        optimizer.zero_grad()
        (loss / count).backward()
        optimizer.step()
        if step:
            seconds.append(time.perf_counter() - began)
    return seconds, memory_mb("VmHWM")


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--target", type=int, default=10)
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="local:gemma-3-270m")
    p.add_argument("--compare", action="store_true")
    p.add_argument("--tiny", action="store_true")
    args = p.parse_args(argv)

    import torch

    from decomp.learning.tuning.base import load_base
    from decomp.learning.tuning.trainer import Encoded, batch_loss, initial_embeddings

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    began = time.perf_counter()
    base = tiny_base() if args.tiny else load_base(args.model)
    load_s = time.perf_counter() - began
    model = base.model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    rng = random.Random(args.seed)
    batch = [Encoded(tuple([2] + [rng.randrange(1000, 200000) for _ in range(args.length - 1)]),
                     args.length - args.target, f"row {i}") for i in range(args.batch)]
    record = {"benchmark": "tune_step", "model": "tiny" if args.tiny else args.model, "batch": args.batch,
              "length": args.length, "target": args.target, "tokens": args.tokens, "threads": args.threads,
              "load_s": round(load_s, 2), "rss_after_load_mb": round(memory_mb("VmRSS"), 1)}
    soft = torch.nn.Parameter(initial_embeddings(torch, base, " the", args.tokens))
    seconds, peak = time_steps(torch, batch_loss, model, soft, batch, args.steps)
    record.update(step_s=round(statistics.median(seconds), 3), steps_s=[round(s, 3) for s in seconds],
                  peak_rss_mb=round(peak, 1))
    if args.compare:
        seconds, peak = time_steps(torch, full_logits_loss, model, soft, batch, args.steps)
        record.update(full_logits_step_s=round(statistics.median(seconds), 3), full_logits_peak_rss_mb=round(peak, 1))
    return emit(record)


if __name__ == "__main__":
    main()
