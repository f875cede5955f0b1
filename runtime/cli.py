"""The `decomp` command line. Each command parses its arguments and calls the library."""
from __future__ import annotations

import json
import re
import shlex
import sys
import warnings
from typing import Any
from pathlib import Path

import click
from click.core import ParameterSource

from decomp.dsl.errors import DecompError, DecompSyntaxError, Diagnostics
from decomp.dsl.values import printable, storable_json
from decomp.handlers import plugins
from decomp.handlers.sandbox.trust import FolderTrust, Trust
from decomp.runtime.engine.checking import check_file, file_warnings, looks_like
from decomp.runtime.engine.loader import PluginNotTrusted, load_plugin
from decomp.runtime.scoring import evaluation
from decomp.runtime.runs.api import (
    PROGRAMS_DIR,
    RunInterrupted,
    RunOptions,
    find_program,
    run_dataset,
    use_main,
    user_folders,
    with_fields,
)
from decomp.runtime.runs import dryrun
from decomp.runtime.exports import otel
from decomp.runtime.runs.command_options import (
    folder_trust_option,
    given_again,
    metric_options,
    session_options,
    trust_options,
)
from decomp.runtime.scoring.metric_calls import MetricLimits
from decomp.runtime.storage.datasets import Row, read_rows, window
from decomp.runtime.runs.resumed import recorded_run
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.cluster.rows import Cluster
from decomp.runtime.runs.shards import Shard, merge_runs
from decomp.runtime.models.replay import ReplayModel
from decomp.runtime.views.describe import describe


#: Exit statuses: 0 done (every row answered; a failed *outcome* is an answer), 1 the command
#: could not do its work (a program that does not load, a file that cannot be read, a -q
#: question that ended in an error or a failed outcome), 2 a usage error (click's), 3 a dataset
#: run (or dry run) that finished with one or more rows ending in an error, 130 a dataset run
#: interrupted (Ctrl-C: 128 + SIGINT, the shells' convention).
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_ROWS_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: The `decomp run` options a resume is given again: run.json does not record them (it records
#: the model, the session's options, the fields, the row window, --main and the trust).
RESUME_GIVES_AGAIN = ("shard", "output", "ray_address", "ray_workers", "otlp", "plugins", "verbose", "metric")



def resolve_program(name: str) -> Path:
    """A path as given, or the name of a bundled program such as `decomp/letter_cat_symbolic`."""
    try:
        return find_program(name)
    except DecompError as err:
        raise click.BadParameter(str(err)) from None


def fail(err: Exception) -> None:
    """End a command on `err` as every `decomp` command does: its message on stderr (a positioned
    `DecompError` as ``file:line:col: ...`` with its line and caret, any other as ``error: ...``),
    exit status 1. A plugin's command raises a `DecompError` instead: the `decomp` group ends it
    here."""
    said = err.format() if isinstance(err, DecompError) else str(err)
    click.echo(said if getattr(err, "span", None) else f"error: {said}", err=True)
    sys.exit(EXIT_ERROR)


class _PluginCommands(click.Group):
    """A group some of whose commands plugins add (`register_commands`): they are loaded the first
    time the group is asked for a command it does not hold, or for the list of its commands, so a
    command of its own (`decomp run`) imports no plugin's command module."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        found = super().get_command(ctx, name)
        if found is None and not _plugin_commands_added:
            _add_plugin_commands()
            found = super().get_command(ctx, name)
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        _add_plugin_commands()
        return super().list_commands(ctx)


class _Decomp(_PluginCommands):
    """The `decomp` group: a `DecompError` no command caught ends in its words (`fail`); any other
    exception a command raises is a bug, and goes on to Python's traceback with `BUG` after it."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DecompError as err:
            fail(err)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own: usage errors (exit status 2), --help and --version, aborts
        except Exception as err:
            err.add_note(bug_line())
            raise


def bug_line() -> str:
    """The line after a bug's traceback: it is decomp's (or a plugin's) bug, which version, and
    to report it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return BUG.format(version=f" {version('decomp-lang')}")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return BUG.format(version="")


#: Said after the traceback of an exception that is not a `DecompError`.
BUG = ("decomp: this is a bug in decomp-lang{version} (or in a plugin it loaded), not in your program or "
       "data: please report it to decomp's maintainers, with the traceback above.")


@click.group(cls=_Decomp)
@click.version_option(package_name="decomp-lang")
def main() -> None:
    """decomp: write prompt programs that break a task into sub-queries, and run them."""
    for stream in (sys.stdout, sys.stderr):  # text no encoding can write (a lone surrogate) as \udXXX
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    warnings.showwarning = _show_warning
    plugins.load()
    for problem in plugins.problems():
        click.echo(f"warning: {problem}", err=True)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning (a bypassed step cache, ...) as one plain line on stderr."""
    click.echo(f"warning: {message}", err=True)


@main.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print the parsed module or few-shot examples as JSON.")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
              help="Import this module first, as `decomp run --plugin` does, so the kinds it registers are known "
                   "(a plugin file of a folder not trusted is not imported: --trust-folder).")
