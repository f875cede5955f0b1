"""TextCraft as a plugin: the `textcraft` environment, the symbolic `textcraft_executor` and
`textcraft_planner` kinds, and the `decomp textcraft generate` command."""
from __future__ import annotations

import json
from pathlib import Path

import click

from decomp.dsl.errors import DecompError
from decomp.dsl.values import storable_json
from decomp.handlers.plugins import hookimpl
from decomp.programs.adapt.textcraft.env import make_textcraft
from decomp.programs.adapt.textcraft.symbolic import TextCraftExecutor, TextCraftPlanner


@hookimpl
def register_environments(register):
    register("textcraft", make_textcraft)


@hookimpl
def register_kinds(register):
    register(TextCraftExecutor)
    register(TextCraftPlanner)


@hookimpl
def register_commands(cli):
    cli.add_command(textcraft)


@click.group("textcraft")
def textcraft() -> None:
    """The TextCraft environment of ADaPT (run its programs with `decomp run adapt/textcraft`)."""


@textcraft.command("generate")
@click.option("--from", "source", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Tasks whose crafting commands make the pool: JSONL rows {goal, crafting_commands}.")
@click.option("--depth", type=click.IntRange(1), required=True, help="Recipe depth of every goal.")
@click.option("-n", "count", type=click.IntRange(1), default=10, show_default=True, help="How many tasks.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--distractors", type=click.IntRange(0), default=8, show_default=True,
              help="Commands added to each task beyond the goal's recipe tree.")
def textcraft_generate(source: Path, depth: int, count: int, seed: int, distractors: int) -> None:
    """Print COUNT new tasks (JSONL) whose goals have recipe depth DEPTH, made from the crafting
    commands of the tasks in --from; the same seed gives the same tasks."""
    from decomp.programs.adapt.textcraft.generate import generate_tasks

    try:
        pool = command_pool(source)
        rows = generate_tasks(list(pool), depth, count, seed=seed, distractors=distractors)
    except OSError as err:  # a DecompError ends in its words in the `decomp` group
        raise DecompError(str(err)) from err
    for row in rows:
        click.echo(storable_json(row))


def command_pool(source: Path) -> dict[str, None]:
    """The crafting commands of the task rows in `source` (JSON lines; lines that are not a
    task with a list of commands add nothing), in first-seen order."""
    pool: dict[str, None] = {}
    with open(source, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):  # not a task row (blank, broken, nested too deep)
                continue
            commands = row.get("crafting_commands") if isinstance(row, dict) else None
            if isinstance(commands, list):
                pool.update(dict.fromkeys(c for c in commands if isinstance(c, str)))
    return pool
