"""Benchmark: typed steps of the bundled LLM programs on the embedded model, free against constrained.

Each program runs the same rows twice on Gemma 3 270M, uncached: first decoding freely
(`constrain="none"`: every typed answer is still validated), then under constraints
(`constrain="auto"`: llguidance masks each typed answer to its type and each decomposer line to
the program's handlers and operators). From the run directories' traces and results it counts,
per typed handler, its calls and the answers that fail their type (a failed outcome whose
reason the engine wrote); per decomposer, the lines the model wrote and those that do not parse,
name no handler, name a handler or operator the program lacks, or refer to an answer not yet
given (`#3` in the second line); and per run the score (the program's metric),
the rows that ended in an error, the model calls, the wall time and calls per second.

The programs: decomp/letter_cat_llm and decomp/reverse (DecomP's fixtures, 20 rows each),
commaqa/fine and commaqa/coarse (DecomP's CommaQA-E; `--commaqa` a bigger file of the same
form, the fixture of 10 rows by default), tasklama/graphs `--main pairwise` (the first tasks of
the MSComplexTasks fixture; one `[before]` call per ordered pair of steps; scored here by the
edges against the gold edges, the steps being the gold steps).

    python benchmarks/typed_programs_local.py [--rows 20] [--programs letter_cat_llm reverse ...]
                                              [--commaqa PATH] [--threads N]

One JSON line: per program and way (`free`, `constrained`): rows, errored, failed_outcome,
score, metric, calls, wall_s, calls_per_s, completion_tokens, error_example (the first row's
error), handlers {name: {type, calls, type_failures, example}}, lines {total, unparsed,
no_handler, unknown_handler, unknown_operator, bad_reference, examples}; per program
`rows_changed` (rows answered otherwise), `ratio` (constrained / free seconds) and
`calls_per_s_ratio`; at the top the same over every program (`total`), `constraints_compiled`
(by llguidance: 0 would mean nothing was constrained), threads and the load average before
and after.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/typed_programs_local.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402

DATASETS = REPO / "tests" / "fixtures" / "decomp" / "datasets"
TASKS = REPO / "tests" / "fixtures" / "mscomplextasks" / "task_subtask_dataset_first32.json"
#: name -> (bundled program, its `main` or None, the dataset: a path or "commaqa" / "tasklama")
PROGRAMS = {
    "letter_cat_llm": ("decomp/letter_cat_llm", None, DATASETS / "letter_cat" / "n3_eg20_pos2_space.json"),
    "reverse": ("decomp/reverse", None, DATASETS / "reverse" / "test_4_normal_words_eg20.json"),
    "commaqa_fine": ("commaqa/fine", None, "commaqa"),
    "commaqa_coarse": ("commaqa/coarse", None, "commaqa"),
    "tasklama_pairwise": ("tasklama/graphs", "pairwise", "tasklama"),
}
WAYS = {"free": "none", "constrained": "auto"}
EXAMPLE_CHARS = 160


def local_model(mode: str, threads: int | None):
    """The embedded model decoding as `mode` says ("none" or "auto"), on `threads` threads."""
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.models.local import factory

    options = (("constrain", mode),) + ((("n_threads", threads),) if threads else ())
    return factory("gemma-3-270m", ModelSettings(options=options))


def warm_up(model) -> float:
    """Seconds of one free and one constrained call (loading the weights, building llguidance's
    tokenizer): paid once per model, before anything is measured."""
    from decomp.runtime.models.base import Constraint, Request

    started = time.perf_counter()
    model._complete(Request("Q: Is 3 greater than 2?\nA:", max_tokens=2, stop=("\n",)))
    model._complete(Request("Q: Is 3 greater than 2?\nA:", max_tokens=2, stop=("\n",),
                            constraint=Constraint(regex="yes|no")))
    return round(time.perf_counter() - started, 2)


def dataset(kind: Path | str, rows: int, commaqa: Path, folder: Path) -> Path:
    """The data file of one program: a fixture, the CommaQA file, or TaskLAMA rows written out."""
    if kind == "commaqa":
        return commaqa
    if kind != "tasklama":
        return kind
    from decomp.programs.tasklama.taskgraph.data import read_mscomplextasks

    path = folder / "tasklama.jsonl"
    tasks = read_mscomplextasks(TASKS)[:rows]
    path.write_text("".join(json.dumps({"id": str(t["id"]), "task": t["task"], "steps": t["steps"],
                                        "edges": t["edges"]}) + "\n" for t in tasks))
    return path


def typed_handlers(module) -> dict:
    """The module's handlers whose declared type is not `any`, by name."""
    return {name: h for name, h in module.handlers.items()
            if h.declared_type is not None and not h.declared_type.is_any}


