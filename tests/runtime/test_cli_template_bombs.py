"""`decomp run --input` over rows, one of which makes its prompt template explode (issue 29): that
row records the error, the others are answered, and the whole run ends within a bounded time in
little memory, through a real subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
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
#: The real CLI, telling on stderr, as it exits, its own peak memory (ru_maxrss of a child would
#: start at the forking test process's size).
CLI = ("import atexit, sys\n"
       "atexit.register(lambda: sys.stderr.write(next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))))\n"
       "from decomp.runtime.cli import main\nmain()\n")


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
    proc = subprocess.run([sys.executable, "-c", CLI, "run", str(program), "--input", str(rows),
                           "--model", f"fake:{answers}", "--handler-timeout", str(LIMIT), "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr  # some rows ended in an error
    results = {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert (results["a"]["answer"], results["c"]["answer"]) == ("yes", "yes")
    error = results["bomb"]["error"]
    assert results["bomb"]["outcome"] == "error" and "[h] prompt" in error and "template: TemplateLimitError" in error
    if bomb == "time":
        assert f"the template ran longer than its time limit of {LIMIT} s" in error
    assert took < 20 + LIMIT  # start-up included, generously: the bomb ran for minutes and 17 GB before
    peak_kb = int(proc.stderr.rsplit("VmHWM:", 1)[1].split()[0])
    assert peak_kb / 1024 < 400, proc.stderr  # the run's peak (17 GB before)
