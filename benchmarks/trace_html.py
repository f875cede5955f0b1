"""Benchmark: how fast the page of `decomp trace html` opens in a browser, for a 200-row run.

Runs `decomp/letter_cat_llm` through the command line (`decomp run --input ... --run-dir ...`) on
ROWS letter-concatenation questions against the mock OpenAI server answering with the oracle
(benchmarks/letter_cat_oracle.py; no latency by default, concurrency 16, no cache), renders the
run directory with `render_html`, and opens the page from a file:// URL in headless Chromium
(Debian's chromium and chromium-driver, through selenium; the flags the tests use).

Prints one JSON line:

    page_bytes      the page's size; `trees_json_bytes` is what the trees alone take as plain
                    JSON (TraceNode.to_dict), before the page's string table deduplicates them
    render_s        render_html's wall time (reading the traces included)
    open_s          wall time of driver.get (selenium returns after the load event)
    load_event_ms   the navigation entry's loadEventEnd; `dom_interactive_ms` its domInteractive
    first_tree_ms   clicking the first row until its tree is laid out, timed in the page (the
                    first click also parses the embedded JSON); `next_tree_ms` the median over
                    the next ten rows
    target_open_s   2.0

    python benchmarks/trace_html.py [--rows 200] [--latency 0] [--concurrency 16]
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import (  # noqa: E402
    PROGRAM,
    make_rows,
    mock_server,
)

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
TARGET_OPEN_S = 2.0
_FIRST_TREE = """
var started = performance.now();
document.querySelector("#rows tr.row").click();
var nodes = document.querySelectorAll("#tree .node").length;
document.getElementById("tree").getBoundingClientRect();  // force layout
return [performance.now() - started, nodes];
"""
_NEXT_TREES = """
var rows = document.querySelectorAll("#rows tr.row"), times = [];
for (var i = 1; i < Math.min(rows.length, 11); i++) {
  var started = performance.now();
  rows[i].click();
  document.getElementById("tree").getBoundingClientRect();
  times.push(performance.now() - started);
}
times.sort(function (a, b) { return a - b; });
return times.length ? times[Math.floor(times.length / 2)] : null;
"""
_NAVIGATION = """
var n = performance.getEntriesByType("navigation")[0];
return [n.loadEventEnd, n.domInteractive];
"""


def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=200)
    p.set_defaults(latency=0.0)
    args = p.parse_args(argv)
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        sys.exit("benchmarks/trace_html.py: Debian packages chromium and chromium-driver are not installed")

    from decomp.runtime.storage.rundir import RunDir
    from decomp.runtime.views.page import render_html

    with tempfile.TemporaryDirectory(prefix="decomp-trace-html-") as tmp:
        folder = Path(tmp)
        run_dir = make_run(folder, args)
        run = RunDir.open(run_dir)
        started = time.perf_counter()
        page = render_html(run)
        render_s = time.perf_counter() - started
        trees_bytes = sum(len(json.dumps(t.to_dict(), ensure_ascii=False).encode()) for _, t in run.traces())
        file = folder / "run.html"
        file.write_text(page, encoding="utf-8")
        timings = open_in_chromium(file, folder / "profile")
        records = run.records()

    record = {
        "benchmark": "trace_html", "rows": len(records), "failed": sum("error" in r for r in records),
        "page_bytes": len(page.encode()), "trees_json_bytes": trees_bytes, "render_s": round(render_s, 3),
        **timings, "target_open_s": TARGET_OPEN_S,
    }
    emit(record)
    return record


def make_run(folder: Path, args) -> Path:
    """A run directory of `decomp/letter_cat_llm` on args.rows rows, made through the command line."""
    from click.testing import CliRunner
    from decomp.runtime.cli import main as cli
    from decomp.runtime.storage.jsonl import write_jsonl

    data = folder / "data.jsonl"
    write_jsonl(data, make_rows(args.rows, args.words, args.seed))
    run_dir = folder / "run"
    env = {"OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY") or "unused", "DECOMP_CACHE_DIR": str(folder / "cache")}
    with mock_server(args.latency) as server:
        result = CliRunner().invoke(cli, [
            "run", str(PROGRAM), "--input", str(data), "--run-dir", str(run_dir), "--model", "openai:oracle",
            "--base-url", server.base_url, "--concurrency", str(args.concurrency), "--cache", "off"], env=env)
    if result.exit_code != 0:
        sys.exit(f"decomp run failed:\n{result.output}")
    return run_dir


def chromium_options(user_data_dir: Path):
    """Headless Chromium with no network of its own (the flags tests/runtime/test_trace_html.py uses)."""
    from selenium.webdriver.chrome.options import Options

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-quic", f"--user-data-dir={user_data_dir}", "--window-size=1400,1000"):
        options.add_argument(flag)
    return options


def open_in_chromium(file: Path, profile: Path) -> dict:
    """Open `file` and time it, then time the first row's tree (see the module docstring)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=chromium_options(profile))
    try:
        driver.get("about:blank")  # the browser's own start-up is not the page's
        started = time.perf_counter()
        driver.get(file.as_uri())
        open_s = time.perf_counter() - started
        load_event, interactive = driver.execute_script(_NAVIGATION)
        tree_ms, nodes = driver.execute_script(_FIRST_TREE)
        next_ms = driver.execute_script(_NEXT_TREES)
    finally:
        driver.quit()
    return {"open_s": round(open_s, 3), "load_event_ms": round(load_event, 1),
            "dom_interactive_ms": round(interactive, 1), "first_tree_ms": round(tree_ms, 1),
            "first_tree_nodes": nodes, "next_tree_ms": None if next_ms is None else round(next_ms, 1)}


if __name__ == "__main__":
    main()
