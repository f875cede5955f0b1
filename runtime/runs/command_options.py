"""The command-line options every command running a program shares (`decomp run`, `decomp
optimize`, plugins' commands): what shapes a run (`session_options`, the fields of `RunOptions`)
and what the program may reach (`trust_options`); and what a check may import (`folder_trust_option`,
`decomp check` and `decomp lsp` only)."""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Iterable

import click
from click.core import ParameterSource

from decomp.handlers.sandbox.trust import TRUSTED_FOLDERS_ENV, folder_trust
from decomp.runtime.engine.cache import MODES
from decomp.runtime.models.prices import load_prices
from decomp.runtime.runs.api import RunOptions
from decomp.runtime.scoring.metric_calls import DEFAULT_METRIC_MEMORY_MB, DEFAULT_METRIC_TIMEOUT, MetricLimits

__all__ = ["folder_trust_option", "given_again", "metric_options", "session_options", "trust_options"]


def trust_options(command):
    """`--trust MODULE` and `--allow-root DIR` (both repeatable): what the program may reach
    beyond its own folder. The command gets them as `trust` and `allow_roots` (the `RunOptions`
    fields; `decomp.handlers.sandbox.trust.Trust.of(trust, allow_roots)`) and hands them to its session."""
    wrapped = click.option("--allow-root", "allow_roots", multiple=True, metavar="DIR",
                           help="Let `import` and file= options read files in DIR too, not only in the program's "
                                "folder and the bundled programs (repeatable; also $DECOMP_ALLOW_ROOTS).")(command)
    return click.option("--trust", "trust", multiple=True, metavar="MODULE",
                        help="Let python(function=\"MODULE:f\") handlers call functions of MODULE (and its "
                             "submodules), not only registered ones and the program's own modules (repeatable; "
                             "also $DECOMP_TRUST, comma-separated).")(wrapped)


def folder_trust_option(command):
    """`--trust-folder DIR` (repeatable), for the commands that check without running (`decomp
    check`, `decomp lsp`): the command gets `trusted_folders`, a `FolderTrust` of these folders,
    the trust list file's and `$DECOMP_TRUSTED_FOLDERS`' (see `decomp.handlers.sandbox.trust`). A line of
    the trust list that trusts nothing is said on stderr."""
    @functools.wraps(command)
    def wrapped(*args, trust_folders: tuple[str, ...] = (), **kwargs):
        trusted, problems = folder_trust(trust_folders)
        for problem in problems:
            click.echo(f"warning: {problem}", err=True)
        return command(*args, trusted_folders=trusted, **kwargs)

    return click.option("--trust-folder", "trust_folders", multiple=True, metavar="DIR",
                        help="Let the check import the Python modules (python(function=\"helpers:f\")) of "
                             "programs in DIR and the folders under it; elsewhere they are not imported, and each "
                             f"handler says so (repeatable; also ${TRUSTED_FOLDERS_ENV}, and the trust list "
                             "$XDG_CONFIG_HOME/decomp/trusted-folders, by default ~/.config/decomp/trusted-folders, "
                             "one folder per line).")(wrapped)


def _default(name: str):
    """`RunOptions`' default of the setting `name`: each setting's default is written once, on
    `RunOptions`, and the command line, the Python API and run.json's record all take it there."""
    return RunOptions.__dataclass_fields__[name].default


class _FiniteRange(click.FloatRange):
    """A `FloatRange` that also refuses `nan` and `inf` (a usage error, exit status 2)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number", param, ctx)
        return number


def _metric_options() -> list:
    """`--metric-timeout SECONDS` and `--metric-memory MB`: the limits of a metric that is not
    decomp's own, per row (keyword arguments `metric_timeout`, `metric_memory_mb`)."""
    return [
        click.option("--metric-timeout", type=_FiniteRange(min=0, min_open=True), default=_default("metric_timeout"),
                     show_default=True, metavar="SECONDS",
                     help="Seconds a metric of a plugin's or a module:function may take to score one row (it runs "
                          "in a worker process, killed past it); past it, that row's metric error."),
        click.option("--metric-memory", "metric_memory_mb", type=_FiniteRange(min=1),
                     default=_default("metric_memory_mb"), show_default=True, metavar="MB",
                     help="MiB such a metric may add to its worker process to score one row; past it, that row's "
                          "metric error."),
    ]


