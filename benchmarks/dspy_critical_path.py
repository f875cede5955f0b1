"""Benchmark: DSPy on critical_path's workload, for comparison (DSPy is not a dependency).

The same ROWS letter-concatenation questions as `critical_path.py` (`make_rows`), the same mock
OpenAI server in a child process answering every request after LATENCY seconds, no cache. The
DSPy program mirrors `decomp/letter_cat_llm`, a decomposer asking for one step at a time:

    plan -> split -> plan -> letter x WORDS -> plan -> merge -> plan (finish)

four `dspy.Predict` modules: `plan` (question, done_steps -> next_step: split | letters | merge |
finish), `split` (question -> words: list[str]), `letter` (question, word -> letter), `merge`
(question, letters: list[str] -> answer). The program runs whatever step `plan` names, until it
says `finish`: 11 model calls per row with 5 words, like letter_cat_llm. A perfect model for
DSPy's ChatAdapter prompts answers (benchmarks/dspy_oracle.py).

Modes (`--mode`, several allowed; default all four, one JSON line each):

    threads         dspy.Parallel(num_threads=C) over the rows; a row's letter calls one after
                    another in its thread. At most C in flight; chain 4 + 1 + WORDS + 1 = 11.
    threads-nested  as threads, with a row's letter calls in a nested dspy.Parallel(WORDS):
                    chain 7, up to C x WORDS in flight.
    async           `acall` with asyncio.gather over the letter calls; at most C rows at once
                    (an asyncio.Semaphore: DSPy has no cap on async model calls; its
                    `async_max_workers` only limits `asyncify`'s threads). Chain 7, up to
                    C x WORDS in flight.
    async-capped    as async, and the LM holds an asyncio.Semaphore(C) around each `acall` (a
                    subclass of dspy.LM): the cap DSPy lacks, added by hand. Chain 7, at most C.

bound = max(chain x latency, calls x latency / C), as in critical_path.py; `max_in_flight` is
the server's. A mode that goes past C in flight can beat that bound, so each line also gives
`bound_at_max_in_flight_s` (C replaced by max_in_flight) and `ratio_at_max_in_flight`. One
throw-away row warms each mode up before the server's statistics are reset.

Install DSPy in a virtual environment of its own (the mock server and the oracles need the
standard library only; `decomp` itself is not imported):

    python3 -m venv /tmp/dspyvenv && /tmp/dspyvenv/bin/pip install dspy
    /tmp/dspyvenv/bin/python benchmarks/dspy_critical_path.py [--concurrency 16] [--mode async]

Without DSPy it prints {"benchmark": "dspy_critical_path", "skipped": "..."} and exits 0.
"""
from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from typing import Iterator

if __package__ in (None, ""):
    # run as a script: the repository root instead of benchmarks/ (whose cache.py, memory.py ...
    # would shadow top-level modules of the same names for DSPy's dependencies)
    import harness
    harness.bootstrap()

from benchmarks.dspy_oracle import RESPONDER  # noqa: E402
from benchmarks.harness import REPO, arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import Server, make_rows  # noqa: E402

MODES = ("threads", "threads-nested", "async", "async-capped")
MOCK_SERVER = REPO / "runtime" / "testing" / "mock_server.py"
PLAN_CALLS = 4  # split, letters, merge, finish


def main(argv: list[str] | None = None) -> list[dict]:
    p = arguments(__doc__, argv, rows=200)
    p.add_argument("--mode", choices=MODES, action="append", help="default: all four, in this order")
    args = p.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
    try:
        import dspy
    except ImportError as exc:
        return [emit({"benchmark": "dspy_critical_path", "skipped": f"dspy is not installed: {exc}"}, plain=True)]
    rows = make_rows(args.rows, args.words, args.seed)
    warm = make_rows(1, args.words, seed=12345)[0]["question"]
    with oracle_server(args.latency) as server:
        return [emit(measure(dspy, mode, rows, warm, server, args), plain=True) for mode in args.mode or MODES]