@trust_options
@folder_trust_option
def check(file: str, as_json: bool, plugins: tuple[str, ...], trusted_folders: FolderTrust, trust: tuple[str, ...],
          allow_roots: tuple[str, ...]) -> None:
    """Check FILE (a .decomp module, a few-shot prompt file or a fake model's JSON file) without
    running anything.

    Exit status 0 when clean or with warnings only (each as file:line:col: warning: ...); 1 with
    every problem found, each as file:line:col. A .decomp file that declares nothing, and a file
    that is none of these (Python, other JSON, JSON Lines, empty) are refused; text with no
    example in it passes with a warning (it can only be a plain prompt). A fake model file
    (keys answers, mapping, script, patterns, default) passes with what it holds counted.

    Checking never runs code from a folder you have not trusted: a python handler's module
    beside the program (helpers.py) is imported only from a folder named by --trust-folder, the
    trust list or $DECOMP_TRUSTED_FOLDERS; elsewhere it is not imported, and its handler says so
    in a warning. `decomp run` imports it (running a program is consent to run its code).
    """
    path = resolve_program(file)
    _load_plugins(plugins, path, trusted_folders)
    try:
        checked = check_file(path, trusted_folders=trusted_folders, trust=Trust.of(trust, allow_roots))
    except (DecompError, OSError) as err:
        _refuse(err, path)
    if checked.model_file is not None:  # a model backend's own file (a fake model's answers)
        found = checked.model_file
        click.echo(storable_json({found.key: found.summary}, indent=2) if as_json
                   else f"{path}: ok ({found.what}: {found.counts})")
        return
    fewshot, warnings = checked.fewshot, checked.warnings
    result = describe(fewshot) if fewshot is not None else describe(checked.module.module, warnings)
    if checked.module is not None:  # every Python function the program would import, and why it may
        result["python_functions"] = checked.python_functions
    if as_json:  # a module's warnings are in its JSON; a few-shot file's on stderr
        for warning in warnings if fewshot is not None else ():
            click.echo(warning.format(), err=True)
        click.echo(storable_json(result, indent=2))
        return
    for warning in warnings:
        click.echo(warning.format(), err=True)
    counted = f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''})" if warnings else ""
    click.echo(f"{path}: ok{counted}")


def _refuse(err: Exception, path: Path) -> None:
    """`fail`, with a guess at what the file is when a .decomp file does not parse at all."""
    looks = looks_like(path) if isinstance(err, (DecompSyntaxError, Diagnostics)) and path.suffix == ".decomp" else None
    if looks is not None:
        click.echo(err.format(), err=True)
        click.echo(f"{path}: note: {looks}, not a .decomp program", err=True)
        sys.exit(EXIT_ERROR)
    fail(err)


def _print_warnings(program: Path, trust: Trust) -> None:
    """`decomp run` prints the program's warnings once, on stderr, before it runs."""
    for warning in file_warnings(program, trust=trust):
        click.echo(warning.format(), err=True)


def _load_plugins(plugins: tuple[str, ...], program: Path, trusted_folders: FolderTrust | None = None) -> None:
    """Import each --plugin before the program is loaded: it may use the kinds they register.
    `trusted_folders` (a check's): a plugin of a folder not trusted is not imported, said once."""
    for plugin in plugins:
        try:
            load_plugin(plugin, program.parent, trusted_folders)
        except PluginNotTrusted as err:
            click.echo(f"warning: {err.message}", err=True)
        except DecompError as err:
            fail(err)


@main.command()
@click.argument("file")
@click.option("--question", "-q", help="Run on this one question and print the answer.")
@click.option("--main", "main_name", metavar="NAME", help="Run this program of FILE instead of its `main`.")
@click.option("--input", "data", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Dataset: JSONL rows {id, question, ...} or DecomP's DROP-style JSON.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path),
              help="With --input: the run directory (default: runs/PROGRAM-INPUT-TIME, under $DECOMP_RUNS_DIR if set).")
@click.option("--resume", is_flag=True,
              help="Finish the run in --run-dir (default: the latest run of this program on this input).")
