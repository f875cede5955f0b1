"""`decomp run --input` over rows, one of which makes its prompt template explode (issue 29): that
row records the error, the others are answered, and the whole run ends within a bounded time in
little memory, through a real subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

#: Doubling through `|string` (refused at once by size) or macro recursion (stopped at the deadline),
#: as many times as the question has characters.
TEMPLATES = {
    "size": "{% set s = namespace(v='x') %}{% for i in range(query|length) %}{% set s.v = [s.v, s.v]|string %}"
            "{% endfor %}Q: {{ s.v|length }} {{ query }}",
    "time": "{% macro f(k) %}{% if k > 0 %}{{ f(k - 1) }}{{ f(k - 1) }}{% else %}x{% endif %}{% endmacro %}"
            "Q: {{ f(query|length)|length }} {{ query }}",
}
LIMIT = 2


@pytest.mark.parametrize("bomb", sorted(TEMPLATES))
def test_one_bomb_row_fails_alone_and_the_run_ends_in_bounded_time(tmp_path, bomb):
    program = tmp_path / "p.decomp"
    text = TEMPLATES[bomb].replace("'", "\\'")
    program.write_text(f"handler h = prompt(text='{text}', template=true)\n"
                       "program p(question) {\n    QS: [h] #question\n}\nmain p\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in (
        {"id": "a", "question": "ok"}, {"id": "bomb", "question": "x" * 60}, {"id": "c", "question": "fine"})))
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"default": "yes"}))
    run_dir = tmp_path / "run"
    started = time.monotonic()
    with subprocess.Popen([sys.executable, "-m", "decomp.runtime.cli", "run", str(program), "--input", str(rows),
                           "--model", f"fake:{answers}", "--handler-timeout", str(LIMIT), "--run-dir", str(run_dir)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        watchdog = threading.Timer(120, proc.kill)
        watchdog.start()
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak memory
        watchdog.cancel()
    took = time.monotonic() - started
    assert os.waitstatus_to_exitcode(status) == 3, stderr  # some rows ended in an error
    results = {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert (results["a"]["answer"], results["c"]["answer"]) == ("yes", "yes")
    error = results["bomb"]["error"]
    assert results["bomb"]["outcome"] == "error" and "[h] prompt" in error and "template: TemplateLimitError" in error
    if bomb == "time":
        assert f"the template ran longer than its time limit of {LIMIT} s" in error
    assert took < 20 + LIMIT  # start-up included, generously: the bomb ran for minutes and 17 GB before
    assert usage.ru_maxrss / 1024 < 500, usage.ru_maxrss  # the run's peak, KB on Linux (17 GB before)