def handler_figures(traces: list, module, main: str | None) -> dict:
    """Per typed handler: its calls and the answers failing their type (a reason in the node's
    facts: only `typed_answer` writes one), with the first reason as an example. The row's own
    node is the call of `main` (else the module's) when that is a handler."""
    typed = typed_handlers(module)
    figures = {name: {"type": h.declared_type.text, "calls": 0, "type_failures": 0, "example": None}
               for name, h in typed.items()}
    for tree in traces:
        for node in tree.walk():
            name = _called(node, main or module.main)
            if name not in figures:
                continue
            record = figures[name]
            record["calls"] += 1
            reason = (node.facts or {}).get("reason")
            if reason:
                record["type_failures"] += 1
                record["example"] = record["example"] or reason[:EXAMPLE_CHARS]
    return figures


def _called(node, main: str | None) -> str | None:
    """The handler a trace node is a call of: `main` for the row's node, else a call node's."""
    if node.kind == "row":
        return main
    return node.handler if node.kind == "call" else None


def line_verdict(line: str, module, answers: int) -> str:
    """What a decomposer's line is, written when `answers` answers exist: "ok", "end",
    "unparsed", "no_handler", "unknown_handler", "unknown_operator" or "bad_reference" (a
    `#n` with no answer n yet). Each bad kind ends the row (the decomposer or the step fails).
    The step grammar reads nearly any one line (a line without `[handler]` is a query with no
    handler), so "unparsed" is rare: a free line shows as "no_handler"."""
    from decomp.dsl.errors import DecompError
    from decomp.dsl.operators import OperatorError, parse_operator
    from decomp.dsl.parser import parse_step_line

    try:
        step = parse_step_line(line.strip(), "<line>")
    except DecompError:
        return "unparsed"
    if step.is_end:
        return "end"
    if step.handler is None:
        return "no_handler"
    if step.handler not in module.handlers:
        return "unknown_handler"
    try:
        parse_operator(step.operator)
    except OperatorError:
        return "unknown_operator"
    return "ok" if all(1 <= r.index <= answers for r in step.index_refs) else "bad_reference"


BAD_LINES = ("unparsed", "no_handler", "unknown_handler", "unknown_operator", "bad_reference")


def line_figures(traces: list, module) -> dict:
    """Every line the program's decomposers asked the model for (a decomposer call's model
    requests, the n-th written after n - 1 answers), by verdict, with an example of each bad
    kind."""
    decomposers = {name for name, h in module.handlers.items() if h.kind == "decomposer"}
    counts, examples = Counter(), {}
    for tree in traces:
        for node in tree.walk():
            lines = [c for c in node.children if c.kind == "model" and c.handler in decomposers]
            for answers, line in enumerate(lines):
                verdict = line_verdict(line.raw_output or "", module, answers)
                counts[verdict] += 1
                if verdict in BAD_LINES:
                    examples.setdefault(verdict, (line.raw_output or "")[:EXAMPLE_CHARS])
    return {"total": sum(counts.values()), **{kind: counts[kind] for kind in BAD_LINES}, "examples": examples}


def edge_score(records: list[dict], data: Path) -> dict:
    """Micro precision, recall and F1 of the answered edges against the gold edges (TaskLAMA:
    a row's steps are the gold steps, so an edge is a pair of the same indices)."""
    gold = {row["id"]: {tuple(e) for e in row["edges"]} for row in map(json.loads, data.read_text().splitlines())}
    right = predicted = 0
    for record in records:
        answer = record.get("answer") if isinstance(record.get("answer"), dict) else {}
        edges = {tuple(e) for e in answer.get("edges") or []}
        right += len(edges & gold[record["id"]])
        predicted += len(edges)
    wanted = sum(len(g) for g in gold.values())
    precision, recall = right / max(1, predicted), right / max(1, wanted)
    f1 = 2 * precision * recall / (precision + recall) if right else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


