"""ADaPT and its baselines on TextCraft's 40 dev tasks, with deterministic agents: the tables of
the README, measured.

    python benchmarks/adapt_table.py                 # symbolic agents: dmax 1..5, then baselines
    python benchmarks/adapt_table.py --scripted 1 2 3 4   # the scripted model of capability K
    python benchmarks/adapt_table.py --markdown      # the same, as README tables on stderr

Prints one JSON line: for each configuration, the success rate (the environment's verdict: the
goal crafted), success by recipe depth, and calls per task (model calls for the scripted model;
executor and planner calls for the symbolic agents, which call no model). Runs uncached.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402
from decomp.runtime.runs.api import RunOptions, run_dataset  # noqa: E402

DEV = REPO / "tests" / "fixtures" / "textcraft" / "tasks_dev.jsonl"
#: method -> (main program, fields); ADaPT's dmax is set per configuration
METHODS = {
    "ADaPT": ("textcraft", {}),
    "ReAct": ("react", {}),
    "Plan-and-Execute": ("plan_execute", {}),
    "Try Again (3)": ("retry", {"tries": 3}),
    "Reflexion (3)": ("reflect_retry", {"tries": 3}),
}


def measure(program: str, main: str, fields: dict, model: str | None, data: Path, work: Path) -> dict:
    """One run: success (environment's verdict), by recipe depth, and calls per task."""
    options = RunOptions(model=model, cache_mode="off")
    done = run_dataset(program, data, options=options, main=main, fields=fields,
                       run_dir=work / f"{main}-{len(list(work.iterdir()))}")
    records = done.records()
    solved = [bool((r.get("environment") or {}).get("env", {}).get("success")) for r in records]
    by_depth: dict[str, list[bool]] = {}
    for record, ok in zip(records, solved):
        depth = (record.get("environment") or {}).get("env", {}).get("recipe_depth")
        by_depth.setdefault(str(depth), []).append(ok)
    agent_calls = sum(r["usage"]["handlers"].get(h, {}).get("calls", 0)
                      for r in records for h in ("act", "act_long", "plan", "reflect"))
    rows = len(records)
    return {"rows": rows, "solved": sum(solved), "success": round(sum(solved) / rows, 3),
            "by_depth": {d: f"{sum(v)}/{len(v)}" for d, v in sorted(by_depth.items())},
            "model_calls_per_task": round(done.summary["calls"] / rows, 2),
            "agent_calls_per_task": round(agent_calls / rows, 2),
            "errors": done.failed}


def symbolic_table(data: Path, work: Path) -> list[dict]:
    out = []
    for dmax in range(1, 6):
        out.append({"agents": "symbolic", "method": "ADaPT", "dmax": dmax,
                    **measure("adapt/textcraft_symbolic", "textcraft", {"dmax": dmax}, None, data, work)})
    for method, (main, fields) in list(METHODS.items())[1:]:
        out.append({"agents": "symbolic", "method": method,
                    **measure("adapt/textcraft_symbolic", main, fields, None, data, work)})
    return out


def scripted_table(ks: list[int], dmax: int, data: Path, work: Path) -> list[dict]:
    out = []
    for k in ks:
        for method, (main, fields) in METHODS.items():
            extra = {"dmax": dmax} if main == "textcraft" else {}
            out.append({"agents": f"scripted:{k}", "method": method, **extra,
                        **measure("adapt/textcraft", main, {**fields, **extra}, f"scripted:{k}", data, work)})
    return out


def markdown(rows: list[dict]) -> str:
    lines = ["| agents | method | dmax | success | by recipe depth | calls per task |", "|---|---|---|---|---|---|"]
    for r in rows:
        calls = r["model_calls_per_task"] if r["agents"].startswith("scripted") else r["agent_calls_per_task"]
        depths = ", ".join(f"{d}: {v}" for d, v in r["by_depth"].items())
        lines.append(f"| {r['agents']} | {r['method']} | {r.get('dmax', '')} | {r['solved']}/{r['rows']} "
                     f"| {depths} | {calls} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--scripted", type=int, nargs="*", help="capabilities K of the scripted model to run")
    p.add_argument("--dmax", type=int, default=4, help="ADaPT's dmax with the scripted model (4: the paper's)")
    p.add_argument("--rows", type=int, default=40, help="the first N dev tasks")
    p.add_argument("--markdown", action="store_true", help="also print README tables on stderr")
    args = p.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "tasks.jsonl"
        data.write_text("".join(DEV.read_text(encoding="utf-8").splitlines(keepends=True)[:args.rows]), "utf-8")
        (work / "runs").mkdir()
        rows = (scripted_table(args.scripted, args.dmax, data, work / "runs") if args.scripted
                else symbolic_table(data, work / "runs"))
    if args.markdown:
        print(markdown(rows), file=sys.stderr)
    emit({"benchmark": "adapt_table", "seconds": round(time.perf_counter() - started, 2), "table": rows})


if __name__ == "__main__":
    main()
