"""The training loop: soft prompts of one or more sizes for one set of examples, the best kept.

Each size is trained from its own start: the token embeddings of the initial text, repeated
or cut to the size; Adam on the soft prompt alone (the model is frozen); batches of a seeded
shuffle, each epoch; the loss the mean cross-entropy of the target tokens (the prompt's and
padding's positions are not counted). The virtual tokens come before every other token,
beginning-of-text included, as serving puts them. Logits are computed at the target positions
only (the final hidden states there times the output embeddings): 262,144 logits per target
token, not per token of the text.

A size's validation loss (the same mean, over the validation examples, at the end) picks the
size kept; with no validation examples, its last epoch's training loss does. torch is imported
here, when a function runs.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from decomp.learning.tuning.base import Base
from decomp.learning.tuning.examples import Example, TuneError

__all__ = ["Encoded", "SizeResult", "TrainOptions", "Trained", "encode_examples", "train"]


@dataclass(frozen=True)
class TrainOptions:
    """How to train: `sizes` (virtual tokens; one soft prompt each), `epochs`, `max_steps` (per
    size; None: all the epochs), `max_seconds` (all sizes together, shared out evenly; None: no
    limit), Adam's `lr`, `batch_size`, `seed` and `init_text` (the text whose token embeddings
    start each soft prompt)."""

    sizes: tuple[int, ...] = (8,)
    epochs: int = 3
    max_steps: int | None = None
    max_seconds: float | None = None
    lr: float = 0.01
    batch_size: int = 4
    seed: int = 0
    init_text: str = ""


@dataclass(frozen=True)
class Encoded:
    """An example as token ids: `ids` (beginning-of-text first), the target from `start` on."""

    ids: tuple[int, ...]
    start: int
    where: str


@dataclass
class SizeResult:
    """One size's soft prompt and its figures: mean training loss per epoch (the last maybe
    partial), validation loss (None without validation examples), steps, seconds, and why it
    stopped early ("max_steps", "max_seconds"; None: every epoch ran)."""

    n_tokens: int
    embeddings: np.ndarray = field(repr=False)
    losses: list[float] = field(default_factory=list)
    validation: float | None = None
    steps: int = 0
    seconds: float = 0.0
    stopped: str | None = None

    @property
    def rank(self) -> float:
        """What picks the size kept: the validation loss, else the last training loss."""
        value = self.validation if self.validation is not None else (self.losses[-1] if self.losses else math.inf)
        return value if math.isfinite(value) else math.inf


@dataclass
class Trained:
    """Every size's result and the one kept (the lowest `rank`, the smaller size on a tie)."""

    sizes: list[SizeResult]

    @property
    def chosen(self) -> SizeResult:
        return min(self.sizes, key=lambda r: (r.rank, r.n_tokens))


#: progress(n_tokens, step, total_steps, loss): after each step.
Progress = Callable[[int, int, int, float], None]


def encode_examples(base: Base, examples: Sequence[Example]) -> list[Encoded]:
    """Each example's tokens, the target's split from the prompt's as `LocalModel._score` splits
    them (where the tokens of prompt + target first differ from the prompt's own); a `TuneError`
    names a row whose target adds no token."""
    encoded = []
    for example in examples:
        head, ids = base.encode(example.prompt), base.encode(example.prompt + example.target)
        start = max(1, next((i for i, (a, b) in enumerate(zip(head, ids)) if a != b), len(head)))
        if start >= len(ids):
            raise TuneError(f"{example.where}: the target {example.target!r} adds no token to the prompt")
        encoded.append(Encoded(tuple(ids), start, example.where))
    return encoded


def train(base: Base, training: Sequence[Encoded], validation: Sequence[Encoded], options: TrainOptions,
          progress: Progress | None = None) -> Trained:
    """Train one soft prompt per size in `options.sizes` on `training`, each scored on
    `validation`; a `TuneError` when a loss is not finite (naming the step)."""
    import torch

    if not training:
        raise TuneError("no training examples")
    model = base.model
    model.eval()  # no dropout: the same seed gives the same prompt
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    began, results = time.monotonic(), []
    for index, size in enumerate(options.sizes):
        deadline = None
        if options.max_seconds is not None:
            left = options.max_seconds - (time.monotonic() - began)
            deadline = time.monotonic() + max(0.0, left) / (len(options.sizes) - index)
        results.append(_train_size(torch, base, size, training, validation, options, deadline, progress))
    return Trained(results)