def run_way(name: str, way: str, model, rows: int, data: Path, folder: Path) -> dict:
    """One program on `rows` rows with `model` (decoding `way`): the run's figures (see the
    module's docstring)."""
    from decomp import Session
    from decomp.runtime.runs.api import RunOptions, find_program, run_dataset
    from decomp.runtime.storage.rundir import RunDir
    program, main, _ = PROGRAMS[name]
    module = Session().load(find_program(program))
    started = time.perf_counter()
    done = run_dataset(program, data, model=model, options=RunOptions(cache_mode="off"), main=main,
                       run_dir=folder / f"{name}-{way}", limit=rows)
    wall = time.perf_counter() - started
    run = RunDir.open(done.run_dir)
    traces, records, summary = [tree for _, tree in run.traces()], run.records(), done.summary
    record = {"rows": summary["rows"], "errored": summary["failed"], "failed_outcome": summary.get("failed_outcome", 0),
              "score": summary["score"], "metric": summary.get("metric"), "calls": summary["calls"],
              "wall_s": round(wall, 2), "calls_per_s": round(summary["calls"] / wall, 3),
              "completion_tokens": summary["completion_tokens"],
              "handlers": handler_figures(traces, module, main), "lines": line_figures(traces, module)}
    if name == "tasklama_pairwise":
        record["score"], record["metric"] = edge_score(records, data), "edges"
    record["answers"] = [r.get("answer") for r in records]  # compared in `compare`, then dropped
    errors = [r.get("error") for r in records if r.get("error")]
    if errors:
        record["error_example"] = str(errors[0])[:EXAMPLE_CHARS]
    return record


def compare(free: dict, constrained: dict) -> dict:
    """The constrained run's seconds and calls per second over the free run's, and how many rows
    it answered otherwise."""
    changed = sum(a != b for a, b in zip(free.pop("answers"), constrained.pop("answers")))
    return {"rows_changed": changed, "ratio": round(constrained["wall_s"] / free["wall_s"], 3),
            "calls_per_s_ratio": round(constrained["calls_per_s"] / free["calls_per_s"], 3)}


def totals(results: dict) -> dict:
    """Type failures and bad lines, seconds and calls over every program, per way."""
    out = {}
    for way in WAYS:
        runs = [r[way] for r in results.values()]
        wall, calls = sum(r["wall_s"] for r in runs), sum(r["calls"] for r in runs)
        out[way] = {"type_failures": sum(h["type_failures"] for r in runs for h in r["handlers"].values()),
                    "typed_calls": sum(h["calls"] for r in runs for h in r["handlers"].values()),
                    "lines": sum(r["lines"]["total"] for r in runs),
                    "bad_lines": sum(r["lines"][k] for r in runs for k in BAD_LINES),
                    "errored": sum(r["errored"] for r in runs), "calls": calls, "wall_s": round(wall, 2),
                    "calls_per_s": round(calls / wall, 3)}
    out["ratio"] = round(out["constrained"]["wall_s"] / out["free"]["wall_s"], 3)
    out["calls_per_s_ratio"] = round(out["constrained"]["calls_per_s"] / out["free"]["calls_per_s"], 3)
    return out


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--rows", type=int, default=20, help="rows of each program (tasks for tasklama_pairwise)")
    p.add_argument("--programs", nargs="+", choices=sorted(PROGRAMS), default=list(PROGRAMS))
    p.add_argument("--commaqa", type=Path, default=DATASETS / "commaqa_e" / "iid_test_eg10.json",
                   help="a DecomP CommaQA-E file (the fixture has 10 rows)")
    p.add_argument("--threads", type=int, default=None, help="llama.cpp's threads (default: every usable core)")
    args = p.parse_args(argv)
    if not args.commaqa.is_file():
        p.error(f"--commaqa: no file {args.commaqa}")
    from decomp.dsl.errors import DecompError

    with tempfile.TemporaryDirectory(prefix="typed-programs-local-") as folder:
        try:
            return emit(measure(args, Path(folder)))
        except DecompError as err:  # the local model missing, a program that does not load
            p.exit(2, f"typed_programs_local: {err}\n")


def measure(args, folder: Path) -> dict:
    """Every program of `args.programs`, both ways, run in `folder`: the benchmark's record."""
    models = {way: local_model(mode, args.threads) for way, mode in WAYS.items()}
    record = {"benchmark": "typed_programs_local", "model": "local:gemma-3-270m", "rows": args.rows,
              "threads": models["free"].threads, "load_before": [round(x, 2) for x in os.getloadavg()],
              "warm_up_s": {way: warm_up(m) for way, m in models.items()}}
    results = {}
    for name in args.programs:
        data = dataset(PROGRAMS[name][2], args.rows, args.commaqa, folder)
        results[name] = {way: run_way(name, way, models[way], args.rows, data, folder) for way in WAYS}
        results[name].update(compare(results[name]["free"], results[name]["constrained"]))
    record.update(results)
    record["total"] = totals(results)
    guide = models["constrained"].guide  # None: llguidance missing, and nothing was constrained
    record["constraints_compiled"] = 0 if guide is None else guide.compilations
    record["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return record


if __name__ == "__main__":
    main()
