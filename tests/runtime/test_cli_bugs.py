"""Bugs are bugs: a `decomp` command that raises anything but a `DecompError` ends with Python's
traceback and one line saying it is a bug in decomp and to report it (exit status 1); a user's
error stays one worded, positioned message, with no traceback; click's usage errors stay 2."""
from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from click.testing import CliRunner

from decomp.runtime import cli

PROGRAM = "handler a = regex(pattern=\"(.*)\")\nprogram p(q) {\n    QS: [a] #q\n}\nmain p\n"
BUG = (f"decomp: this is a bug in decomp-lang {version('decomp-lang')} (or in a plugin it loaded), not in your "
       "program or data: please report it to decomp's maintainers, with the traceback above.")

#: The real command line in a process of its own, `describe` (what `decomp check` prints) made
#: to raise what the test names: an unexpected exception deep inside a command.
_RAISING = """
import sys
import decomp.runtime.cli as cli
from decomp.dsl.errors import DecompError

def describe(*args, **kwargs):
    raise {raised}

cli.describe = describe
sys.argv = ["decomp", *sys.argv[1:]]
cli.main(prog_name="decomp")
"""


def _decomp(*args: str, raised: str | None = None) -> subprocess.CompletedProcess:
    command = ["-c", _RAISING.format(raised=raised)] if raised else ["-m", "decomp"]
    return subprocess.run([sys.executable, *command, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_bug_ends_with_its_traceback_and_the_line_that_says_so(tmp_path):
    (tmp_path / "p.decomp").write_text(PROGRAM)
    done = _decomp("check", str(tmp_path / "p.decomp"), raised="ZeroDivisionError('division by zero')")
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.rstrip("\n").splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-2:] == ["ZeroDivisionError: division by zero", BUG]
    assert 'in describe' in done.stderr  # the traceback reaches the code that raised


@pytest.mark.slow
def test_a_decomp_error_no_command_caught_is_said_in_words(tmp_path):
    (tmp_path / "p.decomp").write_text(PROGRAM)
    done = _decomp("check", str(tmp_path / "p.decomp"), raised="DecompError('the run directory is locked')")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "error: the run directory is locked\n")


@pytest.mark.slow
def test_a_user_error_is_positioned_with_no_traceback(tmp_path):
    bad = tmp_path / "bad.decomp"
    bad.write_text(PROGRAM.replace("QS: [a] #q", "QS: (bogus) [a] #q"))
    done = _decomp("run", str(bad), "-q", "x")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "bug" not in done.stderr
    assert done.stderr.splitlines()[:3] == [f"{bad}:3:9: unknown operator '(bogus)'", "        QS: (bogus) [a] #q",
                                            "            ^^^^^^^"]


@pytest.mark.slow
def test_usage_errors_and_ctrl_c_are_as_click_has_them(tmp_path):
    usage = _decomp("check")
    assert usage.returncode == 2 and "Missing argument 'FILE'" in usage.stderr and "bug" not in usage.stderr
    (tmp_path / "p.decomp").write_text(PROGRAM)
    stopped = _decomp("check", str(tmp_path / "p.decomp"), raised="KeyboardInterrupt()")
    assert stopped.returncode == 1 and stopped.stderr.strip() == "Aborted!"


def test_in_process_the_bug_goes_on_with_the_line_as_its_note(tmp_path, monkeypatch):
    """A caller of `main` (CliRunner, a test) gets the exception itself, the bug line as its note."""
    (tmp_path / "p.decomp").write_text(PROGRAM)

    def broken(*args, **kwargs):
        raise RuntimeError("a broken invariant")

    monkeypatch.setattr(cli, "describe", broken)
    result = CliRunner().invoke(cli.main, ["check", str(tmp_path / "p.decomp")])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)
    assert result.exception.__notes__ == [BUG]


#: Files a user may give that cannot be used, each said in words (`error: ...`, exit status 1)
#: now that the commands catch only `DecompError` and OSError.
BAD_FILES = {
    "header.csv": b"question,,answer\nq,x,a\n",
    "spread.json": b'{\n  "question": "q"\n}\n',
    "twice.jsonl": b'{"id": "1", "answer": "a"}\n{"id": "1", "answer": "b"}\n',
    "gold.jsonl": b'{"id": "1", "answer": "a", "steps": ["a"], "edges": []}\n',
    "latin1.jsonl": b'{"id": "\xe9", "steps": []}\n',
    "broken.json": b'[{"id": "1"}',
    "pool.jsonl": b'{"crafting_commands": ["craft 1 a using 1 b", "make a chest"]}\n',
    "metric.py": b"def five(a, b, c, d, e):\n    return 1.0\n",
}


@pytest.mark.parametrize("args, said", [
    (["run", "decomp/letter_cat_symbolic", "--input", "header.csv", "--run-dir", "out"],
     "error: header.csv:1: column 2 of the header line has no name"),
    (["run", "decomp/letter_cat_symbolic", "--input", "header.csv", "--dry-run"],
     "error: header.csv:1: column 2 of the header line has no name"),
    (["run", "decomp/letter_cat_symbolic", "--input", "spread.json", "--run-dir", "out"],
     "error: the file is one JSON object spread over several lines, but not a DROP-style dataset"),
    (["eval", "--gold", "gold.jsonl", "--pred", "twice.jsonl"],
     "error: twice.jsonl: id '1' is predicted twice with different answers"),
    (["eval", "--gold", "gold.jsonl", "--pred", "gold.jsonl", "--metric", "nope"], "error: unknown metric 'nope'"),
    (["eval", "--gold", "gold.jsonl", "--pred", "gold.jsonl", "--metric", "metric:five"],
     "error: metric 'metric:five': five(a, b, c, d, e) takes neither form of a metric"),
    (["eval", "steps", "--gold", "latin1.jsonl", "--pred", "gold.jsonl", "--encoder", "exact"],
     "error: latin1.jsonl: the file is not UTF-8 text (byte 8)"),
    (["eval", "graph", "--gold", "gold.jsonl", "--pred", "broken.json", "--encoder", "exact"],
     "error: broken.json: not a JSON array (Expecting ',' delimiter"),
    (["textcraft", "generate", "--from", "pool.jsonl", "--depth", "1"],
     "error: crafting command 2: cannot read the crafting command 'make a chest'"),
])
def test_a_file_that_cannot_be_used_is_said_in_words(tmp_path, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    for name, data in BAD_FILES.items():
        (tmp_path / name).write_bytes(data)
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert said in result.output and "Traceback" not in result.output


def test_a_prices_file_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "prices.json").write_bytes(b"\xff\xfe{}")
    result = CliRunner().invoke(cli.main, ["run", "decomp/letter_cat_symbolic", "-q", "x", "--prices",
                                           str(tmp_path / "prices.json")])
    assert result.exit_code == 2 and f"{tmp_path / 'prices.json'}: not a prices file ('utf-8' codec" in result.output
