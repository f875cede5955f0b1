"""Benchmark: DSPy's BootstrapFewShotWithRandomSearch on the word-operation task, the DSPy side of
benchmarks/optimize.py (DSPy is not a dependency; `decomp` is not imported).

The task and the test model are benchmarks/optimize_task.py's: a row asks for one of eight word
operations on three words; the model "student" answers a sub-question right only when its
prompt holds a demonstration of the same operation, "teacher" always. The DSPy program does
what benchmarks/optimize/wordops.decomp does: Python splits the row's question into its three
sub-questions, one `dspy.Predict("question -> answer")` answers each (one after another), Python
joins the answers with spaces. The metric is exact match of the joined answer.

    BootstrapFewShotWithRandomSearch(metric, max_bootstrapped_demos=K, max_labeled_demos=K,
        num_candidate_programs=N, num_threads=C, teacher_settings=dict(lm=teacher))
    .compile(program, trainset=TRAIN, valset=DEV)

then the zero-shot and the compiled program evaluated on TEST (dspy.Evaluate, C threads). The
LMs are `dspy.LM("openai/student")` and `dspy.LM("openai/teacher")` at the mock server, DSPy's
defaults otherwise (ChatAdapter, its cache on), with the disk cache in a fresh temporary folder
so that nothing comes from an earlier run. `dspy_calls` is the server's request count during
the compile, `dspy_wall_s` its wall time.

    /tmp/dspyvenv/bin/python benchmarks/dspy_optimize.py --base-url URL --train T --dev D --test E

Without --base-url it starts the mock server itself (--latency, default 0.05 s); without the
three files it writes benchmarks/optimize_task.py's splits (32/16/32 rows, --seed) to a
temporary folder. It prints one JSON line; DSPy's own output goes to stderr. Without DSPy it
prints {"benchmark": "dspy_optimize", "skipped": "..."} and exits 0.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    # run as a script: the repository root instead of benchmarks/ (see harness.bootstrap)
    import harness
    harness.bootstrap()

from benchmarks.harness import emit, parser  # noqa: E402
from benchmarks.optimize_task import RESPONDER, SUB_QUESTION, sub_questions, write_splits  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--base-url", help="a running mock server answering with optimize_task:respond "
                                      "(default: start one)")
    p.add_argument("--latency", type=float, default=0.05, help="the server's latency when this script starts it")
    p.add_argument("--train", type=Path)
    p.add_argument("--dev", type=Path)
    p.add_argument("--test", type=Path)
    p.add_argument("--candidates", type=int, default=8, help="num_candidate_programs")
    p.add_argument("--max-demos", type=int, default=4, help="max_bootstrapped_demos and max_labeled_demos")
    p.add_argument("--seed", type=int, default=0, help="the splits' seed, when this script writes them")
    p.add_argument("--threads", type=int, default=8, help="num_threads of the optimiser and of Evaluate")
    p.add_argument("--max-calls", type=int, default=None, help="the call budget, recorded in the line")
    args = p.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
    try:
        import dspy
    except ImportError as exc:
        return emit({"benchmark": "dspy_optimize", "skipped": f"dspy is not installed: {exc}"}, plain=True)
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dspy-optimize-")))
        splits = {"train": args.train, "dev": args.dev, "test": args.test}
        if not all(splits.values()):
            written = write_splits(folder / "data", seed=args.seed)
            splits = {name: path or written[name] for name, path in splits.items()}
        if args.base_url:
            server = _Stats(args.base_url)
        else:
            from benchmarks.dspy_critical_path import oracle_server

            server = stack.enter_context(oracle_server(args.latency, responder=RESPONDER))
        record = measure(dspy, server, splits, folder / "dspy-cache", args)
    return emit(record, plain=True)


def measure(dspy, server, splits: dict[str, Path], cache_dir: Path, args) -> dict:
    """Compile on train with dev as the valset, evaluate on test: the benchmark's record."""
    from dspy.teleprompt import BootstrapFewShotWithRandomSearch

    train, dev, test = (examples(dspy, splits[name]) for name in ("train", "dev", "test"))
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(cache_dir))
    settings = {"api_base": server.base_url, "api_key": "unused"}
    student_lm, teacher_lm = dspy.LM("openai/student", **settings), dspy.LM("openai/teacher", **settings)
    dspy.configure(lm=student_lm)
    WordOps = wordops_class(dspy)
    optimizer = BootstrapFewShotWithRandomSearch(
        metric, max_bootstrapped_demos=args.max_demos, max_labeled_demos=args.max_demos,
        num_candidate_programs=args.candidates, num_threads=args.threads,
        teacher_settings=dict(lm=teacher_lm))
    with contextlib.redirect_stdout(sys.stderr):  # DSPy prints its progress: one JSON line on stdout
        server.reset_stats()
        started = time.perf_counter()
        compiled = optimizer.compile(WordOps(), trainset=train, valset=dev)
        wall = time.perf_counter() - started
        calls = server.stats()["requests"]
        server.reset_stats()
        test_score = evaluate(dspy, compiled, test, args.threads)
        zero_shot = evaluate(dspy, WordOps(), test, args.threads)
        test_calls = server.stats()["requests"]
    candidates = compiled.candidate_programs  # sorted by score, best first; the chosen one first
    demos = [d for predictor in compiled.predictors() for d in predictor.demos]
    return {
        "benchmark": "dspy_optimize",
        "dspy_dev_score": candidates[0]["score"] / 100,
        "dspy_test_score": test_score,
        "dspy_zero_shot_test_score": zero_shot,
        "dspy_calls": calls,
        "dspy_wall_s": round(wall, 3),
        "dspy_demos": len(demos),
        "dspy_bootstrapped_demos": sum(1 for d in demos if d.get("augmented")),
        "dspy_demo_kinds": sorted({m.group(1) for d in demos for m in [SUB_QUESTION.fullmatch(d["question"])] if m}),
        "dspy_chosen_seed": candidates[0]["seed"],
        "dspy_candidates": [{"seed": c["seed"], "dev_score": c["score"] / 100,
                             "demos": sum(len(p.demos) for p in c["program"].predictors())}
                            for c in sorted(candidates, key=lambda c: c["seed"])],
        "dspy_test_calls": test_calls,
        "rows": {"train": len(train), "dev": len(dev), "test": len(test)},
        "candidates": args.candidates, "max_demos": args.max_demos, "threads": args.threads,
        "max_calls": args.max_calls,
        "dspy_version": dspy.__version__,
    }


