"""`tune`: one handler's soft prompt trained and written, as `decomp tune` does it.

The inputs are all read and checked (the program, the handler, every row, the split) before
the model loads; the file is written once, at the end, atomically: a run that fails writes
nothing and leaves a file already at `out` as it was.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from decomp.handlers.soft_prompts import SoftPromptError, read_soft_prompt, write_soft_prompt
from decomp.handlers.sandbox.trust import NO_TRUST, Trust
from decomp.learning.tuning.base import Base, load_base
from decomp.learning.tuning.examples import (
    TuneError,
    declared_soft_prompt,
    find_handler,
    prompt_source,
    read_examples,
    split_examples,
    template_sha256,
)
from decomp.learning.tuning.trainer import Progress, TrainOptions, Trained, encode_examples, train

__all__ = ["Tuned", "tune"]


@dataclass(frozen=True)
class Tuned:
    """What `tune` wrote: the file, its sha256, the size kept, its validation loss (None: no
    validation examples; `loss` is then its last training loss) and why it stopped early."""

    path: Path
    sha256: str
    n_tokens: int
    validation: float | None
    loss: float
    stopped: str | None

    def summary(self) -> str:
        """One line: the file, the size, the loss it was kept for."""
        what = f"validation loss {self.validation:.4f}" if self.validation is not None \
            else f"training loss {self.loss:.4f} (no validation rows)"
        early = {"max_steps": ", stopped at --max-steps", "max_seconds": ", stopped at --max-seconds"}
        return f"{self.path}: {self.n_tokens} virtual tokens, {what}{early.get(self.stopped, '')}"


def tune(program: str | Path, handler: str, data: str | Path, out: str | Path | None, options: TrainOptions, *,
         model: str = "local:gemma-3-270m", validation: str | Path | None = None, validation_split: float = 0.2,
         query: str | None = None, target: str = "completion", init_text: str | None = None,
         recorded: Mapping[str, Any] | None = None, base: Base | None = None,
         load: Callable[[str, bool], Base] = load_base, progress: Progress | None = None,
         trust: Trust = NO_TRUST) -> Tuned:
    """Train `handler` of `program` on the rows of `data` and write its soft prompt to `out`
    (None: the file the handler's `soft_prompt=` option names).

    `validation` is a file of held-out rows; without one, `validation_split` of the rows (a
    seeded draw) is held out. `init_text` starts each soft prompt (None: the handler's prompt
    source, its template, few-shot text or score prefix; when that is empty, the first training
    example's text). `recorded` is the options to record (the command line's); `base` a model
    already loaded (else `load(model)` loads it once the inputs are checked); `trust` what the
    program may reach beyond its folder (`--trust`, `--allow-root`). A `TuneError`
    says what is wrong, and nothing is written."""
    program_path, found = find_handler(program, handler, trust)
    rows = read_examples(data, found, query=query, target=target)
    if validation is not None:
        training, held = rows, read_examples(validation, found, query=query, target=target)
    else:
        training, held = split_examples(rows, validation_split, options.seed)
    out = Path(out) if out is not None else declared_soft_prompt(found)
    if out is None:
        raise TuneError(f"[{handler}] has no soft_prompt= option to write to: give --out FILE.safetensors")
    if out.is_dir():
        raise TuneError(f"--out {out} is a folder: give the soft prompt's file name (FILE.safetensors)")
    _check_replaceable(out)
    text = init_text if init_text is not None else (prompt_source(found) or training[0].prompt + training[0].target)
    options = TrainOptions(**{**options.__dict__, "init_text": text})
    base = base if base is not None else load(model, found.kind == "score")
    trained = train(base, encode_examples(base, training), encode_examples(base, held), options, progress)
    chosen = trained.chosen
    meta = _metadata(base, program, program_path, found, data, validation, training, held, options, trained,
                     recorded)
    digest = write_soft_prompt(out, chosen.embeddings, meta)
    return Tuned(out, digest, chosen.n_tokens, chosen.validation, chosen.losses[-1] if chosen.losses else float("nan"),
                 chosen.stopped)


def _check_replaceable(out: Path) -> None:
    """A `TuneError` when `out` holds something other than a soft prompt: only a soft prompt
    (one trained before) is replaced, never a file decomp did not write."""
    if not out.exists() and not out.is_symlink():
        return
    try:
        if not out.is_file():
            raise SoftPromptError("not a plain file")
        read_soft_prompt(out)
    except SoftPromptError as err:
        raise TuneError(f"--out {out} holds something other than a soft prompt ({err}): nothing is overwritten; "
                        "give another --out, or move it away") from None


def _program_name(given: str | Path, path: Path) -> str:
    """How the metadata names the program: a bundled program by its name, a file by its path
    from the current folder when it is below it, else its absolute path."""
    if not Path(given).exists():
        return str(given)
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _metadata(base: Base, given, program_path: Path, handler, data, validation, training, held,
              options: TrainOptions, trained: Trained, recorded) -> dict[str, Any]:
    model, tokenizer = base.identity
    chosen = trained.chosen
    sizes = {str(r.n_tokens): {"losses": r.losses, "validation": r.validation, "steps": r.steps,
                               "seconds": round(r.seconds, 3), "stopped": r.stopped} for r in trained.sizes}
    return {
        "base_model": dict(model),
        "tokenizer": dict(tokenizer),
        "handler": {"program": _program_name(given, program_path), "name": handler.name, "kind": handler.kind,
                    "template_sha256": template_sha256(handler)},
        "training": {
            "data_sha256": _sha256(data),
            "validation_sha256": _sha256(validation) if validation is not None else None,
            "rows": len(training), "validation_rows": len(held), "seed": options.seed,
            "options": dict(recorded) if recorded is not None else _options(options),
            "init_text_sha256": hashlib.sha256(options.init_text.encode("utf-8", "surrogatepass")).hexdigest(),
            "losses": chosen.losses, "validation": chosen.validation,
            "chosen": chosen.n_tokens, "chosen_by": "validation loss" if held else "last training loss",
            "sizes": sizes, "stopped": chosen.stopped,
            "seconds": round(sum(r.seconds for r in trained.sizes), 3),
            "steps": sum(r.steps for r in trained.sizes),
        },
    }


def _options(options: TrainOptions) -> dict[str, Any]:
    return {"tokens": list(options.sizes), "epochs": options.epochs, "max_steps": options.max_steps,
            "max_seconds": options.max_seconds, "lr": options.lr, "batch_size": options.batch_size,
            "seed": options.seed}
