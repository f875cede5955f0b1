"""The `decomp` command line. Each command parses its arguments and calls the library."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..dsl.checker import check_fewshot
from ..dsl.errors import DecompError, Diagnostics
from ..dsl.parser import read_fewshot
from . import evaluate as evaluation
from .batch import run_file
from .inspect import describe
from .session import Session

PROGRAMS_DIR = Path(__file__).resolve().parent.parent / "programs"


def _fail(err: Exception) -> None:
    click.echo(err.format() if isinstance(err, DecompError) else f"error: {err}", err=True)
    sys.exit(1)


def resolve_program(name: str) -> Path:
    """A path as given, or the name of a bundled program such as `decomp/letter_cat_symbolic`."""
    path = Path(name)
    if path.exists():
        return path
    bundled = PROGRAMS_DIR / (name if name.endswith(".decomp") else name + ".decomp")
    if bundled.is_file():
        return bundled
    raise click.BadParameter(f"no such file or bundled program: {name} (see `decomp programs`)")


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


@main.command()
@click.argument("file")
@click.option("--question", "-q", help="Run on this one question and print the answer.")
@click.option("--input", "data", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Dataset: JSONL rows {id, question, ...} or DecomP's DROP-style JSON.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write one JSON line per row (with --input).")
@click.option("--field", "fields", multiple=True, metavar="NAME=VALUE", help="Another input field (repeatable).")
@click.option("--model", help="Model for handlers that do not name one, e.g. fake:answers.json.")
@click.option("--concurrency", default=8, show_default=True, help="Rows run at once (with --input).")
@click.option("--trace", "show_trace", is_flag=True, help="With --question: print the decomposition tree as JSON.")
def run(file, question, data, output, fields, model, concurrency, show_trace) -> None:
    """Run the program FILE on one --question or on every row of --input."""
    session = Session(model=model)
    try:
        loaded = session.load(resolve_program(file))
    except (DecompError, OSError) as err:
        _fail(err)
    if data is not None:
        _run_batch(session, loaded, data, output, concurrency)
    elif question is not None:
        _run_one(session, loaded, question, fields, show_trace)
    else:
        raise click.UsageError("give --question TEXT or --input DATA --output OUT.jsonl")


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


def _field(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise click.BadParameter(f"expected NAME=VALUE, got {text!r}")
    return name, value


def _run_batch(session, loaded, data: Path, output: Path | None, concurrency: int) -> None:
    if output is None:
        raise click.UsageError("--input needs --output OUT.jsonl")
    try:
        summary = run_file(session, loaded, data, output, concurrency)
    except (OSError, ValueError) as err:
        _fail(err)
    click.echo(json.dumps({"rows": summary.rows, "failed": summary.failed, "output": str(output)}))


@main.command("eval")
@click.option("--gold", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Gold data: JSONL rows {id, answer} or DecomP's DROP-style JSON.")
@click.option("--pred", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Predictions: the JSONL written by `decomp run --input`.")
@click.option("--metric", type=click.Choice(["em", "set_em", "f1"]), default="em", show_default=True)
def eval_command(gold: Path, pred: Path, metric: str) -> None:
    """Score predictions against gold answers, normalised like the DROP evaluator."""
    try:
        summary = evaluation.evaluate_files(gold, pred, metric)
    except (OSError, ValueError) as err:
        _fail(err)
    click.echo(json.dumps(summary))


@main.command()
def programs() -> None:
    """List the bundled programs (run one with `decomp run NAME`)."""
    for path in sorted(PROGRAMS_DIR.rglob("*.decomp")):
        click.echo(str(path.relative_to(PROGRAMS_DIR).with_suffix("")))


if __name__ == "__main__":  # pragma: no cover
    main()
