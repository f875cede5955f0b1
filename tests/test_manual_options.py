"""The manual (docs/*.md) and the tool agree, both ways:

- every long flag (`--name`) of every `decomp` command, plugin commands and groups included,
  is in the manual;
- every flag the manual (and README.md) gives a `decomp` command (in a code block's command line or a
  backticked `decomp ...`) is an option of that very command; a flag it gives one of this
  repository's scripts (`python benchmarks/memory.py --rows`, `python -m
  decomp.runtime.testing.mock_server --api chat`) is in that script's `--help`; every other flag
  it names in backticks or code (alone, `--metric-timeout`, or in a message it quotes) is an
  option of some command, or is listed below as another tool's;
- every option docs/handlers.md names for a handler kind is an option of that kind (as a
  .decomp file writes it), every option of a built-in kind is named there, and every built-in
  kind has its row.

The command lines of other programs (pip, pytest, mlflow, ...) are skipped only when the program
is named in FOREIGN_TOOLS, and another tool's flag named alone only when it is in FOREIGN_FLAGS:
nothing goes unchecked by accident.
"""
from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from markdown_it import MarkdownIt

from decomp.handlers.plugins import load as load_plugins
from decomp.runtime.cli import main

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
#: Where a flag the tool lacks must not be written: the manual and the README.
WRITTEN = [ROOT / "README.md", *PAGES]

#: Programs whose flags are not decomp's: their command lines in the manual are not checked.
FOREIGN_TOOLS = {"pip", "pytest", "uv", "mkdocs", "venv", "mlflow", "npx", "code", "ray", "sbatch", "head", "apt-get"}
#: Flags the manual names alone (in backticks) that belong to another tool, and which: a path
#: of this repository (the flag must be in that file), or a tool's name.
FOREIGN_FLAGS = {"--no-cache-dir": "pip", "--strict-markers": "pytest", "--strict": "mkdocs",
                 "--prompt-cache": "runtime/testing/mock_server.py"}
#: Characters around a flag as written in a synopsis (`[--seed S]`, `--metric em|f1`, `--api=chat`).
_EDGES = "[](){},;:.'\"`"


def _commands(command: click.Command = main, path: tuple[str, ...] = ("decomp",)):
    yield path, command
    if isinstance(command, click.Group):  # (list_commands: the plugins' commands too, added when first asked for)
        ctx = click.Context(command)
        for name in sorted(command.list_commands(ctx)):
            yield from _commands(command.get_command(ctx, name), (*path, name))


def _long_flags(command: click.Command) -> set[str]:
    flags = {"--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            flags.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    return flags


COMMANDS = dict(_commands())
ALL_FLAGS = set().union(*(_long_flags(c) for c in COMMANDS.values()))


# ---- what the manual writes
def _segments(page: Path):
    """(line, text) of each command line of the page's sh and text blocks (comments left out,
    continuations joined: after a backslash, and an indented line to the one before it; split at
    `&&`, `||`, ` | ` and `; `) and of each inline code span."""
    for token in MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8")):
        if token.type == "fence" and token.info.split()[:1] in (["sh"], ["text"]):
            lines: list[tuple[int, str]] = []
            for number, line in enumerate(token.content.splitlines(), token.map[0] + 2):
                line = re.sub(r"(^|\s)#\s.*$", "", line)
                if lines and (lines[-1][1].endswith("\\") or line[:1].isspace()):
                    lines[-1] = (lines[-1][0], lines[-1][1].rstrip("\\") + " " + line)
                else:
                    lines.append((number, line))
            for number, line in lines:
                for part in re.split(r"&&|\|\||\s\|\s|;\s", line):
                    yield number, part
        elif token.type == "inline":
            for child in token.children or ():
                if child.type == "code_inline":
                    yield token.map[0] + 1, child.content


def _words(text: str) -> list[str]:
    try:
        words = shlex.split(text)
    except ValueError:  # a quote left open: a fragment of a message, not a command line
        words = text.split()
    while words and (re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0], re.S) or words[0] in ("$", "(", "time", "exec")):
        words.pop(0)
    return words