def total_steps(n_examples: int, options: TrainOptions) -> int:
    """The steps one size takes when no time limit stops it."""
    steps = options.epochs * math.ceil(n_examples / options.batch_size)
    return steps if options.max_steps is None else min(steps, options.max_steps)


def _train_size(torch, base: Base, size: int, training: Sequence[Encoded], validation: Sequence[Encoded],
                options: TrainOptions, deadline: float | None, progress: Progress | None) -> SizeResult:
    torch.manual_seed(options.seed)
    started = time.monotonic()
    soft = torch.nn.Parameter(initial_embeddings(torch, base, options.init_text, size))
    optimizer = torch.optim.Adam([soft], lr=options.lr)
    result = SizeResult(size, np.empty((0, 0), np.float32))
    shuffle, order = random.Random(options.seed), list(range(len(training)))
    planned = total_steps(len(training), options)
    for _ in range(options.epochs):
        shuffle.shuffle(order)
        summed = counted = 0.0
        for first in range(0, len(order), options.batch_size):
            result.stopped = _stop(result.steps, options, deadline)
            if result.stopped:
                break
            batch = [training[i] for i in order[first:first + options.batch_size]]
            loss, count = batch_loss(torch, base.model, soft, batch)
            result.steps += 1
            if not torch.isfinite(loss):
                raise TuneError(f"the training loss is not finite ({loss.item()}) at step {result.steps} of the "
                                f"{size}-token soft prompt: nothing written (try a lower --lr)")
            optimizer.zero_grad()
            (loss / count).backward()
            optimizer.step()
            summed, counted = summed + loss.item(), counted + count
            if progress is not None:
                progress(size, result.steps, planned, loss.item() / count)
        if counted:
            result.losses.append(summed / counted)
        if result.stopped:
            break
    result.validation = evaluate(torch, base.model, soft, validation, options.batch_size, size) if validation else None
    result.embeddings = soft.detach().cpu().numpy().astype(np.float32, copy=True)
    result.seconds = time.monotonic() - started
    return result


def _stop(steps: int, options: TrainOptions, deadline: float | None) -> str | None:
    if options.max_steps is not None and steps >= options.max_steps:
        return "max_steps"
    if deadline is not None and time.monotonic() >= deadline:
        return "max_seconds"
    return None


def initial_embeddings(torch, base: Base, text: str, size: int):
    """The input embeddings of `text`'s tokens (beginning-of-text left out), repeated or cut
    to `size` rows: where a soft prompt starts."""
    ids = base.encode(text)[1:] or base.encode(" ")[1:] or base.encode("")[:1]
    repeated = (ids * math.ceil(size / len(ids)))[:size]
    with torch.no_grad():
        return base.model.get_input_embeddings()(torch.tensor(repeated)).detach().clone().float()


def batch_loss(torch, model: Any, soft, batch: Sequence[Encoded]):
    """The summed cross-entropy of the batch's target tokens after `soft`, and their count."""
    width = max(len(e.ids) for e in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), soft.shape[0] + width), dtype=torch.long)
    rows, columns, targets = [], [], []
    for row, example in enumerate(batch):
        ids[row, :len(example.ids)] = torch.tensor(example.ids)
        mask[row, :soft.shape[0] + len(example.ids)] = 1
        for position in range(example.start, len(example.ids)):
            rows.append(row)
            columns.append(soft.shape[0] + position - 1)  # the state that predicts this token
            targets.append(example.ids[position])
    embedded = model.get_input_embeddings()(ids)
    inputs = torch.cat([soft.unsqueeze(0).expand(len(batch), -1, -1).to(embedded.dtype), embedded], dim=1)
    hidden = model.model(inputs_embeds=inputs, attention_mask=mask).last_hidden_state
    logits = model.get_output_embeddings()(hidden[torch.tensor(rows), torch.tensor(columns)]).float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(targets), reduction="sum")
    return loss, len(targets)


def evaluate(torch, model: Any, soft, examples: Sequence[Encoded], batch_size: int, size: int) -> float:
    """The mean cross-entropy per target token of `examples` after `soft`."""
    summed = counted = 0
    with torch.no_grad():
        for first in range(0, len(examples), batch_size):
            loss, count = batch_loss(torch, model, soft, examples[first:first + batch_size])
            summed, counted = summed + loss.item(), counted + count
    value = summed / counted
    if not math.isfinite(value):
        raise TuneError(f"the validation loss of the {size}-token soft prompt is not finite ({value}): nothing written")
    return value
