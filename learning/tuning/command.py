"""`decomp tune`: the command line of soft-prompt tuning, a built-in plugin (the plugin table's
`register_commands`). Importing it imports no torch: the training does, when it runs."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

import click

from decomp.handlers.plugins import hookimpl
from decomp.handlers.soft_prompts import MAX_TOKENS
from decomp.handlers.sandbox.trust import Trust
from decomp.runtime.engine.loader import load_plugin
from decomp.learning.tuning.trainer import Progress, TrainOptions

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
#: The parameters recorded under their option's name (`--input`, `--tokens`).
_CLI_NAMES = {"data": "input", "sizes": "tokens"}


@hookimpl
def register_commands(cli):
    cli.add_command(tune_command)


def _sizes(ctx, param, value: str) -> tuple[int, ...]:
    """--tokens 8 or 8,16,32: positive sizes, each once, in the order given."""
    try:
        sizes = tuple(dict.fromkeys(int(part) for part in value.split(",")))
    except ValueError:
        raise click.BadParameter(f"{value!r}: a number of virtual tokens, or a comma list (8,16,32)") from None
    if not all(0 < size <= MAX_TOKENS for size in sizes):
        raise click.BadParameter(f"{value!r}: each size is 1 to {MAX_TOKENS} virtual tokens")
    return sizes


@click.command("tune")
@click.argument("program")
@click.option("--handler", "handler", required=True, help="The prompt or score handler to train a soft prompt for.")
@click.option("--input", "data", required=True, type=_FILE, help="Training rows (JSONL): each row's fields are the "
              "handler's inputs.")
@click.option("--out", type=click.Path(path_type=Path), help="The soft prompt file to write (FILE.safetensors); "
              "default: the file the handler's soft_prompt= option names.")
@click.option("--model", default="local:gemma-3-270m", show_default=True,
              help="The model to tune on: local:gemma-3-270m or local:/path/to/file.gguf.")
@click.option("--tokens", "sizes", default="8", show_default=True, callback=_sizes, metavar="N[,N...]",
              help="Virtual tokens; a comma list trains one soft prompt per size and keeps the best on validation.")
@click.option("--init-text", help="Start each soft prompt from this text's token embeddings (repeated or cut to "
              "the size). Default: the handler's template, few-shot text or score prefix.")
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--max-steps", type=click.IntRange(min=1), help="At most this many steps per size.")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True),
              help="Training time for all sizes (the model's load aside): stop then and write what was trained.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=0.01, show_default=True,
              help="Adam's learning rate.")
@click.option("--batch-size", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the initial state, shuffle and split.")
@click.option("--validation", type=_FILE, help="Validation rows (JSONL); else --validation-split of --input.")
@click.option("--validation-split", type=click.FloatRange(min=0, max=1, max_open=True), default=0.2,
              show_default=True, help="The share of --input rows held out (a seeded draw) when no --validation.")
@click.option("--query", metavar="FIELD", help="The row field that is the handler's sub-query (default: empty).")
@click.option("--target", metavar="FIELD", default="completion", show_default=True,
              help="The row field holding the expected output (a score handler: the text whose likelihood is raised).")
@click.option("--threads", type=click.IntRange(min=1), help="torch's CPU threads (default: $DECOMP_THREADS, else torch's).")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
              help="Import this module first, as `decomp run --plugin` does (repeatable).")
@click.option("--trust", multiple=True, metavar="MODULE",
              help="Let the program's python handlers call functions of MODULE, as `decomp run --trust` (repeatable).")
@click.option("--allow-root", "allow_roots", multiple=True, metavar="DIR",
              help="Let `import` and file= options read files in DIR too, as `decomp run --allow-root` (repeatable).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@click.pass_context
def tune_command(ctx: click.Context, program: str, handler: str, data: Path, out: Path | None, model: str,
                 sizes: tuple[int, ...], init_text: str | None, epochs: int, max_steps: int | None,
                 max_seconds: float | None, lr: float, batch_size: int, seed: int, validation: Path | None,
                 validation_split: float, query: str | None, target: str, threads: int | None,
                 plugins: tuple[str, ...], trust: tuple[str, ...], allow_roots: tuple[str, ...], quiet: bool) -> None:
    """Train a soft prompt for the prompt or score handler --handler of PROGRAM on the local model.

    Each row of --input is rendered by the handler (its fields are the inputs); training raises
    the likelihood of the row's --target text after it. Writes one safetensors file with what it
    was trained for and from, for prompt(..., soft_prompt=FILE); prints one summary line.
    """
    from decomp.learning.tuning.api import tune

    options = TrainOptions(sizes, epochs, max_steps, max_seconds, lr, batch_size, seed)
    recorded = {_CLI_NAMES.get(key, key): (list(value) if isinstance(value, tuple) else
                                           str(value) if isinstance(value, Path) else value)
                for key, value in ctx.params.items()}
    _threads(threads, quiet)
    with _progress(quiet) as progress:  # a TuneError or a plugin that fails: said by the `decomp` group
        for plugin in plugins:
            load_plugin(plugin, Path(program).parent)
        tuned = tune(program, handler, data, out, options, model=model, validation=validation,
                     validation_split=validation_split, query=query, target=target, init_text=init_text,
                     recorded=recorded, progress=progress, trust=Trust.of(trust, allow_roots))
    if tuned.stopped == "max_seconds":
        click.echo(f"note: stopped at the time limit (--max-seconds {max_seconds:g}); the soft prompt as trained "
                   "so far was written", err=True)
    click.echo(tuned.summary())


def _threads(threads: int | None, quiet: bool) -> None:
    """torch's threads as asked; with `quiet`, transformers' own progress bars off too."""
    threads = threads or int(os.environ.get("DECOMP_THREADS") or 0)
    if threads:
        import torch

        torch.set_num_threads(threads)
    if quiet:
        from transformers.utils import logging

        logging.disable_progress_bar()


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[Progress | None]:
    """A progress bar on stderr, a task per size with its last loss (on a terminal; else a line
    per step); None when quiet."""
    if quiet:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:  # a log file: one line per step, not a bar redrawn in place
        yield lambda size, step, total, loss: click.echo(f"{size} tokens: step {step}/{total}, loss {loss:.4f}",
                                                         err=True)
        return
    tasks: dict[int, int] = {}
    with Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
             console=console, transient=False) as bar:
        def update(size: int, step: int, total: int, loss: float) -> None:
            if size not in tasks:
                tasks[size] = bar.add_task(f"{size} tokens", total=total)
            bar.update(tasks[size], completed=step, description=f"{size} tokens, loss {loss:.4f}")

        yield update