def _flags(words: list[str]) -> list[str]:
    found = []
    for word in words:
        word = word.strip(_EDGES).split("=", 1)[0]
        if re.fullmatch(r"--[a-z][a-z0-9-]*", word):
            found.append(word)
    return found


def _resolve(words: list[str]) -> tuple[tuple[str, ...], click.Command]:
    """The `decomp` command a command line runs: the longest chain of subcommand names."""
    path, command = ("decomp",), main
    for word in words[1:]:
        found = command.get_command(click.Context(command), word) if isinstance(command, click.Group) else None
        if found is None:  # (get_command: the plugins' commands are added when first asked for)
            break
        path, command = (*path, word), found
    return path, command


def _script(words: list[str]) -> tuple[str, ...] | None:
    """For `python -m MODULE ...`, `python path.py ...` or `path.py ...` (one of this
    repository's): the command that runs it, its subcommand words included (those before the
    first flag); () for another tool's module (`python -m pytest`); None for no script."""
    if not words:
        return None
    start = 1 if words[0] in ("python", "python3") else 0
    rest = words[start:]
    if rest[:1] == ["-m"] and len(rest) > 1:
        if not rest[1].startswith("decomp.") and rest[1].split(".")[0] in FOREIGN_TOOLS:
            return ()
        command = (sys.executable, "-m", rest[1])
        rest = rest[2:]
    elif rest and rest[0].endswith(".py") and (ROOT / rest[0]).is_file():
        command = (sys.executable, rest[0])
        rest = rest[1:]
    else:
        return None
    words = []
    for word in rest:
        if word.startswith("-"):
            break
        words.append(word)
    return (*command, *words)


