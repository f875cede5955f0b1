"""Benchmark: the chat API against the completions API on llama-cpp-python's own server (issue 43).

One llama-cpp-python server (its `server` extra, `decomp.runtime.testing.llama_server`) on
127.0.0.1 with the bundled Gemma 3 270M GGUF, `--chat_format gemma` (the GGUF has no chat
template) and its prompt cache off (see `llama_server`: on Gemma it grows without bound), serves
both APIs. Each bundled program runs its rows through `run_dataset` as `openai:gemma`, on the
chat API (prompts as conversations) and on the completions API (the text prompts), alternately,
`--rounds` times each, the step cache off, one request in flight (`concurrency=1`: the server
decodes one at a time; the rows still run side by side), after one warm-up row on each API.

    python benchmarks/chat_llama_server.py [--rows 5] [--rounds 2] [--programs math/cot decomp/letter_cat]

One JSON line: per program {calls_per_s_chat, calls_per_s_completions, chat_over_completions
(the ratio of the two), calls_*, wall_s_* (over every round), prompt_tokens_per_call_* and
completion_tokens_per_call_* (what the server counted), answered_* and correct_* (rows answered
with no error, and answered right by the program's metric, each round), first_error_* and
errors_* (the first row error and how many rows ended in one, when any did)}; at the top level the
first program's calls_per_s_chat, calls_per_s_completions and chat_over_completions, and the
server's peak RSS (`server_peak_rss_mb`).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/chat_llama_server.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402

PROGRAMS = ("math/cot", "decomp/letter_cat")
APIS = ("chat", "completions")


def workload(program: str, rows: int, words: int, seed: int) -> list[dict]:
    """The warm-up row, then `rows` measured rows, of `program` (with their gold answers)."""
    if program == "decomp/letter_cat":
        from benchmarks.letter_cat_oracle import make_rows
        return make_rows(rows + 1, words=words, seed=seed)
    from decomp.runtime.runs.api import PROGRAMS_DIR

    lines = (PROGRAMS_DIR / "math" / "problems.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[:rows + 1]]


def run_once(base_url: str, program: str, rows: list[dict], api: str, folder: Path) -> dict:
    """`rows` of `program` on `api` into a run directory under `folder`: its figures."""
    from decomp.runtime.runs.api import RunOptions, run_dataset

    data = Path(tempfile.mkstemp(".jsonl", dir=folder)[1])
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    options = RunOptions(model="openai:gemma", base_url=base_url, api=api, cache_mode="off", concurrency=1)
    summary = run_dataset(program, data, options=options, run_dir=Path(tempfile.mkdtemp(dir=folder)) / "run")
    records = summary.records()
    return {"calls": summary.summary["calls"], "wall_s": summary.summary["wall_s"],
            "prompt_tokens": summary.summary["prompt_tokens"],
            "completion_tokens": summary.summary["completion_tokens"],
            "answered": sum("error" not in r for r in records),
            "correct": sum(r.get("score") == 1.0 for r in records),
            "errors": [r["error"] for r in records if "error" in r]}


def compare(base_url: str, program: str, rows: list[dict], rounds: int, folder: Path) -> dict:
    """Both APIs on one program, alternately, `rounds` each, after a warm-up row on each."""
    first, *measured = rows
    for api in APIS:
        run_once(base_url, program, [first], api, folder)
    runs: dict[str, list[dict]] = {api: [] for api in APIS}
    for _ in range(rounds):
        for api in APIS:
            runs[api].append(run_once(base_url, program, measured, api, folder))
    figures: dict = {"rows": len(measured), "rounds": rounds}
    for api, done in runs.items():
        calls, wall = sum(r["calls"] for r in done), sum(r["wall_s"] for r in done)
        figures.update({f"calls_per_s_{api}": round(calls / wall, 3), f"calls_{api}": calls,
                        f"wall_s_{api}": round(wall, 2),
                        f"prompt_tokens_per_call_{api}": round(sum(r["prompt_tokens"] for r in done) / calls, 1),
                        f"completion_tokens_per_call_{api}": round(
                            sum(r["completion_tokens"] for r in done) / calls, 1),
                        f"answered_{api}": [r["answered"] for r in done],
                        f"correct_{api}": [r["correct"] for r in done]})
        errors = [error for r in done for error in r["errors"]]
        if errors:  # the first row error of the API, and how many rows ended in one
            figures.update({f"first_error_{api}": errors[0][:300], f"errors_{api}": len(errors)})
    figures["chat_over_completions"] = round(figures["calls_per_s_chat"] / figures["calls_per_s_completions"], 3)
    return figures


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    p = arguments(__doc__, argv, rows=5, server=False)
    p.set_defaults(words=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--programs", nargs="+", choices=PROGRAMS, default=list(PROGRAMS))
    p.add_argument("--threads", type=int, default=None, help="the server's threads (default: the usable cores)")
    args = p.parse_args(argv)
    from decomp.runtime.testing.llama_server import start_llama_server

    record: dict = {"benchmark": "chat_llama_server", "chat_format": "gemma",
                    "load_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as tmp, start_llama_server(chat_format="gemma", threads=args.threads) as server:
        for program in args.programs:
            rows = workload(program, args.rows, args.words, args.seed)
            record[program] = compare(server.base_url, program, rows, args.rounds, Path(tmp))
        record["server_peak_rss_mb"] = server.peak_rss_mb()
    first = record[args.programs[0]]
    for name in ("calls_per_s_chat", "calls_per_s_completions", "chat_over_completions"):
        record[name] = first[name]
    record["load_after"] = round(os.getloadavg()[0], 2)
    return emit(record)


if __name__ == "__main__":
    main()