@click.option("--force", is_flag=True, help="Start over in --run-dir, deleting the run there.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="With --input: also write every row's line here, in input order, when the run ends.")
@click.option("--field", "fields", multiple=True, metavar="NAME=VALUE",
              help="Another input field (repeatable); with --input, set in every row (overriding the row's "
                   "own). VALUE is read as JSON when it is JSON (dmax=4 is a number), else as text.")
@click.option("--trace", "show_trace", is_flag=True,
              help="With --question: write the decomposition tree as JSON to stderr.")
@click.option("--trace-out", type=click.Path(dir_okay=False, path_type=Path),
              help="With --question: write the decomposition tree as JSON to this file.")
@click.option("--verbose", "-v", is_flag=True, help="With --input: print each failed row's error on stderr.")
@click.option("--dry-run", is_flag=True, help="Estimate the model calls per row, their tokens and cost on a "
                                              "stand-in model; call nothing.")
@click.option("--shard", metavar="I/N", callback=lambda ctx, param, value: _shard(value),
              help="With --input: run only the rows whose position is I modulo N (0 <= I < N) into a run "
                   "directory of its own; join the shards with `decomp merge`.")
@click.option("--offset", type=click.IntRange(0), default=0, metavar="K",
              help="With --input: skip the first K rows of the dataset.")
@click.option("--limit", type=click.IntRange(1), metavar="N",
              help="With --input: run at most N rows (from --offset on); recorded in run.json, and a --resume "
                   "must give the same --offset and --limit.")
@click.option("--ray", "ray_address", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
              help="With --input: run the rows on Ray actors; this process keeps the run directory, and "
                   "--concurrency, --rpm, --tpm and the run's budgets hold for the whole run. ADDRESS: a "
                   "cluster (auto, ray://HOST:PORT, HOST:PORT); none: a new local Ray instance. Needs the "
                   "ray extra (docs/ray.md).")
@click.option("--ray-workers", type=click.IntRange(1), metavar="N",
              help="With --ray: this many workers (default: one per CPU of the cluster).")
@click.option("--otlp", is_flag=False, flag_value="", default=None, metavar="[URL]",
              help="Send each row's tree as an OpenTelemetry trace (GenAI conventions) to this OTLP endpoint "
                   "(http://HOST:4318; none: $OTEL_EXPORTER_OTLP_ENDPOINT, which alone also turns it on). "
                   "Prompts and answers only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. "
                   "Needs the otel extra (docs/observability.md).")
@session_options
@trust_options
def run(file, question, main_name, data, run_dir, resume, force, output, fields, show_trace, trace_out, verbose,
        dry_run, shard, offset, limit, ray_address, ray_workers, otlp, **opts) -> None:
    """Run the program FILE on one --question or on every row of --input.

    A dataset run writes a run directory (results.jsonl, traces, summary.json, the program and
    options used) and prints its summary as one JSON line; see `decomp trace --help`.

    \b
    Exit status:
      0  every row answered (an answer whose outcome is failed is an answer)
      1  the program or a file could not be used; with -q: the question ended in an error
         or a failed outcome
      2  a usage error
      3  --input: the run finished, and one or more rows ended in an error (each in
         results.jsonl, counted in the summary's "failed"; -v prints them); with
         --dry-run: one or more rows would
      130 --input: interrupted (Ctrl-C); the last line on stderr says the rows kept and
         left, and the command that resumes the run
    """
    _check_run_usage(question, data, show_trace, trace_out,
                     {"--run-dir": run_dir, "--resume": resume, "--force": force, "--output": output,
                      "--shard": shard, "--offset": offset, "--limit": limit, "--ray": ray_address,
                      "--ray-workers": ray_workers})
    if ray_workers is not None and ray_address is None:
        raise click.UsageError("--ray-workers is for --ray runs")
    cluster = Cluster(None if ray_address == "local" else ray_address, ray_workers) if ray_address else None
    extra = dict(_field(f) for f in fields)
    program = resolve_program(file)
    if resume and data is not None:
        extra, main_name, offset, limit = _resumed_settings(click.get_current_context(), program, data, run_dir,
                                                            shard, opts, extra, main_name, offset, limit)
    plugins = opts.pop("plugins", ())
    options = RunOptions(**opts)
    _print_warnings(program, options.policy())
    _load_plugins(plugins, program)
    if data is not None and not dry_run:
        _run_dataset(program, data, options, main_name, run_dir, resume, force, output, extra, verbose, shard,
                     (offset, limit), cluster, otlp)
        return
    session = options.session(ReplayModel() if dry_run else None, on_note=_note)
    try:
        loaded = use_main(session.load(program), main_name, program)
    except (DecompError, OSError) as err:
        fail(err)
    with session.trusting(user_folders(extra)):  # a folder given with --field is the user's: readable
        if dry_run:
            _dry_run(session, loaded, data, question, extra, session.spec_price(options.model or loaded.default_model),
                     (offset, limit))
        elif question is not None:
            _run_one(session, loaded, question, extra, show_trace, trace_out, otlp, program)
        else:
            raise click.UsageError("give --question TEXT or --input DATA --output OUT.jsonl")


def _resumed_settings(ctx: click.Context, program: Path, data: Path, run_dir: Path | None, shard: Shard | None,
                      opts: dict, fields: dict, main_name: str | None, offset: int, limit: int | None):
    """What `--resume` runs with: each setting the user left at its default is taken from the
    run's run.json (`decomp.runtime.runs.resumed`; the trust is taken when the run opens).
    Returns the fields, main, offset and limit; `opts` (the session options) is updated in place."""
    known = recorded_run(program, data, run_dir, shard)
    if known is None:
        return fields, main_name, offset, limit  # opening the run says what is wrong, in its words
    unset = lambda name: ctx.get_parameter_source(name) in (None, ParameterSource.DEFAULT)  # noqa: E731
    taken = [name for name in opts if unset(name) and name not in ("trust", "allow_roots")]  # trust: when the run opens
    for name, value in known.session_options(taken).items():
        opts[name] = Path(value) if name in ("cache_dir", "prices") and isinstance(value, str) else value
    if unset("api"):  # what the run's "auto" models found, unless --api is given again
        opts.update(known.session_options(["apis"]))
    return (known.fields if unset("fields") else fields,
            known.main if unset("main_name") else main_name,
            known.offset if unset("offset") else offset,
            known.limit if unset("limit") else limit)


def _check_run_usage(question: str | None, data: Path | None, show_trace: bool, trace_out: Path | None,
                     dataset_options: dict) -> None:
    """Options that would be ignored are usage errors, not silence."""
    if question is not None and data is not None:
        raise click.UsageError("give --question (-q) or --input, not both: --input runs every row of DATA, "
                               "each with its own question")
    given = [name for name, value in dataset_options.items() if value]
    if question is not None and given:
        raise click.UsageError(f"{', '.join(given)}: for --input runs only; a --question run prints its answer "
                               "and keeps no run directory")
    if data is not None and (show_trace or trace_out is not None):
        raise click.UsageError("--trace and --trace-out are for --question runs: a dataset run keeps every "
                               "row's tree in its run directory (see `decomp trace show RUN --row ID`)")


def _run_dataset(program: Path, data: Path, options: RunOptions, main_name: str | None, run_dir: Path | None,
                 resume: bool, force: bool, output: Path | None, fields: dict[str, Any] | None = None,
                 verbose: bool = False, shard: Shard | None = None, rows: tuple[int, int | None] = (0, None),
                 cluster: Cluster | None = None, otlp: str | None = None) -> None:
    """`run_dataset`, its notes on stderr, its summary as one JSON line on stdout (and with
    `verbose`, each failed row's error on stderr)."""
    try:
        done = run_dataset(program, data, options=options, main=main_name, run_dir=run_dir, resume=resume,
                           force=force, output=output, progress=None, fields=fields, shard=shard,
                           offset=rows[0], limit=rows[1], cluster=cluster, otlp=otlp,
                           on_note=_note)
        failed = [record for record in done.records() if record.get("error")] if verbose else []
    except RunInterrupted as stop:
        _interrupted(stop)
    except KeyboardInterrupt:
        click.echo("interrupted: before the run directory was made; nothing was kept", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except (DecompError, OSError) as err:
        fail(err)
    for record in failed:
        click.echo(f"row {record.get('id')} (index {record.get('index')}) failed: {record['error']}", err=True)
        for also in record.get("also_failed") or ():
            click.echo(f"row {record.get('id')} (index {record.get('index')}) also failed, at the same time: "
                       f"{also}", err=True)
    if done.failed:
        hint = "" if verbose else "; -v prints each"
        click.echo(f"error: {done.failed} of {done.rows} row(s) ended in an error (in "
                   f"{done.run_dir / 'results.jsonl'}{hint})", err=True)
    click.echo(storable_json(done.to_dict()))
    if done.failed:
        sys.exit(EXIT_ROWS_FAILED)


def _interrupted(stop: RunInterrupted) -> None:
    """An interrupted dataset run ends with one line on stderr, the rows kept and left and the
    command that finishes the run, and exit status 130."""
    ctx = click.get_current_context()
    again, hidden = given_again(ctx, RESUME_GIVES_AGAIN)
    hidden += given_again(ctx, ("base_url",))[1]  # run.json records it, but with its credentials hidden
    command = ["decomp", "run", ctx.params["file"], "--input", str(ctx.params["data"]), "--run-dir",
               str(stop.run_dir), "--resume", *again]
    secret = f" (give {' and '.join(hidden)} again: credentials are not printed)" if hidden else ""
    click.echo(f"interrupted: {stop.kept} of {stop.rows} rows kept in {stop.run_dir}, {stop.left} left; resume "
               f"with: {shlex.join(command)}{secret}", err=True)
    sys.exit(EXIT_INTERRUPTED)


def _note(text: str) -> None:
    """A note of the run (what it found and repaired, what it found out) as one line on stderr."""
    click.echo(f"note: {text}", err=True)


def _run_one(session, loaded, question, fields, show_trace, trace_out=None, otlp=None, program=None) -> None:
    row = {"question": question, **fields}
    export = _question_export(session, otlp, program) if otel.wanted(otlp) else None
    result = session.run(loaded, row)
    if export is not None:
        export.row(result.trace, otel.row_attributes({"id": "question", "index": 0}))
        problem = export.close()
        if problem:
            click.echo(f"warning: {problem}", err=True)
    if show_trace or trace_out is not None:
        text = result.trace.to_json(indent=2)
        if trace_out is not None:
            trace_out.parent.mkdir(parents=True, exist_ok=True)
            trace_out.write_text(text + "\n", encoding="utf-8")
        if show_trace:
            click.echo(text, err=True)
    if result.error is not None:
        _print_errors(result.trace, result.error, result.also_failed)
        sys.exit(EXIT_ERROR)
    answer = result.answer
    click.echo(answer if isinstance(answer, str) else storable_json(answer))
    for name, summary in result.environments.items():
        click.echo(f"environment [{name}]: {storable_json(summary)}", err=True)
    if result.failed:
        click.echo("outcome: failed (the answer above is what the program's last step gave)", err=True)
        if result.reason:
            click.echo(f"reason: {printable(result.reason)}", err=True)
        sys.exit(EXIT_ERROR)


def _question_export(session, otlp: str | None, program) -> "otel.TraceExport | None":
    """A --question run's OTLP export; None (and one warning) when the receiver refuses the
    connection or cannot be reached, found before the run: no seconds of the exporter's retries."""
    try:
        otel.check(otlp or None)
        problem = otel.receiver_problem(otlp or None)
        if problem is None:
            return otel.TraceExport.start(otlp or None, mask=session.secrets.mask,
                                          resource={"decomp.program": str(program)})
    except DecompError as err:
        fail(err)
    click.echo(f"warning: {otel.not_sent(otlp or None, problem)}", err=True)
    return None


def _print_errors(trace, error: str, also_failed=()) -> None:
    """The row's error, then each other step's that failed at the same time, each followed by
    its own details (a Python handler's traceback) and never by another's."""
    for number, message in enumerate([error, *also_failed]):
        click.echo(f"{'error' if number == 0 else 'error (at the same time)'}: {message}", err=True)
        details = trace.failure_details(message)
        if details:
            click.echo(details.rstrip("\n"), err=True)


def _dry_run(session, loaded, data, question, fields, price=None, window_=(0, None)) -> None:
    """Print how many model calls each row would make (estimated from the prompts' examples),
    their tokens, and their cost at `price` (the run's model's, when known).

    A row that fails in the dry run (it cannot be read, lacks an input, a step fails on the
    stand-in's answers) is named on stderr with its error, counted in `failed`, and makes the
    exit status 3 with --input, as a dataset run's (1 for -q, as a question's); its calls up
    to the failure are counted."""
    if data is not None:
        try:
            rows = with_fields(window(read_rows(data), *window_), fields)
        except (DecompError, OSError) as err:
            fail(err)
    elif question is not None:
        rows = [Row(0, None, {"question": question, **fields}, None)]
    else:
        raise click.UsageError("give --question TEXT or --input DATA")
    done = dryrun.dry_run(session, loaded, rows, dataset=data is not None)
    for where, error in done.failures:
        click.echo(f"warning: {where} would fail: {error}", err=True)
    click.echo(storable_json(done.estimate(price)))
    if done.failures:
        click.echo(f"error: {len(done.failures)} of {len(done.calls)} row(s) would fail in this dry run", err=True)
        sys.exit(EXIT_ROWS_FAILED if data is not None else EXIT_ERROR)


def _shard(text: str | None) -> Shard | None:
    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _field(text: str) -> tuple[str, Any]:
    """NAME=VALUE; VALUE read as JSON when it is JSON (`dmax=4` is the number 4, `tags=["a"]` a
    list, `name="4"` the string "4"), else taken as the text it is."""
    name, sep, value = text.partition("=")
    if not sep:
        raise click.BadParameter(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(value, parse_constant=_not_a_number)
    except (ValueError, RecursionError):  # not JSON (or nested too deeply to read): the text
        return name, value


def _not_a_number(word: str):
    """NaN and Infinity are no JSON: such a --field value stays text."""
    raise ValueError(word)


_GOLD_HELP = "Gold data: JSONL rows {id, answer} or DecomP's DROP-style JSON."
_PRED_HELP = "Predictions: a `decomp run --input` run directory, its results.jsonl, or its --output JSONL."
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@main.group("eval", cls=_PluginCommands, invoke_without_command=True, subcommand_metavar="[SUBCOMMAND] [ARGS]...")
@click.option("--gold", type=_FILE, help=_GOLD_HELP + " Without it: success rates only.")
@click.option("--pred", type=click.Path(exists=True, path_type=Path),
              help=_PRED_HELP + " Required without a subcommand.")
@click.option("--metric", metavar="NAME|MODULE:FUNCTION",
              help="em: DROP exact match; exact: the very text, no normalisation; set_em: order-free lists; f1: "
                   "DROP token F1; a plugin's metric; or MODULE:FUNCTION, function(row, answer, trace) -> float, or "
                   "function(prediction, gold) -> float per gold alternative (a module of the working folder, or "
                   "trusted with --trust). Default: the run's "
                   "metric when --pred is a run (its program's `metric` statement, recorded in run.json), else em.")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
              help="Import this module first, as `decomp run --plugin` does, so the metrics it registers are known.")
@metric_options
@trust_options
@click.pass_context
def eval_command(ctx: click.Context, gold: Path | None, pred: Path | None, metric: str | None,
                 plugins: tuple[str, ...] = (), metric_limits: MetricLimits | None = None, trust: tuple[str, ...] = (),
                 allow_roots: tuple[str, ...] = ()) -> None:
    """Score predictions against gold answers, normalised like the DROP evaluator.

    \b
    Answers:     decomp eval --gold GOLD --pred PRED [--metric em|exact|set_em|f1|MODULE:FUNCTION]
    Success:     decomp eval --pred RUN_DIR   (rows whose outcome is ok, by group)

    Plugins add subcommands (TaskLAMA's `steps` and `graph`: see their --help).

    A metric function is called function(row, answer, trace): the gold file's row (its fields,
    id, answer), the prediction, the row's trace (from a run directory; else None); or
    function(prediction, gold), once per gold alternative (docs/runs.md, "The metric function").
    A metric of a plugin's or a module:function runs in a worker process, each row under
    --metric-timeout and --metric-memory: a row it fails on (it raised, even SystemExit, ran
    past its limit, returned no finite number) scores 0, is named in a warning and counted in
    the summary's "metric_errors".

    Exit status 0 when the scores are printed (a row that failed in the run, or that the metric
    failed on, scores 0; bad lines are skipped with a warning), 1 when a file cannot be used, 2
    for a usage error.
    """
    if ctx.invoked_subcommand is not None:
        return
    if pred is None:
        raise click.UsageError("decomp eval needs --pred (and --gold to score answers; or a subcommand: steps, graph)")
    _load_plugins(plugins, Path.cwd() / "eval")
    try:
        summary, warnings = evaluation.evaluate_files(gold, pred, metric, metric_limits,
                                                      trust=Trust.of(trust, allow_roots))
    except (DecompError, OSError) as err:
        fail(err)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(storable_json(summary))


@main.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The new run directory that joins them.")
@click.option("--force", is_flag=True, help="Replace a run already in --out (its files are deleted).")
def merge(runs: tuple[Path, ...], out: Path, force: bool) -> None:
    """Join the run directories of the shards of one run (`decomp run --shard I/N`) into --out.

    The merged run's results (in input order), traces and summary are those of one unsharded
    run; its summary is printed as one JSON line. Shards of different programs, inputs, models,
    fields, per-row budgets or splits are refused, as is a shard still being written; the shards
    may be read-only. A missing or unfinished shard is listed in run.json's `merged` and its
    rows are run by `decomp run ... --resume --run-dir OUT`. A merge that fails leaves OUT as it
    was; --force replaces a run there only once the merged one is complete.
    """
    try:
        merged = merge_runs(runs, out, force=force)
        summary = RunDir.open(merged.path).summary()
    except (DecompError, OSError) as err:
        fail(err)
    missing, unfinished = merged.manifest["merged"]["missing"], merged.manifest["merged"]["unfinished"]
    if missing:
        click.echo(f"note: no rows of shard {', '.join(missing)}: `decomp run ... --resume --run-dir {out}` "
                   "runs them", err=True)
    if unfinished:
        click.echo(f"note: shard {', '.join(unfinished)} did not finish: `decomp run ... --resume --run-dir {out}` "
                   "runs the rows it lacks", err=True)
    click.echo(storable_json({**summary, "run_dir": str(out)}))


@main.group("trace")
def trace_group() -> None:
    """Look into run directories: one row's decomposition tree, an HTML page, two runs compared.

    Exit status 0 when shown (whether the run's rows failed or not: `decomp run` said so), 1
    when a run directory cannot be read (missing, not a run, damaged, unreadable) or a row is
    not found, 2 for a usage error. They only read: a read-only run directory can be shown."""


def _open_run_dir(path: Path) -> RunDir:
    try:
        return RunDir.open(path)
    except (RunDirError, OSError) as err:
        fail(err)


@trace_group.command("show")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--row", "row_id", metavar="ID", help="The row to show (its id, or its index); default: the rows' table.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON instead: the run's summary and rows, or with --row that row and its tree.")
def trace_show(run_dir: Path, row_id: str | None, as_json: bool) -> None:
    """Print RUN_DIR's rows as a table, or one row's decomposition tree (failures in red)."""
    from rich.console import Console

    from decomp.runtime.views import export
    from decomp.runtime.views import tree as trace_view

    run = _open_run_dir(run_dir)
    console = Console()
    try:
        if as_json:
            shown = export.rows_json(run) if row_id is None else export.row_json(run, run.find(row_id))
            click.echo(storable_json(shown, indent=2))
        elif row_id is None:
            trace_view.show_rows(run, console)
        else:
            record = run.find(row_id)
            trace_view.show_tree(record, run.trace(record["index"]), console)
    except (RunDirError, OSError) as err:
        fail(err)


@trace_group.command("export")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--jsonl", "as_jsonl", is_flag=True,
              help="One JSON line per row, in input order: its results line and its tree (\"trace\").")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not to stdout.")
@click.option("--otlp", is_flag=False, flag_value="", default=None, metavar="[URL]",
              help="Send each row's tree as an OpenTelemetry trace to this OTLP endpoint (none: "
                   "$OTEL_EXPORTER_OTLP_ENDPOINT), as `decomp run --otlp` does while it runs.")
def trace_export(run_dir: Path, as_jsonl: bool, output: Path | None, otlp: str | None) -> None:
    """Export RUN_DIR's rows with their decomposition trees: as JSON lines (--jsonl), or as
    OpenTelemetry traces to a collector (--otlp)."""
    from decomp.runtime.views import export

    if as_jsonl == (otlp is not None) or (otlp is not None and output is not None):
        raise click.UsageError("give --jsonl [-o FILE] or --otlp [URL]")
    run = _open_run_dir(run_dir)
    if otlp is not None:
        _export_otlp(run, otlp)
        return
    try:
        lines = export.export_lines(run)
        if output is None:
            for line in lines:
                click.echo(line)
        else:
            with output.open("w", encoding="utf-8") as out:
                out.writelines(line + "\n" for line in lines)
    except (RunDirError, OSError) as err:
        fail(err)


def _export_otlp(run: RunDir, url: str) -> None:
    """`trace export --otlp`: the rows sent, said on stderr; what failed, exit status 1."""
    try:
        sent, problem = otel.export_run(run, url or None)
    except (DecompError, OSError) as err:
        fail(err)
    click.echo(f"{run.path}: {sent} row(s) sent as traces", err=True)
    if problem:
        click.echo(f"error: {problem}", err=True)
        sys.exit(EXIT_ERROR)


@trace_group.command("html")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The page to write (one standalone HTML file).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
def trace_html(run_dir: Path, output: Path, force: bool) -> None:
    """Write RUN_DIR as one standalone HTML page: the rows with their scores, each row's tree
    with collapsible nodes, every prompt and raw model output. It needs no network."""
    from decomp.runtime.views.page import write_page

    run = _open_run_dir(run_dir)
    try:
        write_page(run, output, force=force)
    except (RunDirError, OSError) as err:
        fail(err)
    click.echo(str(output))


@trace_group.command("diff")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON lines.")
def trace_diff(run_a: Path, run_b: Path, as_json: bool) -> None:
    """Rows whose answers differ between two runs, and for each the first node where the two
    decomposition trees part (a different sub-query, answer or handler)."""
    from rich.console import Console

    from decomp.runtime.views import diff as diffing

    a, b = _open_run_dir(run_a), _open_run_dir(run_b)
    try:
        differences = diffing.diff_runs(a, b)
    except (RunDirError, OSError) as err:
        fail(err)
    if as_json:
        for difference in differences:
            click.echo(storable_json(difference, default=str))
    else:
        diffing.show_diff(differences, a, b, Console())


@main.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--metric", "metrics", multiple=True, metavar="NAME",
              help="Compare on this metric (repeatable): em, set_em, f1, a plugin's, MODULE:FUNCTION (answers "
                   "rescored against the runs' gold), env_success or success. Default: the metrics every run has.")