@functools.cache
def _help(command: tuple[str, ...]) -> str:
    """What `COMMAND --help` prints (run from the repository root); for a script that takes no
    --help (tests/fixtures/make_fixtures.py reads sys.argv itself), its source."""
    done = subprocess.run([*command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        return done.stdout
    assert command[1] != "-m", f"{' '.join(command)} --help exited {done.returncode}: {done.stderr[-2000:]}"
    return (ROOT / command[1]).read_text(encoding="utf-8")


def _problems(page: Path, number: int, text: str, scripts: bool = True) -> list[str]:
    """What is wrong with the flags of one command line or code span (`scripts`: check those of
    this repository's scripts too, by running their --help)."""
    words = _words(text)
    flags = _flags(words)
    if not words or not flags:
        return []
    where = f"{page.relative_to(ROOT)}:{number}: `{' '.join(words)[:100]}`"
    if words[0] == "decomp":
        path, command = _resolve(words)
        known = _long_flags(command)
        return [f"{where}: {' '.join(path)} has no {flag}" for flag in flags if flag not in known]
    script = _script(words)
    if script and not scripts:
        return []
    if script:
        shown = " ".join(script[1:])
        return [f"{where}: {shown} has no {flag} (its --help)" for flag in flags
                if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", _help(script))]
    if script == () or words[0] in FOREIGN_TOOLS:
        return []
    return [f"{where}: no decomp command has {flag} (another tool's? name it in FOREIGN_FLAGS, or its "
            f"program in FOREIGN_TOOLS)" for flag in flags if flag not in ALL_FLAGS and flag not in FOREIGN_FLAGS]


def test_every_flag_of_every_command_is_in_the_manual():
    manual = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    missing = sorted(f"{' '.join(path)} {flag}" for path, command in COMMANDS.items() for flag in _long_flags(command)
                     if flag != "--help" and not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", manual))
    assert not missing, "flags no page of docs/ names:\n" + "\n".join(missing)


def test_every_flag_the_manual_names_exists():
    problems = [problem for page in WRITTEN for number, text in _segments(page)
                for problem in _problems(page, number, text, scripts=False)]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_flag_the_manual_gives_a_script_of_this_repository_is_in_its_help():
    problems = [problem for page in WRITTEN for number, text in _segments(page)
                if _script(_words(text)) for problem in _problems(page, number, text)]
    assert not problems, "\n".join(problems)


def test_the_foreign_flags_are_where_they_are_said_to_be():
    for flag, owner in FOREIGN_FLAGS.items():
        assert flag not in ALL_FLAGS, f"{flag} is a decomp flag now: take it out of FOREIGN_FLAGS"
        if "/" in owner:
            assert f'"{flag}"' in (ROOT / owner).read_text(encoding="utf-8"), f"{owner} has no {flag}"


@pytest.mark.parametrize("line, expected", [
    ("decomp run p.decomp --no-such-flag", "decomp run has no --no-such-flag"),
    ("decomp trace show RUN --jsonl", "decomp trace show has no --jsonl"),
    ("`--no-such-flag`", "no decomp command has --no-such-flag"),
    pytest.param("python benchmarks/memory.py --rows 5 --no-such-flag", "benchmarks/memory.py has no --no-such-flag",
                 marks=pytest.mark.slow),
    pytest.param("python -m decomp.programs.tasklama.taskgraph.scorer train --gold G --no-such-flag", "scorer train has no --no-such-flag",
                 marks=pytest.mark.slow),
    ("frobnicate --fast", "no decomp command has --fast"),
    ("budget exhausted (raise it with --max-row-hander-calls N)", "no decomp command has --max-row-hander-calls"),
])
def test_the_scan_finds_a_flag_that_does_not_exist(line, expected):
    page = ROOT / "docs" / "x.md"
    text = line.strip("`")
    assert any(expected in problem for problem in _problems(page, 1, text))


def test_the_scan_reads_code_blocks_and_inline_spans(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Run `decomp run p --a`.\n\n```sh\ndecomp run p \\\n  --b && decomp check p --c  # --d\n"
                    "decomp eval --metric em|f1 | head\n```\n\n```text\ndecomp compare A B [--seed 0]\n"
                    "               [--method BCa|percentile]\n```\n")
    found = [_flags(_words(text)) for _, text in _segments(page)]
    assert found == [["--a"], ["--b"], ["--c"], ["--metric"], [], ["--seed", "--method"]]


# ---- handler kinds
def _cells(line: str) -> list[str]:
    """A table row's cells (a `|` inside backticks stays in its cell)."""
    cells, cell, ticked = [], "", False
    for char in line.strip().strip("|"):
        ticked ^= char == "`"
        if char == "|" and not ticked:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
    return [*cells, cell.strip()]


def _named_options(cell: str) -> set[str]:
    """The options a cell names: backticked names outside parentheses (inside them: defaults,
    values and remarks)."""
    kept, depth, ticked = "", 0, False
    for char in cell:
        ticked ^= char == "`"
        if not ticked and char in "()":
            depth += 1 if char == "(" else -1
        elif depth == 0:
            kept += char
    return set(re.findall(r"`(\w+)`", kept))


def _kind_rows() -> dict[str, set[str]]:
    rows = {}
    for line in (ROOT / "docs" / "handlers.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            kinds, options = _cells(line)[:2]
            for kind in re.findall(r"`(\w+)`", kinds):
                rows[kind] = _named_options(options)
    return rows


def test_every_option_handlers_md_names_is_the_kinds_and_every_kind_option_is_named():
    registry, rows = load_plugins(), _kind_rows()
    ours = {kind for kind in registry.kinds if registry.kind(kind).__module__.startswith("decomp.")}  # not tests' own kinds
    assert ours <= set(rows), f"kinds without a row in docs/handlers.md: {ours - set(rows)}"
    problems = []
    for kind, named in sorted(rows.items()):
        cls = registry.kind(kind)
        if cls is None:
            problems.append(f"docs/handlers.md has a row for {kind!r}, which is no kind")
            continue
        written = set(cls.Options.written_options())
        problems += [f"{kind}: docs/handlers.md names {name}=, which the kind does not take" for name in sorted(named - written)]
        problems += [f"{kind}: its option {name}= is not in docs/handlers.md" for name in sorted(written - named - {"returns"})]
    assert not problems, "\n".join(problems)


def test_the_options_cell_reads_names_not_values():
    assert _named_options('`stop` (`["\\n"]`), `vote` (`"majority"`, with `returns=` and `n` > 1), `json`') == \
        {"stop", "vote", "json"}
