"""TaskLAMA's metrics as a plugin: `decomp eval steps` and `decomp eval graph`."""
from __future__ import annotations

from pathlib import Path

import click

from decomp.dsl.errors import DecompError
from decomp.dsl.values import storable_json
from decomp.handlers.plugins import hookimpl

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@hookimpl
def register_commands(cli):
    evaluate = cli.commands.get("eval")
    if not isinstance(evaluate, click.Group):
        raise RuntimeError("there is no `decomp eval` group to add `steps` and `graph` to")
    evaluate.add_command(eval_steps)
    evaluate.add_command(eval_graph)


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
        from decomp.programs.tasklama.taskgraph import data, metrics, similarity

        gold_rows, pred_rows = data.read_jsonl(gold), data.read_predictions(pred)
        score = metrics.evaluate_steps if kind == "steps" else metrics.evaluate_graphs
        summary = score(gold_rows, pred_rows, similarity.get_similarity(encoder), rouge_type)
    except OSError as err:  # a DecompError ends in its words in the `decomp` group
        raise DecompError(str(err)) from err
    click.echo(storable_json(summary))


@click.command("steps")
@_taskgraph_options
def eval_steps(gold: Path, pred: Path, encoder: str, rouge_type: str) -> None:
    """Step metrics: Hungarian, relaxed (one-to-two) and one-to-many P/R/F1/F2, ROUGE F1/F2.

    Reads rows {"id", "task", "assumptions", "steps": [...], "edges": [[i, j], ...]} and prints
    one JSON object of mean TaskLAMA metrics."""
    _taskgraph_eval("steps", gold, pred, encoder, rouge_type)


@click.command("graph")
@_taskgraph_options
def eval_graph(gold: Path, pred: Path, encoder: str, rouge_type: str) -> None:
    """Graph metrics over Hungarian-matched steps: In-Degree, Out-Degree, Step Proximity."""
    _taskgraph_eval("graph", gold, pred, encoder, rouge_type)
