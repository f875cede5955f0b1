"""`decomp run --input` with hostile Python helpers: on a 3-row dataset, the row that triggers the
hostile function ends in its own error (a deadline, a memory limit, what the function raised,
how its worker died) and the other two rows are answered; --handler-memory sets the limit."""
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main

HELPERS = '''import asyncio, ctypes, os, time

def sleepy(query):
    if query == "bad":
        time.sleep(60)
    return query.upper()

def spin(query):
    while query == "bad":
        pass
    return query.upper()

async def forever(query):
    while query == "bad":
        await asyncio.sleep(1)
    return query.upper()

def shared(query):
    if query == "bad":
        a = []
        for _ in range(60):
            a = [a, a]
        return repr(a)
    return query.upper()

def hog(query):
    if query == "bad":
        return len("x" * (5 * 2**30))
    return query.upper()

def leave(query):
    if query == "bad":
        raise SystemExit(0)
    return query.upper()

def interrupt(query):
    if query == "bad":
        raise KeyboardInterrupt()
    return query.upper()

class Odd(BaseException):
    pass

def odd(query):
    if query == "bad":
        raise Odd("odd")
    return query.upper()

async def cancelled(query):
    if query == "bad":
        raise asyncio.CancelledError()
    return query.upper()

def exits(query):
    if query == "bad":
        os._exit(5)
    return query.upper()

def segfault(query):
    if query == "bad":
        ctypes.string_at(0)
    return query.upper()
'''

CASES = [
    ("sleepy", "ran longer than its time limit of 1 s"),
    ("spin", "ran longer than its time limit of 1 s"),
    ("forever", "ran longer than its time limit of 1 s"),
    ("shared", "ran longer than its time limit of 1 s"),
    ("hog", "used more than its memory limit of 1,024 MiB (raise it with the handler's memory=MB option or "
            "the run's --handler-memory MB)"),
    ("leave", "raised SystemExit: 0"),
    ("interrupt", "raised KeyboardInterrupt"),
    ("odd", "raised Odd: odd"),
    ("cancelled", "raised CancelledError"),
    ("exits", "its worker process exited with code 5 before answering"),
    ("segfault", "its worker process was killed by signal SIGSEGV before answering"),
]


def _files(tmp_path, function: str, options: str = ", timeout=1"):
    (tmp_path / "helpers_hostile.py").write_text(HELPERS)
    program = tmp_path / "p.decomp"
    program.write_text(f'handler f = python(function="helpers_hostile:{function}"{options})\nmain f\n')
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": q}) + "\n" for i, q in enumerate(["a", "bad", "c"])))
    return program, data


def _run(tmp_path, program, data, *flags):
    out = tmp_path / "run"
    started = time.monotonic()
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--run-dir", str(out),
                                       "--cache", "off", *flags])
    lines = {r["index"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    return result, lines, time.monotonic() - started


@pytest.mark.parametrize("function, error", CASES, ids=[c[0] for c in CASES])
def test_the_hostile_row_ends_alone_and_the_other_rows_are_answered(tmp_path, function, error):
    program, data = _files(tmp_path, function)
    result, lines, seconds = _run(tmp_path, program, data)
    assert result.exit_code == 3, result.output
    assert lines[0]["answer"] == "A" and lines[2]["answer"] == "C"
    assert f"function helpers_hostile:{function}" in lines[1]["error"] and error in lines[1]["error"], lines[1]
    assert seconds < 30  # a first worker start included; the hostile call itself ends within its limit + ~1 s


def test_handler_memory_sets_the_limit_of_handlers_without_their_own(tmp_path):
    program, data = _files(tmp_path, "hog", "")
    result, lines, _ = _run(tmp_path, program, data, "--handler-memory", "300")
    assert result.exit_code == 3, result.output
    assert "used more than its memory limit of 300 MiB" in lines[1]["error"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["options"]["handler_memory_mb"] == 300
    program.write_text('handler f = python(function="helpers_hostile:hog", memory=200)\nmain f\n')
    result, lines, _ = _run(tmp_path, program, data, "--handler-memory", "300", "--force")
    assert "used more than its memory limit of 200 MiB" in lines[1]["error"]


def test_a_bad_handler_memory_is_a_usage_error(tmp_path):
    program, data = _files(tmp_path, "hog")
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--handler-memory", "0"])
    assert result.exit_code == 2, result.output


@pytest.mark.slow
def test_a_script_without_a_main_guard_is_not_run_again_in_the_workers(tmp_path):
    """multiprocessing would run the parent's `__main__` script again in each worker: a script
    that calls decomp at its top level must run once, and its helpers in workers."""
    (tmp_path / "helpers_hostile.py").write_text(HELPERS + "\ndef pid(query):\n    return os.getpid()\n")
    (tmp_path / "p.decomp").write_text('handler f = python(function="helpers_hostile:pid")\nmain f\n')
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f'''
        import os
        from decomp import Session
        with open({str(tmp_path / "ran.txt")!r}, "a") as file:
            file.write("ran\\n")
        session = Session()
        module = session.load({str(tmp_path / "p.decomp")!r})
        answer = session.run(module, {{"question": "q"}}).answer
        print(answer != os.getpid(), isinstance(answer, int))
    '''))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
    assert (tmp_path / "ran.txt").read_text() == "ran\n"