def measure(dspy, mode: str, rows: list[dict], warm: str, server: Server, args) -> dict:
    """One timed run of `mode` over `rows`: its JSON record."""
    configure(dspy, server.base_url, args.concurrency if mode == "async-capped" else None)
    program = letter_cat_class(dspy)(nested=mode == "threads-nested")
    run = run_async if mode.startswith("async") else run_threads
    answers, wall, cpu = run(dspy, program, [r["question"] for r in rows], warm, args.concurrency, server)
    stats = server.stats()
    calls = stats["requests"]
    chain = PLAN_CALLS + 1 + (args.words if mode == "threads" else 1) + 1
    bound = max(chain * args.latency, calls * args.latency / args.concurrency)
    widest = max(stats["max_in_flight"], 1)  # modes that break the cap: the bound at what they used
    used_bound = max(chain * args.latency, calls * args.latency / widest)
    right = sum(1 for r, a in zip(rows, answers) if a == r["answer"])
    return {
        "benchmark": "dspy_critical_path", "mode": mode, "rows": len(rows), "words": args.words,
        "calls": calls, "chain": chain, "latency_s": args.latency, "concurrency": args.concurrency,
        "bound_s": round(bound, 3), "wall_s": round(wall, 3), "ratio": round(wall / bound, 4) if bound else None,
        "max_in_flight": stats["max_in_flight"], "bound_at_max_in_flight_s": round(used_bound, 3),
        "ratio_at_max_in_flight": round(wall / used_bound, 4) if used_bound else None,
        "correct": right / len(rows) if rows else 0.0,
        "client_cpu_s": round(cpu, 3), "client_cpu_ms_per_call": round(1000 * cpu / calls, 3) if calls else None,
        "dspy_version": dspy.__version__,
    }


