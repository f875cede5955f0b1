"""Benchmark: the embedded local model (Gemma 3 270M) by three paths, on the same workload.

The workload: the bundled `decomp/letter_cat_llm` (an LLM decomposer and three few-shot
handlers, about 10 calls a row) on generated letter-concatenation rows, and `tasklama/steps`
(one few-shot prompt, up to 100 generated tokens) on the first tasks of the MSComplexTasks
fixture; rows one after another, greedy, no step cache. Each path runs in a process of its own
(its peak RSS is its own) after one warm-up row that is not among the measured ones:

  before: today's path until issue 25: the context reset before every call, 512-token batches,
          generation on one thread (`reuse_prefix=false, n_threads=1, n_batch=512`; prompt batches on
          llama-cpp-python's default of every CPU);
  fresh:  the new path without prefix reuse (`reuse_prefix=false`): every prompt read from its
          first token in the same 32-token batches, so its answers are what reuse must not change;
  new:    decomp's local backend as it ships: prefix reuse, threads = usable cores;
  server: llama-cpp-python's own OpenAI-compatible server (its `server` extra), started here on
          127.0.0.1 with its prompt cache on (`--cache true`), the same GGUF and thread count,
          reached through `openai:` (completions API).

Needs `pip install -e '.[bench]'` (the `local` extra and llama-cpp-python's server). Minutes:
about 15 with the defaults on two cores.

    python benchmarks/local_model.py [--rows 20] [--programs letter_cat_llm steps] [--paths before fresh new server]

One JSON line: calls_per_s_before, calls_per_s, calls_per_s_server (the first program's), threads,
answers_identical (every program's new-path answers equal to the old path's); per program
{calls_per_s_before, calls_per_s, calls_per_s_server,
prompt_tokens_per_call (sent), evaluated_tokens_per_call (new path: what it evaluated),
wall_s_*, peak_rss_mb_*, answers_identical (new == before: the batch size changed, so they may
differ), answers_identical_fresh (new == fresh: reuse alone), answers_identical_server, and
rows_differing(_fresh, _server) (rows whose model outputs differ from the new path's),
speedup (new / before), vs_server (new / server), peak_kept_mb (the kept states' peak), and
batch_step_ms (one decode step of 1, 2 and 4 tokens: what decoding several
sequences together would cost on this machine).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/local_model.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402

PROGRAMS = {"letter_cat_llm": "decomp/letter_cat_llm.decomp", "steps": "tasklama/steps.decomp"}
PATHS = ["before", "fresh", "new", "server"]
TASKS = REPO / "tests" / "fixtures" / "mscomplextasks" / "task_subtask_dataset_first32.json"


def workload(program: str, rows: int) -> list[dict]:
    """The warm-up row, then `rows` measured rows, of `program`."""
    if program == "letter_cat_llm":
        from benchmarks.letter_cat_oracle import make_rows
        return [{"question": row["question"]} for row in make_rows(rows + 1, seed=1)]
    tasks = json.loads(TASKS.read_text())
    return [{"task": task["task"], "assumptions": ""} for task in tasks[:rows + 1]]


def model_for(path: str, threads: int, base_url: str | None):
    """The model of one path."""
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.models.local import LocalModel
    from decomp.runtime.models.openai_backend import OpenAIModel

    if path == "server":
        return OpenAIModel("gemma", ModelSettings(base_url=base_url, api="completions", call_deadline=None,
                                                   attempt_deadline=None, timeout=600))
    options = {"before": {"reuse_prefix": False, "n_threads": 1, "n_batch": 512},
               "fresh": {"reuse_prefix": False, "n_threads": threads}}.get(path, {"n_threads": threads})
    return LocalModel("gemma-3-270m", ModelSettings(options=tuple(options.items())))


def run_path(path: str, program: str, rows: int, threads: int, base_url: str | None) -> dict:
    """Run one path over one program's workload in this process: its figures and answers."""
    from decomp import Session
    from decomp.runtime.cli import PROGRAMS_DIR

    model = model_for(path, threads, base_url)
    session = Session(model=model)
    module = session.load(PROGRAMS_DIR / PROGRAMS[program])
    first, *measured = workload(program, rows)
    session.run(module, first)
    before = model.states.stats() if path == "new" else None
    outputs, calls, prompt_tokens = [], 0, 0
    start = time.perf_counter()
    for fields in measured:
        result = session.run(module, fields)
        nodes = [n for n in result.trace.walk() if n.kind == "model"]
        outputs.append([n.raw_output for n in nodes])
        calls += len(nodes)
        prompt_tokens += result.usage.prompt_tokens
    wall = time.perf_counter() - start
    record = {"calls": calls, "wall_s": round(wall, 2), "calls_per_s": round(calls / wall, 3),
              "prompt_tokens_per_call": round(prompt_tokens / max(1, calls), 1), "outputs": outputs,
              "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if path == "new":
        after = model.states.stats()
        record["evaluated_tokens_per_call"] = round(
            (after["evaluated_tokens"] - before["evaluated_tokens"]) / max(1, calls), 1)
        record["peak_kept_mb"] = round(after["peak_kept_bytes"] / 2**20, 1)
        record["batch_step_ms"] = batch_step_ms(model)
    return record


def batch_step_ms(model, repeats: int = 8) -> dict:
    """Milliseconds of one decode step of 1, 2 and 4 tokens after a 300-token prompt (the median
    of `repeats`): decoding k sequences together costs about a k-token step, so a k-token step
    near k times a 1-token step means batching sequences cannot pay here."""
    from decomp.runtime.models.prefix_states import truncate

    llm = model._llm
    prompt = list(llm.tokenize(b"The quick brown fox jumps over the lazy dog. " * 30, add_bos=True))[:300]
    llm.reset()
    llm.eval(prompt)
    figures = {}
    for k in (1, 2, 4):
        times = []
        for _ in range(repeats):
            truncate(llm, len(prompt))
            start = time.perf_counter()
            llm.eval(prompt[1:1 + k])
            times.append(time.perf_counter() - start)
        figures[str(k)] = round(sorted(times)[len(times) // 2] * 1000, 2)
    llm.reset()
    return figures


def start_server(threads: int):
    """llama-cpp-python's server on 127.0.0.1, prompt cache on, the bundled GGUF; ready
    (`decomp.runtime.testing.llama_server`)."""
    from decomp.runtime.testing.llama_server import start_llama_server

    try:
        return start_llama_server(n_ctx=4096, threads=threads, cache=True)
    except RuntimeError as err:
        raise SystemExit(f"{err}\n(pip install -e '.[bench]')") from None


def child(path: str, program: str, rows: int, threads: int, base_url: str | None = None) -> dict:
    """`run_path` in a fresh process (`--child`), its record read back."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        command = [sys.executable, str(Path(__file__).resolve()), "--child", path, program, str(rows),
                   str(threads), base_url or "", out.name]
        subprocess.run(command, check=True)
        return json.loads(Path(out.name).read_text())


def compare(program: str, rows: int, threads: int, paths: list[str]) -> dict:
    """The figures of every path on one program, side by side."""
    records = {path: child(path, program, rows, threads) for path in paths if path != "server"}
    if "server" in paths:
        with start_server(threads) as server:
            records["server"] = child("server", program, rows, threads, server.base_url)
            records["server"]["peak_rss_mb"] = server.peak_rss_mb()
    figures = {"rows": rows}
    for path, suffix in (("before", "_before"), ("fresh", "_fresh"), ("new", ""), ("server", "_server")):
        if path in records:
            for name in ("calls_per_s", "wall_s", "peak_rss_mb", "prompt_tokens_per_call"):
                figures[name + suffix] = records[path][name]
    new = records.get("new")
    if new is not None:
        figures["calls"] = new["calls"]
        figures["evaluated_tokens_per_call"] = new["evaluated_tokens_per_call"]
        figures["peak_kept_mb"] = new["peak_kept_mb"]
        figures["batch_step_ms"] = new["batch_step_ms"]
        for path, suffix in (("before", ""), ("fresh", "_fresh"), ("server", "_server")):
            if path in records:
                figures["answers_identical" + suffix] = records[path]["outputs"] == new["outputs"]
                figures["rows_differing" + suffix] = sum(a != b for a, b in zip(records[path]["outputs"],
                                                                                new["outputs"]))
        if "before" in records:
            figures["speedup"] = round(new["calls_per_s"] / records["before"]["calls_per_s"], 2)
        if "server" in records:
            figures["vs_server"] = round(new["calls_per_s"] / records["server"]["calls_per_s"], 2)
    return figures


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        path, program, rows, threads, base_url, out = argv[1:7]
        record = run_path(path, program, int(rows), int(threads), base_url or None)
        Path(out).write_text(json.dumps(record))
        return record
    p = parser(__doc__)
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--programs", nargs="+", choices=sorted(PROGRAMS), default=["letter_cat_llm", "steps"])
    p.add_argument("--paths", nargs="+", choices=PATHS, default=PATHS)
    p.add_argument("--threads", type=int, default=None, help="threads of the new path and the server "
                   "(default: the usable cores)")
    args = p.parse_args(argv)
    from decomp.runtime.models.local import usable_cores

    threads = args.threads or usable_cores()
    record = {"benchmark": "local_model", "threads": threads, "threads_before": 1,
              "load_before": round(os.getloadavg()[0], 2)}
    for program in args.programs:
        record[program] = compare(program, args.rows, threads, args.paths)
    first = record[args.programs[0]]  # the top level: the first program's rates (letter_cat_llm's by default)
    for name in ("calls_per_s_before", "calls_per_s", "calls_per_s_server"):
        if name in first:
            record[name] = first[name]
    for name in ("answers_identical", "answers_identical_fresh"):
        identical = [record[program].get(name) for program in args.programs]
        if None not in identical:
            record[name] = all(identical)
    record["load_after"] = round(os.getloadavg()[0], 2)
    return emit(record)


if __name__ == "__main__":
    main()
