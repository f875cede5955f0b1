"""The `decomp` command line. Each command parses its arguments and calls the library."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from decomp.dsl.checker import check_fewshot
from decomp.dsl.errors import DecompError, Diagnostics
from decomp.dsl.parser import read_fewshot
from decomp.runtime.engine.cache import MODES
from decomp.runtime.engine.session import Session
from decomp.runtime.runs import scoring as evaluation
from decomp.runtime.runs.api import PROGRAMS_DIR, RunOptions, find_program, run_dataset, use_main
from decomp.runtime.runs.datasets import read_rows
from decomp.runtime.runs.rundir import RunDir, RunDirError
from decomp.runtime.testing.fake import ReplayModel
from decomp.runtime.views.describe import describe


def _fail(err: Exception) -> None:
    click.echo(err.format() if isinstance(err, DecompError) else f"error: {err}", err=True)
    sys.exit(1)


def resolve_program(name: str) -> Path:
    """A path as given, or the name of a bundled program such as `decomp/letter_cat_symbolic`."""
    try:
        return find_program(name)
    except DecompError as err:
        raise click.BadParameter(str(err)) from None


@click.group()
@click.version_option(package_name="decomp-lang")
def main() -> None:
    """decomp: write prompt programs that break a task into sub-queries, and run them."""


@main.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print the parsed module or few-shot examples as JSON.")
def check(file: str, as_json: bool) -> None:
    """Check FILE (a .decomp module or a few-shot prompt file) without running anything.

    Exit status 0 when clean; 1 with every problem found, each as file:line:col.
    """
    path = resolve_program(file)
    try:
        if path.suffix == ".decomp":
            loaded = Session().load(path)
            result = describe(loaded.module) if as_json else None
        else:
            result = describe(_checked_fewshot(path))
    except (DecompError, OSError) as err:
        _fail(err)
    click.echo(json.dumps(result, indent=2, ensure_ascii=False) if as_json else f"{path}: ok")


def _checked_fewshot(path: Path):
    fewshot = read_fewshot(path)
    errors = check_fewshot(fewshot)
    if errors:
        raise Diagnostics(errors) if len(errors) > 1 else errors[0]
    return fewshot


def _session_options(command):
    """The options that shape a run: model, endpoint limits, cache, budgets."""
    options = [
        click.option("--model", help="Model for handlers that name none: local:..., openai:NAME, fake:FILE.json."),
        click.option("--base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL)."),
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
        click.option("--max-depth", type=int, default=64, show_default=True, help="Deepest nesting of programs."),
        click.option("--max-steps", type=int, help="Most steps any decomposer may take."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


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
@click.option("--field", "fields", multiple=True, metavar="NAME=VALUE", help="Another input field (repeatable).")
@click.option("--trace", "show_trace", is_flag=True, help="With --question: print the decomposition tree as JSON.")
@click.option("--dry-run", is_flag=True, help="Count the model calls per row on a stand-in model; call nothing.")
@_session_options
def run(file, question, main_name, data, run_dir, resume, force, output, fields, show_trace, dry_run,
        **opts) -> None:
    """Run the program FILE on one --question or on every row of --input.

    A dataset run writes a run directory (results.jsonl, traces, summary.json, the program and
    options used) and prints its summary as one JSON line; see `decomp trace --help`.
    """
    options = RunOptions(**opts)
    program = resolve_program(file)
    if data is not None and not dry_run:
        _run_dataset(program, data, options, main_name, run_dir, resume, force, output)
        return
    session = options.session(ReplayModel() if dry_run else None)
    try:
        loaded = use_main(session.load(program), main_name, program)
    except (DecompError, OSError) as err:
        _fail(err)
    if dry_run:
        _dry_run(session, loaded, data, question, fields)
    elif question is not None:
        _run_one(session, loaded, question, fields, show_trace)
    else:
        raise click.UsageError("give --question TEXT or --input DATA --output OUT.jsonl")


def _run_dataset(program: Path, data: Path, options: RunOptions, main_name: str | None, run_dir: Path | None,
                 resume: bool, force: bool, output: Path | None) -> None:
    """`run_dataset`, its notes on stderr, its summary as one JSON line on stdout."""
    try:
        done = run_dataset(program, data, options=options, main=main_name, run_dir=run_dir, resume=resume,
                           force=force, output=output, progress=None,
                           on_note=lambda note: click.echo(f"note: {note}", err=True))
    except (DecompError, OSError, ValueError) as err:
        _fail(err)
    click.echo(json.dumps(done.to_dict()))


def _run_one(session, loaded, question, fields, show_trace) -> None:
    row = {"question": question, **dict(_field(f) for f in fields)}
    result = session.run(loaded, row)
    if show_trace:
        click.echo(json.dumps(result.trace.to_dict(), indent=2, ensure_ascii=False))
    if result.error is not None:
        click.echo(f"error: {result.error}", err=True)
        sys.exit(1)
    answer = result.answer
    click.echo(answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False))


def _dry_run(session, loaded, data, question, fields) -> None:
    """Print how many model calls each row would make (estimated from the prompts' examples)."""
    if data is not None:
        rows = [{"id": r.id, **r.fields} for r in read_rows(data) if r.error is None]
    elif question is not None:
        rows = [{"question": question, **dict(_field(f) for f in fields)}]
    else:
        raise click.UsageError("give --question TEXT or --input DATA")
    calls = [session.run(loaded, row).usage.calls for row in rows]
    click.echo(json.dumps(dry_run_estimate(calls)))


def dry_run_estimate(calls: list[int]) -> dict:
    """Summary of model calls per row from a dry run."""
    n = len(calls)
    return {"rows": n, "calls_per_row": round(sum(calls) / n, 3) if n else 0.0, "max_calls_per_row": max(calls, default=0),
            "estimated_calls": sum(calls)}


def _field(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise click.BadParameter(f"expected NAME=VALUE, got {text!r}")
    return name, value


_GOLD_HELP = "Gold data: JSONL rows {id, answer} or DecomP's DROP-style JSON."
_PRED_HELP = "Predictions: the JSONL written by `decomp run --input`."
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@main.group("eval", invoke_without_command=True, subcommand_metavar="[steps|graph] [ARGS]...")
@click.option("--gold", type=_FILE, help=_GOLD_HELP + " Required without a subcommand.")
@click.option("--pred", type=_FILE, help=_PRED_HELP + " Required without a subcommand.")
@click.option("--metric", type=click.Choice(["em", "set_em", "f1"]), default="em", show_default=True)
@click.pass_context
def eval_command(ctx: click.Context, gold: Path | None, pred: Path | None, metric: str) -> None:
    """Score predictions against gold answers, normalised like the DROP evaluator.

    \b
    Answers:     decomp eval --gold GOLD --pred PRED [--metric em|set_em|f1]
    Task steps:  decomp eval steps --gold G.jsonl --pred P.jsonl [--encoder use|exact]
    Task graphs: decomp eval graph --gold G.jsonl --pred P.jsonl [--encoder use|exact]

    The subcommands read rows {"id", "task", "assumptions", "steps": [...],
    "edges": [[i, j], ...]} and print one JSON object of mean TaskLAMA metrics.
    """
    if ctx.invoked_subcommand is not None:
        return
    if gold is None or pred is None:
        raise click.UsageError("decomp eval needs --gold and --pred (or a subcommand: steps, graph)")
    try:
        summary, warnings = evaluation.evaluate_files(gold, pred, metric)
    except (OSError, ValueError) as err:
        _fail(err)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(json.dumps(summary))


def _taskgraph_options(command):
    options = [
        click.option("--gold", required=True, type=_FILE, help="Gold task-graph rows (JSONL)."),
        click.option("--pred", required=True, type=click.Path(exists=True, path_type=Path),
                     help="Predicted task-graph rows (JSONL), or a `decomp run` run directory or results.jsonl "
                          "(answers: steps, or {steps, edges}); matched by id."),
        click.option("--encoder", type=click.Choice(["use", "exact"]), default="use", show_default=True,
                     help="Step similarity: Universal Sentence Encoder cosine, or exact text match."),
        click.option("--rouge", "rouge_type", type=click.Choice(["rouge1", "rouge2", "rougeL", "rougeLsum"]),
                     default="rouge1", show_default=True, help="ROUGE variant for text overlap."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _taskgraph_eval(kind: str, gold: Path, pred: Path, encoder: str, rouge_type: str) -> None:
    try:
        from decomp.taskgraph import data, metrics, similarity

        gold_rows, pred_rows = data.read_jsonl(gold), data.read_predictions(pred)
        score = metrics.evaluate_steps if kind == "steps" else metrics.evaluate_graphs
        summary = score(gold_rows, pred_rows, similarity.get_similarity(encoder), rouge_type)
    except (OSError, ValueError, RuntimeError, RunDirError) as err:
        _fail(err)
    click.echo(json.dumps(summary))


@eval_command.command("steps")
@_taskgraph_options
def eval_steps(gold: Path, pred: Path, encoder: str, rouge_type: str) -> None:
    """Step metrics: Hungarian, relaxed (one-to-two) and one-to-many P/R/F1/F2, ROUGE F1/F2."""
    _taskgraph_eval("steps", gold, pred, encoder, rouge_type)


@eval_command.command("graph")
@_taskgraph_options
def eval_graph(gold: Path, pred: Path, encoder: str, rouge_type: str) -> None:
    """Graph metrics over Hungarian-matched steps: In-Degree, Out-Degree, Step Proximity."""
    _taskgraph_eval("graph", gold, pred, encoder, rouge_type)


@main.group("trace")
def trace_group() -> None:
    """Look into run directories: one row's decomposition tree, an HTML page, two runs compared."""


def _open_run_dir(path: Path) -> RunDir:
    try:
        return RunDir.open(path)
    except RunDirError as err:
        _fail(err)


@trace_group.command("show")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--row", "row_id", metavar="ID", help="The row to show (its id, or its index); default: the rows' table.")
def trace_show(run_dir: Path, row_id: str | None) -> None:
    """Print RUN_DIR's rows as a table, or one row's decomposition tree (failures in red)."""
    from rich.console import Console

    from decomp.runtime.views import tree as trace_view

    run = _open_run_dir(run_dir)
    console = Console()
    try:
        if row_id is None:
            trace_view.show_rows(run, console)
        else:
            record = run.find(row_id)
            trace_view.show_tree(record, run.trace(record["index"]), console)
    except RunDirError as err:
        _fail(err)


@trace_group.command("html")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The page to write (one standalone HTML file).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
def trace_html(run_dir: Path, output: Path, force: bool) -> None:
    """Write RUN_DIR as one standalone HTML page: the rows with their scores, each row's tree
    with collapsible nodes, every prompt and raw model output. It needs no network."""
    from decomp.runtime.views.page import render_html

    run = _open_run_dir(run_dir)
    if output.exists() and not force:
        _fail(RunDirError(f"{output} exists: pass --force to overwrite it"))
    try:
        page = render_html(run)
    except RunDirError as err:
        _fail(err)
    output.write_text(page, encoding="utf-8")
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
    except RunDirError as err:
        _fail(err)
    if as_json:
        for difference in differences:
            click.echo(json.dumps(difference, ensure_ascii=False, default=str))
    else:
        diffing.show_diff(differences, a, b, Console())


@main.command()
def programs() -> None:
    """List the bundled programs (run one with `decomp run NAME`)."""
    for path in sorted(PROGRAMS_DIR.rglob("*.decomp")):
        click.echo(str(path.relative_to(PROGRAMS_DIR).with_suffix("")))


if __name__ == "__main__":  # pragma: no cover
    main()