def metric(example, prediction, trace=None) -> bool:
    """Exact match of the joined answer."""
    return (getattr(prediction, "answer", None) or "").strip() == example.answer.strip()


def evaluate(dspy, program, rows: list, threads: int) -> float:
    """The program's mean metric over `rows` (dspy.Evaluate)."""
    result = dspy.Evaluate(devset=rows, metric=metric, num_threads=threads, display_progress=False,
                           display_table=False)(program)
    return sum(float(score) for *_, score in result.results) / len(rows) if rows else 0.0


def examples(dspy, path: Path) -> list:
    """A JSONL split as dspy.Examples (question -> answer)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [dspy.Example(question=r["question"], answer=r["answer"]).with_inputs("question") for r in rows]


def wordops_class(dspy):
    """The DSPy module (built here: dspy is imported only when installed)."""

    class WordOps(dspy.Module):
        """wordops.decomp in DSPy: Python splits, one Predict answers each sub-question, Python joins."""

        def __init__(self):
            super().__init__()
            self.op = dspy.Predict("question -> answer")

        def forward(self, question: str):
            answers = [self.op(question=q).answer for q in sub_questions(question)]
            return dspy.Prediction(answer=" ".join(str(a) for a in answers))

    return WordOps


class _Stats:
    """A mock server someone else started: its /stats and /reset-stats."""

    def __init__(self, base_url: str):
        from benchmarks.letter_cat_oracle import Server

        self.base_url = base_url.rstrip("/")
        self._server = Server(self.base_url, pid=0)  # the pid is only for CPU time, not read here

    def stats(self) -> dict:
        return self._server.stats()

    def reset_stats(self) -> None:
        self._server.reset_stats()


if __name__ == "__main__":
    main()