def metric_options(command):
    """`--metric-timeout` and `--metric-memory`, for commands that score without running a
    program (`decomp eval`, `decomp compare`): the command gets `metric_limits`, a `MetricLimits`."""
    @functools.wraps(command)
    def wrapped(*args, metric_timeout: float = DEFAULT_METRIC_TIMEOUT,
                metric_memory_mb: float = DEFAULT_METRIC_MEMORY_MB, **kwargs):
        return command(*args, metric_limits=MetricLimits(metric_timeout, metric_memory_mb), **kwargs)

    for option in reversed(_metric_options()):
        wrapped = option(wrapped)
    return wrapped


def _prices(ctx, param, value: Path | None) -> Path | None:
    """--prices FILE, read now so that a bad file is a usage error naming it."""
    if value is not None:
        try:
            load_prices(value)
        except (OSError, ValueError) as err:
            raise click.BadParameter(str(err)) from None
    return value


def session_options(command):
    """The options that shape a run: model, sampling defaults, endpoint limits, cache, budgets
    (the keyword arguments of `RunOptions`, and `plugins`)."""
    options = [
        click.option("--model", help="Model for handlers that name none: local:..., openai:NAME, fake:FILE.json."),
        click.option("--base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL)."),
        click.option("--transport", type=click.Choice(["auto", "aiohttp", "openai"]), default=_default("transport"),
                     show_default=True, help="How openai: models send requests: aiohttp (auto) or the official "
                                             "openai client. A model declaration's transport= wins."),
        click.option("--api", type=click.Choice(["auto", "chat", "completions"]), default=_default("api"),
                     show_default=True,
                     help="Which API openai: models use: chat (/chat/completions), completions, or auto: chat at "
                          "api.openai.com, completions at a --base-url, switching once to chat when the endpoint "
                          "refuses completions as a chat model's (said on one line, and kept in a run's run.json "
                          "for --resume). A model declaration's api= wins."),
        click.option("--attempt-deadline", type=click.FloatRange(min=0, min_open=True),
                     default=_default("attempt_deadline"), show_default=True, metavar="SECONDS",
                     help="Seconds one request of an openai: model may take in all, however slowly its reply "
                          "comes (then retried). A model declaration's attempt_deadline= wins."),
        click.option("--call-deadline", type=click.FloatRange(min=0, min_open=True),
                     default=_default("call_deadline"), show_default=True, metavar="SECONDS",
                     help="Seconds one openai: model call may take in all, its retries and backoff included. "
                          "A model declaration's call_deadline= wins."),
        click.option("--temperature", "default_temperature", type=_FiniteRange(min=0), metavar="T",
                     help="Temperature of the model calls of handlers that write no temperature= of their own "
                          "[default: the kind's, 0]. A handler's temperature= wins."),
        click.option("--max-output-tokens", type=click.IntRange(1), metavar="N",
                     help="The most tokens one model call may generate, for handlers that write no max_tokens= "
                          "of their own [default: the kind's: prompt 200, decomposer 200, executor 64]. A "
                          "handler's max_tokens= wins. Not the run's token budget: that is --max-tokens."),
        click.option("--concurrency", default=_default("concurrency"), show_default=True,
                     help="Model calls in flight at once, per endpoint."),
        click.option("--rpm", type=float, help="At most this many requests per minute, per endpoint."),
        click.option("--tpm", type=float, help="At most this many tokens per minute, per endpoint."),
        click.option("--cache", "cache_mode", type=click.Choice(MODES), default=_default("cache_mode"), show_default=True,
                     help="Step cache: reuse results, recompute them, ignore the cache, or only replay it."),
        click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Where the step cache lives (default: $DECOMP_CACHE_DIR or ~/.cache/decomp)."),
        click.option("--max-calls", type=int, help="Budget: model calls for the whole run."),
        click.option("--max-tokens", type=int, help="Budget: tokens for the whole run (prompts and replies of every "
                                                    "call); one call's reply: --max-output-tokens."),
        click.option("--max-row-calls", type=int, help="Budget: model calls per row."),
        click.option("--max-row-tokens", type=int, help="Budget: tokens per row."),
        click.option("--max-cost", type=click.FloatRange(min=0), metavar="X",
                     help="Budget: money for the whole run's model requests (needs each model's price)."),
        click.option("--prices", type=click.Path(exists=True, dir_okay=False, path_type=Path), callback=_prices,
                     metavar="FILE", help="Prices per million tokens (JSON or TOML: model name -> price_in, "
                                          "price_out and optionally price_cached): a cost figure in summaries, "
                                          "progress and dry runs."),
        click.option("--max-depth", type=int, default=_default("max_depth"), show_default=True,
                     help="Deepest nesting of programs."),
        click.option("--max-steps", type=int, help="Most steps any decomposer may take."),
        click.option("--max-row-handler-calls", type=click.IntRange(1), default=_default("max_row_handler_calls"),
                     show_default=True, help="Budget: handler calls of every kind (symbolic ones too) per row."),
        click.option("--max-handler-calls", type=click.IntRange(1),
                     help="Budget: handler calls of every kind for the whole run."),
        click.option("--max-memory", "max_memory_mb", type=click.FloatRange(min=1), metavar="MB",
                     help="Budget: past this resident memory (MiB) of the process, a row's next call ends it."),
        click.option("--max-answer-size", "max_answer_mb", type=click.FloatRange(min=0, min_open=True),
                     default=_default("max_answer_mb"), show_default=True, metavar="MB",
                     help="Limit: a handler answer holding more text than this (MiB of characters) ends its row "
                          "before it is kept, cached or traced."),
        click.option("--handler-timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
                     help="Seconds any handler call may take unless its timeout= option says [default: 10]."),
        click.option("--handler-memory", "handler_memory_mb", type=click.FloatRange(min=1), metavar="MB",
                     help="MiB any python handler call may add to its worker process unless its memory= option "
                          "says [default: 1024]."),
        *_metric_options(),
        click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
                     help="Import this module first (a module name, or a path to a .py file), so the handler "
                          "kinds and functions it registers can be used (repeatable)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def given_again(ctx: click.Context, names: Iterable[str] | None = None,
                drop: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """The parameters of `ctx`'s command that its command line gave (those in `names`, else all
    but those in `drop`), as the words that give them again (an optional value given bare, such
    as `--otlp`, last); and the options left out because their value is a URL holding
    credentials, which are never printed (`redact_url`): the user gives those again."""
    from decomp.dsl.redact import redact_url

    wanted = set(names) if names is not None else None
    words, bare, hidden = [], [], []
    for param in ctx.command.params:
        if (wanted is not None and param.name not in wanted) or param.name in drop or \
                ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
            continue
        values = ctx.params.get(param.name)
        values = list(values) if param.multiple or (isinstance(param, click.Argument) and param.nargs != 1) \
            else [values]
        flag = max(param.opts, key=len) if isinstance(param, click.Option) else None
        for value in values:
            if isinstance(value, str) and "://" in value and redact_url(value) != value:
                hidden.append(flag or param.name)
            elif flag is None:
                words.append(str(value))
            elif getattr(param, "is_flag", False):  # given: its own flag, or the --no- form it has
                words += [flag] if value or not param.secondary_opts else param.secondary_opts[:1]
            elif param.flag_value is not None and value == param.flag_value:  # an optional value, given bare
                bare.append(flag)
            else:
                words += [flag, str(value)]
    return words + bare, hidden
