"""Benchmark: what OpenTelemetry export (`decomp run --otlp`) costs a run, side by side with export off.

Both sides are the same dataset run of `decomp/letter_cat_llm` into a run directory
(`run_dataset`), one with `otlp=URL` pointing at a real receiver (MLflow's tracking server on
127.0.0.1, as in the tests), one without; pairs alternate, so load drifts hit both alike.

- overhead: ROWS rows on an in-process `FakeModel` oracle (zero latency, no cache); the run
  process's CPU per model call, fastest of `--repeat` runs per side (`us_per_call`), its
  ratio on / off; and the sender process's own CPU per call (`sender_us_per_call`), which
  runs beside the run, not in it.
- critical path: `--cp-rows` rows against the mock OpenAI server answering after `--latency`
  s at `--concurrency`; the wall time over the bound (as benchmarks/critical_path.py), its
  ratio on / off (median of the pairs).

    python benchmarks/otel_overhead.py [--rows 300] [--repeat 5] [--cp-rows 100] [--pairs 2]
"""
from __future__ import annotations

import resource
import statistics
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import (  # noqa: E402
    PROGRAM,
    dependent_calls,
    make_rows,
    mock_server,
    openai_session,
    respond,
    tracing_session_class,
    warm_up,
)


def _data(folder: Path, rows: list[dict]) -> Path:
    import json
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps({"id": r["id"], "question": r["question"], "answer": r["answer"]}) + "\n"
                            for r in rows), encoding="utf-8")
    return path


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(session, data: Path, folder: Path, otlp: str | None) -> tuple[float, float, float, int]:
    """(run CPU, wall, sender CPU, model calls) of one dataset run into a new run directory."""
    from decomp.runtime.runs.api import run_dataset

    children = _children_cpu()
    cpu, wall = time.process_time(), time.perf_counter()
    done = run_dataset(PROGRAM, data, session=session, run_dir=Path(tempfile.mkdtemp(dir=folder)), otlp=otlp)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    summary = done.to_dict()
    assert summary["failed"] == 0, summary
    return cpu, wall, _children_cpu() - children, summary["calls"]


def overhead(folder: Path, url: str, rows: int, repeat: int, seed: int) -> dict:
    from decomp.runtime.engine.scheduler import Scheduler
    from decomp.runtime.engine.session import Session
    from decomp.runtime.testing.fake import FakeModel

    data = _data(folder, make_rows(rows, seed=seed))
    best: dict[str, tuple] = {}
    for _ in range(repeat):
        for side, otlp in (("off", None), ("on", url)):
            model = FakeModel(default=lambda request: respond(request.prompt), name="oracle")
            found = _run(Session(model=model, scheduler=Scheduler(16), cache=None), data, folder, otlp)
            if side not in best or found[0] < best[side][0]:
                best[side] = found
    per_call = {side: 1e6 * cpu / calls for side, (cpu, _, _, calls) in best.items()}
    return {"rows": rows, "repeat": repeat, "calls": best["on"][3],
            "us_per_call": {side: round(v, 2) for side, v in per_call.items()},
            "ratio": round(per_call["on"] / per_call["off"], 4),
            "sender_us_per_call": round(1e6 * best["on"][2] / best["on"][3], 2)}


def critical_path(folder: Path, url: str, rows: int, pairs: int, latency: float, concurrency: int, seed: int) -> dict:
    data = _data(folder, make_rows(rows, seed=seed))
    ratios: dict[str, list[float]] = {"off": [], "on": []}
    with mock_server(latency) as server:
        warm_up(server.base_url)
        for _ in range(pairs):
            for side, otlp in (("off", None), ("on", url)):
                session = openai_session(server.base_url, concurrency, session_class=tracing_session_class())
                _, wall, _, calls = _run(session, data, folder, otlp)
                chain = max((dependent_calls(t) for t in session.traces), default=0)
                bound = max(chain * latency, calls * latency / concurrency)
                ratios[side].append(wall / bound)
    medians = {side: statistics.median(v) for side, v in ratios.items()}
    return {"rows": rows, "pairs": pairs, "latency_s": latency, "concurrency": concurrency,
            "ratio_off": round(medians["off"], 4), "ratio_on": round(medians["on"], 4),
            "ratio_on_over_off": round(medians["on"] / medians["off"], 4),
            "runs": {side: [round(r, 4) for r in v] for side, v in ratios.items()}}


def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=300)
    p.add_argument("--repeat", type=int, default=5, help="runs per side of the CPU measurement (fastest kept)")
    p.add_argument("--cp-rows", type=int, default=100, help="rows of each critical-path run")
    p.add_argument("--pairs", type=int, default=2, help="critical-path runs per side")
    args = p.parse_args(argv)

    from tests.runtime.exports.otel_receiver import EXPERIMENT_HEADER, mlflow_receiver
    import os

    with tempfile.TemporaryDirectory() as tmp, mlflow_receiver(Path(tmp) / "mlflow") as (url, client):
        os.environ["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] = f"{EXPERIMENT_HEADER}={client.create_experiment('bench')}"
        folder = Path(tmp)
        record = {"benchmark": "otel_overhead", "receiver": "mlflow",
                  "overhead": overhead(folder, url, args.rows, args.repeat, args.seed),
                  "critical_path": critical_path(folder, url, args.cp_rows, args.pairs, args.latency,
                                                 args.concurrency, args.seed)}
    emit(record)
    return record


if __name__ == "__main__":
    main()
