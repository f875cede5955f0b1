"""The command-line options every command running a program shares (`decomp run`, `decomp
optimize`, plugins' commands): what shapes a run (`session_options`, the fields of `RunOptions`)
and what the program may reach (`trust_options`)."""
from __future__ import annotations

import functools
from pathlib import Path

import click

from decomp.handlers.trust import allowing
from decomp.runtime.engine.budgets import DEFAULT_ANSWER_MB, DEFAULT_ROW_HANDLER_CALLS
from decomp.runtime.engine.cache import MODES
from decomp.runtime.models.base import DEFAULT_ATTEMPT_DEADLINE, DEFAULT_CALL_DEADLINE
from decomp.runtime.models.prices import load_prices

__all__ = ["session_options", "trust_options"]


def trust_options(command):
    """`--trust MODULE` and `--allow-root DIR` (both repeatable): what the program may reach
    beyond its own folder, for the duration of the command (see `decomp.handlers.trust`)."""
    @functools.wraps(command)
    def wrapped(*args, trust: tuple[str, ...] = (), allow_roots: tuple[str, ...] = (), **kwargs):
        with allowing(trust, allow_roots):
            return command(*args, **kwargs)

    wrapped = click.option("--allow-root", "allow_roots", multiple=True, metavar="DIR",
                           help="Let `import` and file= options read files in DIR too, not only in the program's "
                                "folder and the bundled programs (repeatable; also $DECOMP_ALLOW_ROOTS).")(wrapped)
    return click.option("--trust", "trust", multiple=True, metavar="MODULE",
                        help="Let python(function=\"MODULE:f\") handlers call functions of MODULE (and its "
                             "submodules), not only registered ones and the program's own modules (repeatable; "
                             "also $DECOMP_TRUST, comma-separated).")(wrapped)


def _prices(ctx, param, value: Path | None) -> Path | None:
    """--prices FILE, read now so that a bad file is a usage error naming it."""
    if value is not None:
        try:
            load_prices(value)
        except (OSError, ValueError) as err:
            raise click.BadParameter(str(err)) from None
    return value


def session_options(command):
    """The options that shape a run: model, endpoint limits, cache, budgets (the keyword
    arguments of `RunOptions`, and `plugins`)."""
    options = [
        click.option("--model", help="Model for handlers that name none: local:..., openai:NAME, fake:FILE.json."),
        click.option("--base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL)."),
        click.option("--transport", type=click.Choice(["auto", "aiohttp", "openai"]), default="auto",
                     show_default=True, help="How openai: models send requests: aiohttp (auto) or the official "
                                             "openai client. A model declaration's transport= wins."),
        click.option("--attempt-deadline", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_ATTEMPT_DEADLINE,
                     show_default=True, metavar="SECONDS",
                     help="Seconds one request of an openai: model may take in all, however slowly its reply "
                          "comes (then retried). A model declaration's attempt_deadline= wins."),
        click.option("--call-deadline", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_CALL_DEADLINE,
                     show_default=True, metavar="SECONDS",
                     help="Seconds one openai: model call may take in all, its retries and backoff included. "
                          "A model declaration's call_deadline= wins."),
        click.option("--concurrency", default=8, show_default=True, help="Model calls in flight at once, per endpoint."),
        click.option("--rpm", type=float, help="At most this many requests per minute, per endpoint."),
        click.option("--tpm", type=float, help="At most this many tokens per minute, per endpoint."),
        click.option("--cache", "cache_mode", type=click.Choice(MODES), default="read-write", show_default=True,
                     help="Step cache: reuse results, recompute them, ignore the cache, or only replay it."),
        click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Where the step cache lives (default: $DECOMP_CACHE_DIR or ~/.cache/decomp)."),
        click.option("--max-calls", type=int, help="Budget: model calls for the whole run."),
        click.option("--max-tokens", type=int, help="Budget: tokens for the whole run."),
        click.option("--max-row-calls", type=int, help="Budget: model calls per row."),
        click.option("--max-row-tokens", type=int, help="Budget: tokens per row."),
        click.option("--max-cost", type=click.FloatRange(min=0), metavar="X",
                     help="Budget: money for the whole run's model requests (needs each model's price)."),
        click.option("--prices", type=click.Path(exists=True, dir_okay=False, path_type=Path), callback=_prices,
                     metavar="FILE", help="Prices per million tokens (JSON or TOML: model name -> price_in, "
                                          "price_out): a cost figure in summaries, progress and dry runs."),
        click.option("--max-depth", type=int, default=64, show_default=True, help="Deepest nesting of programs."),
        click.option("--max-steps", type=int, help="Most steps any decomposer may take."),
        click.option("--max-row-handler-calls", type=click.IntRange(1), default=DEFAULT_ROW_HANDLER_CALLS,
                     show_default=True, help="Budget: handler calls of every kind (symbolic ones too) per row."),
        click.option("--max-handler-calls", type=click.IntRange(1),
                     help="Budget: handler calls of every kind for the whole run."),
        click.option("--max-memory", "max_memory_mb", type=click.FloatRange(min=1), metavar="MB",
                     help="Budget: past this resident memory (MiB) of the process, a row's next call ends it."),
        click.option("--max-answer-size", "max_answer_mb", type=click.FloatRange(min=0, min_open=True),
                     default=DEFAULT_ANSWER_MB, show_default=True, metavar="MB",
                     help="Limit: a handler answer holding more text than this (MiB of characters) ends its row "
                          "before it is kept, cached or traced."),
        click.option("--handler-timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
                     help="Seconds any handler call may take unless its timeout= option says [default: 10]."),
        click.option("--handler-memory", "handler_memory_mb", type=click.FloatRange(min=1), metavar="MB",
                     help="MiB any python handler call may add to its worker process unless its memory= option "
                          "says [default: 1024]."),
        click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
                     help="Import this module first (a module name, or a path to a .py file), so the handler "
                          "kinds and functions it registers can be used (repeatable)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command