def configure(dspy, base_url: str, cap: int | None = None) -> None:
    """DSPy pointed at the mock server, every cache off (each call reaches the server); with
    `cap`, at most that many async model calls at once."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    settings = {"api_base": base_url, "api_key": "unused", "cache": False}
    lm = dspy.LM("openai/oracle", **settings) if cap is None else capped_lm_class(dspy)(cap, **settings)
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter())


# ---------------------------------------------------------------- the DSPy program
def letter_cat_class(dspy):
    """The DSPy module (built here: dspy is imported only when installed)."""
    from typing import Literal

    class Plan(dspy.Signature):
        """Choose the next step for the question, given the steps done so far."""

        question: str = dspy.InputField()
        done_steps: list[str] = dspy.InputField()
        next_step: Literal["split", "letters", "merge", "finish"] = dspy.OutputField()

    class Split(dspy.Signature):
        """List the words the question names."""

        question: str = dspy.InputField()
        words: list[str] = dspy.OutputField()

    class Letter(dspy.Signature):
        """The letter of the word at the position the question asks for."""

        question: str = dspy.InputField()
        word: str = dspy.InputField()
        letter: str = dspy.OutputField()

    class Merge(dspy.Signature):
        """Concatenate the letters with the delimiter the question asks for."""

        question: str = dspy.InputField()
        letters: list[str] = dspy.InputField()
        answer: str = dspy.OutputField()

    class LetterCat(dspy.Module):
        """A decomposer: asks `plan` for a step, runs it, until `plan` says finish."""

        def __init__(self, nested: bool = False, max_steps: int = 6):
            super().__init__()
            self.plan, self.split = dspy.Predict(Plan), dspy.Predict(Split)
            self.letter, self.merge = dspy.Predict(Letter), dspy.Predict(Merge)
            self.nested, self.max_steps = nested, max_steps

        def forward(self, question: str):
            done, words, letters, answer = [], [], [], ""
            while len(done) < self.max_steps:
                step = self.plan(question=question, done_steps=done).next_step
                if step == "finish":
                    break
                if step == "split":
                    words = self.split(question=question).words
                elif step == "letters":
                    letters = self.letters(question, words)
                else:
                    answer = self.merge(question=question, letters=letters).answer
                done.append(step)
            return dspy.Prediction(answer=answer)

        def letters(self, question: str, words: list[str]) -> list[str]:
            if not self.nested:
                return [self.letter(question=question, word=w).letter for w in words]
            pairs = [(self.letter, {"question": question, "word": w}) for w in words]
            found = dspy.Parallel(num_threads=max(1, len(words)), disable_progress_bar=True)(pairs)
            return [p.letter if p is not None else "" for p in found]

        async def aforward(self, question: str):
            done, words, letters, answer = [], [], [], ""
            while len(done) < self.max_steps:
                step = (await self.plan.acall(question=question, done_steps=done)).next_step
                if step == "finish":
                    break
                if step == "split":
                    words = (await self.split.acall(question=question)).words
                elif step == "letters":
                    found = await asyncio.gather(*(self.letter.acall(question=question, word=w) for w in words))
                    letters = [p.letter for p in found]
                else:
                    answer = (await self.merge.acall(question=question, letters=letters)).answer
                done.append(step)
            return dspy.Prediction(answer=answer)

    return LetterCat


def capped_lm_class(dspy):
    """dspy.LM with at most `limit` async calls at once (a semaphore per event loop)."""

    class CappedLM(dspy.LM):
        def __init__(self, limit: int, **kw):
            super().__init__("openai/oracle", **kw)
            self.limit, self._caps = limit, {}

        async def acall(self, *args, **kw):
            loop = asyncio.get_running_loop()
            cap = self._caps.get(loop) or self._caps.setdefault(loop, asyncio.Semaphore(self.limit))
            async with cap:
                return await super().acall(*args, **kw)

    return CappedLM


# ---------------------------------------------------------------- running the rows
def run_threads(dspy, program, questions: list[str], warm: str, concurrency: int,
                server: Server) -> tuple[list[str], float, float]:
    """dspy.Parallel over the rows: (answers, wall seconds, process CPU seconds)."""
    program(question=warm)
    server.reset_stats()
    parallel = dspy.Parallel(num_threads=concurrency, max_errors=len(questions) + 1, disable_progress_bar=True)
    cpu, started = time.process_time(), time.perf_counter()
    found = parallel([(program, {"question": q}) for q in questions])
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return [getattr(p, "answer", None) for p in found], wall, cpu


def run_async(dspy, program, questions: list[str], warm: str, concurrency: int,
              server: Server) -> tuple[list[str], float, float]:
    """`acall` for every row at once, at most `concurrency` rows running: as run_threads."""

    async def rows():
        limit = asyncio.Semaphore(concurrency)

        async def row(q: str):
            async with limit:
                return await program.acall(question=q)

        await row(warm)  # in this loop: DSPy keeps one connection pool per event loop
        await asyncio.to_thread(server.reset_stats)
        cpu, started = time.process_time(), time.perf_counter()
        found = await asyncio.gather(*(row(q) for q in questions), return_exceptions=True)
        return found, time.perf_counter() - started, time.process_time() - cpu

    found, wall, cpu = asyncio.run(rows())
    return [getattr(p, "answer", None) for p in found], wall, cpu


# ---------------------------------------------------------------- the server
@contextmanager
def oracle_server(latency: float, ready_timeout: float = 30.0, responder: str = RESPONDER) -> Iterator[Server]:
    """runtime/testing/mock_server.py run as a script in a child process (standard library only,
    so it needs no `decomp` install), answering with `responder` (default benchmarks.dspy_oracle)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    argv = [sys.executable, str(MOCK_SERVER), "--latency", str(latency), "--responder", responder]
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env)
        try:
            lines: queue.Queue = queue.Queue()
            threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
            try:
                base_url = json.loads(lines.get(timeout=ready_timeout))["base_url"]
            except (queue.Empty, ValueError, KeyError):
                proc.kill()
                proc.wait()
                stderr.seek(0)
                detail = stderr.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"the mock server did not start:\n{detail}") from None
            yield Server(base_url, proc.pid)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            proc.stdout.close()


if __name__ == "__main__":
    main()