@click.option("--group-by", "group_by", metavar="FIELD",
              help="Also compare per value of this row field (TextCraft: recipe_depth, or group).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap and permutation draws.")
@click.option("--method", type=click.Choice(["BCa", "percentile"]), default="BCa", show_default=True,
              help="The bootstrap interval.")
@click.option("--resamples", type=click.IntRange(min=1), default=9999, show_default=True,
              help="Bootstrap resamples and permutations.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
@click.option("--html", "html_page", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write an HTML page with charts (scores and differences with their intervals).")
@click.option("--force", is_flag=True, help="Overwrite the --html page if it exists.")
@metric_options
@trust_options
def compare_command(runs: tuple[Path, ...], metrics: tuple[str, ...], group_by: str | None, seed: int, method: str,
                    resamples: int, as_json: bool, html_page: Path | None, force: bool,
                    metric_limits: MetricLimits | None = None, trust: tuple[str, ...] = (),
                    allow_roots: tuple[str, ...] = ()) -> None:
    """Compare run directories: RUN_A (the baseline) against RUN_B [RUN_C ...].

    Per metric (and per group with --group-by) each run's score with a 95% bootstrap interval,
    and each run's paired difference from RUN_A over the rows both hold (matched by row id):
    its bootstrap interval and a two-sided paired permutation p-value (scipy.stats), seeded
    with --seed; the calls and cost of each run when its summary has them.

    A metric of a plugin's or a module:function runs in a worker process, each row under
    --metric-timeout and --metric-memory: a row it fails on scores 0 and is named in a warning
    (and in --json's "metric_errors"). A stored score that is not a finite number is a corrupt
    results line, named by file and line.

    Exit status 0 when compared, 1 when a run cannot be read or has no scores, 2 for a usage error.
    """
    from decomp.runtime.scoring import compare
    from decomp.runtime.views import compare as view

    if len(runs) < 2:
        raise click.UsageError("decomp compare needs at least two run directories (the first is the baseline)")
    try:
        result = compare.compare_runs(list(runs), list(metrics) or None, group_by,
                                      compare.Settings(seed=seed, method=method, resamples=resamples), metric_limits,
                                      Trust.of(trust, allow_roots))
        if html_page is not None:
            view.write_html(result, html_page, force=force)
    except (DecompError, OSError) as err:
        fail(err)
    for error in result.get("metric_errors", ()):
        click.echo(f"warning: {error['run']} row {error['row']}: {error['error']} (scored 0)", err=True)
    click.echo(storable_json(result) if as_json else view.format_table(result))
    if html_page is not None:  # on stderr: stdout stays the table, or the one JSON object
        click.echo(f"wrote {html_page}", err=True)


@main.command("plugins")
def plugins_command() -> None:
    """List the plugins (the built-in ones too) and what each registered: kinds, model schemes,
    environments, functions, commands. Problems loading them are printed as warnings."""
    for problem in _add_plugin_commands():
        click.echo(f"warning: {problem}", err=True)
    for plugin in plugins.plugins():
        what = "; ".join(f"{table.replace('_', ' ')}: {', '.join(plugin.registered[table])}"
                         for table in _REGISTERED if table in plugin.registered)
        click.echo(f"{plugin.name} ({plugin.source}){': ' + what if what else ''}")


#: The order `decomp plugins` says what a plugin registered in.
_REGISTERED = ("commands", "kinds", "model_backends", "environments", "functions", "metrics")


@main.command()
def programs() -> None:
    """List the bundled programs (run one with `decomp run NAME`; files without a `main`, which
    others import, are not listed)."""
    for path in sorted(PROGRAMS_DIR.rglob("*.decomp")):
        if _HAS_MAIN.search(path.read_text(encoding="utf-8")):
            click.echo(str(path.relative_to(PROGRAMS_DIR).with_suffix("")))


_HAS_MAIN = re.compile(r"^main[ \t]+\w", re.MULTILINE)


def _add_plugin_commands() -> list[str]:
    """Add the plugins' commands to `decomp` (the built-in `textcraft`, `index`, `eval steps|graph`,
    `tune`, `optimize` and `lsp` among them), once; the problems doing so found (none when they
    were in already)."""
    global _plugin_commands_added
    if _plugin_commands_added:
        return []
    _plugin_commands_added = True
    return plugins.register_commands(main)


#: Whether the plugins' commands are in (`_add_plugin_commands`).
_plugin_commands_added = False


if __name__ == "__main__":  # pragma: no cover
    main()
