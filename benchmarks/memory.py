"""Benchmark: memory and speed of one long dataset run, on the zero-latency mock server.

Runs ROWS questions "What is the letter at position P of "WORD"?" through a one-prompt program
(one model request per row: a few-shot prompt the oracle answers right,
benchmarks/letter_cat_oracle.py) with
`run_dataset` into a run directory in a temporary folder, as `decomp run --input` does
(results.jsonl, traces.sqlite, summary), against the mock OpenAI server in a child process
answering at once. A thread samples this process's resident set size (RSS, /proc/self/statm)
and the rows written so far every INTERVAL seconds.

Prints one JSON line: rows, seconds, rows_per_s, peak_rss_mb, rss_mb (RSS when 1,000, 2,000,
5,000, 10,000, 20,000, 50,000 and 100,000 rows were done, as far as the run goes),
mb_per_1000_rows (the least-squares slope of RSS over rows written, from the first 10% of the
rows on: what each further 1,000 rows cost), score (must be 1.0).

    python benchmarks/memory.py [--rows 10000] [--concurrency 64] [--latency 0] [--interval 0.5]
"""
from __future__ import annotations

import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import WORDS, mock_server, warm_up  # noqa: E402

PROGRAM = '''handler ask = prompt(text="Q: What is the letter at position 2 of \\"Abcd\\"?\\nA: \\"b\\"\\n")
main ask
'''
CHECKPOINTS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
_PAGE = os.sysconf("SC_PAGE_SIZE")


def make_rows(n: int, seed: int = 0) -> list[dict]:
    """`n` rows {"id", "question", "answer"} asking for one letter of one word."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        word, position = rng.choice(WORDS), rng.randint(1, 4)
        rows.append({"id": f"row{i}", "question": f'What is the letter at position {position} of "{word}"?',
                     "answer": word[position - 1]})
    return rows


def rss_mb() -> float:
    """This process's resident set size now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2 ** 20


def lines_in(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


class Sampler(threading.Thread):
    """Samples (rows written, RSS) every `interval` seconds until stopped."""

    def __init__(self, results: Path, interval: float):
        super().__init__(daemon=True)
        self.results, self.interval = results, interval
        self.samples: list[tuple[int, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            self.samples.append((lines_in(self.results), rss_mb()))

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.samples.append((lines_in(self.results), rss_mb()))


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of y over x, or None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=10_000)
    p.add_argument("--interval", type=float, default=0.5)
    p.set_defaults(concurrency=64, latency=0.0)
    args = p.parse_args(argv)
    from decomp.runtime.runs.api import RunOptions, run_dataset

    with tempfile.TemporaryDirectory(prefix="decomp-bench-memory-") as tmp, mock_server(args.latency) as server:
        folder = Path(tmp)
        program = folder / "one_prompt.decomp"
        program.write_text(PROGRAM)
        data = folder / "rows.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in make_rows(args.rows, args.seed)))
        warm_up(server.base_url)
        os.environ.setdefault("OPENAI_API_KEY", "unused")
        options = RunOptions(model="openai:mock", base_url=server.base_url, concurrency=args.concurrency,
                             cache_mode="off")
        run_dir = folder / "run"
        before = rss_mb()
        sampler = Sampler(run_dir / "results.jsonl", args.interval)
        sampler.start()
        started = time.perf_counter()
        done = run_dataset(program, data, options=options, run_dir=run_dir)
        seconds = time.perf_counter() - started
        sampler.stop()
    samples = sampler.samples
    at = {}
    for mark in CHECKPOINTS:
        reached = [mb for rows, mb in samples if rows >= mark]
        if reached:
            at[str(mark)] = round(reached[0], 1)
    tail = [(rows, mb) for rows, mb in samples if rows >= args.rows // 10]
    per_row = slope(tail)
    record = {
        "benchmark": "memory",
        "rows": done.rows,
        "failed": done.failed,
        "score": done.score,
        "concurrency": args.concurrency,
        "seconds": round(seconds, 2),
        "rows_per_s": round(done.rows / seconds, 1),
        "rss_before_mb": round(before, 1),
        "peak_rss_mb": round(max(mb for _, mb in samples), 1),
        "rss_mb": at,
        "mb_per_1000_rows": round(per_row * 1000, 3) if per_row is not None else None,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    emit(record)
    return record


if __name__ == "__main__":
    main()
