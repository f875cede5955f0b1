"""`decomp optimize`: the command line of demonstration bootstrapping, a built-in plugin (the
plugin table's `register_commands`)."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from decomp.dsl.errors import DecompError
from decomp.dsl.values import storable_json
from decomp.handlers.plugins import hookimpl
from decomp.runtime.engine.loader import load_plugin
from decomp.runtime.runs.command_options import given_again, session_options, trust_options

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
#: The exit status of an interrupted optimisation (128 + SIGINT), as `decomp run`'s.
EXIT_INTERRUPTED = 130


@hookimpl
def register_commands(cli):
    cli.add_command(optimize_command)


@click.command("optimize")
@click.argument("program")
@click.option("--train", required=True, type=_FILE, help="Training rows (JSONL or DROP-style JSON): the teacher runs "
              "on them, and those the metric accepts give demonstrations.")
@click.option("--dev", required=True, type=_FILE, help="Development rows: every candidate is scored on them.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The folder to write the optimised program to (new, empty, or an earlier optimisation's, "
                   "which is resumed).")
@click.option("--teacher", metavar="MODEL", help="The model whose traces give the demonstrations (default: --model).")
@click.option("--metric", help="em, f1, set_em, outcome, or module:function (function(row, answer, trace) -> float); "
              "default: the program's metric, else em.")
@click.option("--threshold", type=float, default=1.0, show_default=True,
              help="A training row gives demonstrations when the metric scores it at least this.")
@click.option("--candidates", type=click.IntRange(min=0), default=8, show_default=True,
              help="Seeded random candidates, besides zero-shot, labelled and bootstrapped.")
@click.option("--max-demos", type=click.IntRange(min=1), default=4, show_default=True,
              help="The most demonstrations any candidate adds to one handler.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the random candidates.")
@click.option("--foreach-demos", type=click.IntRange(min=1), default=1, show_default=True,
              help="The most demonstrations one row gives a handler from the items of foreach steps.")
@click.option("--no-own-examples", "keep_examples", flag_value=False, default=True,
              help="Candidates show only the demonstrations, not the handlers' own examples before them.")
@click.option("--rounds", type=click.IntRange(min=1), default=1, show_default=True,
              help="Teacher rounds: the training rows that did not pass run again, each round new samples.")
@click.option("--teacher-temperature", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="The temperature of the teacher's rounds after the first.")
@click.option("--no-prune", "prune", flag_value=False, default=True,
              help="Score every candidate on every development row, even one that can no longer win.")
@click.option("--main", "main_name", metavar="NAME", help="Optimise this program of PROGRAM instead of its `main`.")
@click.option("--force", is_flag=True, help="Discard an earlier optimisation's work in --out and start over.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or notes; only the summary line.")
@session_options
@trust_options
def optimize_command(program: str, train: Path, dev: Path, out: Path, teacher: str | None, metric: str | None,
                     threshold: float, candidates: int, max_demos: int, seed: int, foreach_demos: int,
                     keep_examples: bool, prune: bool, rounds: int, teacher_temperature: float, main_name: str | None,
                     force: bool, quiet: bool, plugins: tuple[str, ...], max_calls: int | None, **opts) -> None:
    """Improve PROGRAM's few-shot prompts and decomposers with demonstrations from its own
    successful traces.

    The teacher runs PROGRAM over --train; from the traces of the rows the metric accepts, each
    prompt and decomposer gets demonstrations in its own format. Candidates (zero-shot, labelled,
    bootstrapped, --candidates random draws) are scored on --dev; the best is written to --out as
    an ordinary program folder (the .decomp files changed only in file= options) with
    report.json. The projected model calls are printed first, and --max-calls bounds them all.
    Run the same command again to resume. Prints one summary line.

    Interrupted (Ctrl-C), it ends with one line on stderr, the rows kept and left of the runs
    under way and the command that resumes it, and exit status 130.
    """
    from decomp.learning.optimize.search import OptimizeInterrupted, OptimizeSettings, optimize
    from decomp.runtime.runs.api import RunOptions, find_program

    note = (lambda text: None) if quiet else (lambda text: click.echo(text, err=True))
    try:
        settings = OptimizeSettings(metric=metric, threshold=threshold, candidates=candidates, max_demos=max_demos,
                                    seed=seed, foreach_demos=foreach_demos, keep_examples=keep_examples,
                                    rounds=rounds, teacher_temperature=teacher_temperature, max_calls=max_calls,
                                    prune=prune)
        path = find_program(program)
        for plugin in plugins:
            load_plugin(plugin, path.parent)
        done = optimize(path, train, dev, out=out, teacher=teacher, options=RunOptions(**opts), settings=settings,
                        main=main_name, force=force, progress=None if not quiet else False, on_note=note)
    except OptimizeInterrupted as stop:
        _interrupted(stop)
    except OSError as err:  # a DecompError ends in its words in the `decomp` group
        raise DecompError(str(err)) from err
    click.echo(storable_json(done.to_dict()))


def _interrupted(stop) -> None:
    """An interrupted optimisation ends with one line on stderr, what it kept and the command
    that resumes it (the same one, without --force), and exit status 130 (128 + SIGINT)."""
    again, hidden = given_again(click.get_current_context(), drop=("force",))
    secret = f" (give {' and '.join(hidden)} again: credentials are not printed)" if hidden else ""
    click.echo(f"interrupted: {stop}; resume with: {shlex.join(['decomp', 'optimize', *again])}{secret}", err=True)
    sys.exit(EXIT_INTERRUPTED)
