"""`optimize`: bootstrap few-shot demonstrations from a program's successful traces and keep the
candidate that scores best on development rows, as `decomp optimize` does.

1. The program is loaded; its target handlers are found (`targets`), the rows read, the rows
   in both sets named (they give no demonstrations, so no row donates to its own evaluation).
2. A dry run projects the model calls (the teacher over the training rows, each round; every
   candidate over the development rows), printed before anything runs. Refused when
   `max_calls` cannot pay for the teacher and two candidates; over it, a warning.
3. The teacher (default: the run's model) runs the program over the training rows into a run
   directory; the rows the metric scores at `threshold` or more give demonstrations
   (`harvest`). With `rounds` > 1, the rows that did not pass run again at
   `teacher_temperature`, each round a new rollout (new samples, not the cache's).
4. Each candidate (`candidates`) is written as a program folder (`folder`) and run over the
   development rows into run directories of its own; its score is the metric's mean over them.
   Zero-shot runs first, then the others race over the rows in quarters, all at once in one
   scheduler (at most `concurrency` calls in flight in all): after each quarter, a candidate
   that can no longer reach the score another is sure of stops (`prune`; exact: the candidate
   chosen is the one scoring every candidate in full would choose). When zero-shot already has
   the best score the metric can give, no other candidate runs (`stopped_early` says so).
5. The best (highest score; then fewest demonstrations; then the earliest) is copied to `out`,
   with `report.json` beside it.

Everything runs through `run_dataset` with the step cache, so an interrupted optimisation
resumes where it stopped (the same command again), and running the folder written reproduces
its development score from the cache. Work files live in `out/.optimize/`. The whole costs at
most `max_calls` model requests: a run reaching it stops there, and the best candidate fully
scored by then is kept.
"""
from __future__ import annotations

import asyncio
import dataclasses
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from decomp.dsl.errors import DecompError, InputError
from decomp.dsl.values import json_kind, json_text, storable_json
from decomp.runtime.engine.loader import LoadedModule
from decomp.learning.optimize.candidates import Candidate, make_candidates
from decomp.learning.optimize.folder import FolderError, OwnedFolder, read_work_json, source_files, write_candidate
from decomp.learning.optimize.harvest import Demo, harvest, labelled
from decomp.learning.optimize.metrics import row_metric
from decomp.learning.optimize.targets import find_targets
from decomp.runtime.runs import dryrun
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.runs.api import RunOptions, arun_dataset, find_program, use_main
from decomp.runtime.storage.datasets import Row, read_rows, window
from decomp.runtime.storage.jsonl import json_line
from decomp.runtime.storage.manifest import sha256_file
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.models.replay import ReplayModel

__all__ = ["OptimizeError", "OptimizeInterrupted", "OptimizeResult", "OptimizeSettings", "optimize"]

#: The work folder inside the output folder, and the file in it recording the inputs and settings.
WORK, STATE = ".optimize", "state.json"
#: How many windows the development rows are raced over when candidates may stop early, and the
#: fewest rows in one.
ROUNDS, BATCH = 4, 4
#: The metrics whose scores are at most 1 (so a candidate's best possible score is known).
_AT_MOST_ONE = frozenset({"em", "f1", "set_em", "exact", "outcome"})


class OptimizeError(DecompError):
    """An optimisation that cannot start or go on as asked (the message says what to do)."""


class OptimizeInterrupted(KeyboardInterrupt):
    """An optimisation stopped by an interrupt (Ctrl-C): of the runs under way (`what`: the
    teacher's, or the candidates' racing), `kept` of their `rows` are in `where`, `left` are
    not; every run before them is kept whole. The same optimisation again resumes it."""

    def __init__(self, out: Path, what: str | None, where: Path | None, kept: int = 0, rows: int = 0):
        super().__init__(out, what, where, kept, rows)
        self.out, self.what, self.where, self.kept, self.rows = out, what, where, kept, rows

    @property
    def left(self) -> int:
        return max(self.rows - self.kept, 0)

    def __str__(self) -> str:
        if self.what is None:
            return f"no run was under way; the work done so far is kept in {self.out / WORK}"
        return f"{self.kept} of {self.rows} rows of {self.what} kept in {self.where}, {self.left} left"


@dataclass(frozen=True)
class OptimizeSettings:
    """What shapes the search (the `decomp optimize` options of the same names).

    metric:        em, f1, set_em (or a registered metric), outcome, or module:function
                   (None: the program's `metric`, else em)
    threshold:     a training row gives demonstrations when its score is at least this
    candidates:    how many seeded random candidates besides zero-shot, labelled, bootstrapped
    max_demos:     the most demonstrations any candidate adds to one handler
    seed:          seeds the random candidates
    foreach_demos: the most demonstrations one row gives a handler from the items of foreach steps
    keep_examples: candidates keep the handlers' own examples before the demonstrations
    rounds:        teacher rounds: the rows that did not pass run again, each a new rollout
    teacher_temperature: the temperature of rounds after the first
    max_calls:     the most model requests the whole optimisation may make
    prune:         stop scoring a candidate once it can no longer beat the best one scored in
                   full (with em, f1, set_em or outcome, whose scores are at most 1): the
                   development rows run in quarters, and the choice is the same as without;
                   when zero-shot scores 1, no other candidate is scored
    """

    metric: str | None = None
    threshold: float = 1.0
    candidates: int = 8
    max_demos: int = 4
    seed: int = 0
    foreach_demos: int = 1
    keep_examples: bool = True
    rounds: int = 1
    teacher_temperature: float = 1.0
    max_calls: int | None = None
    prune: bool = True

    def __post_init__(self) -> None:
        for name, low in (("candidates", 0), ("max_demos", 1), ("foreach_demos", 1), ("rounds", 1)):
            if getattr(self, name) < low:
                raise InputError(f"{name} must be at least {low}, got {getattr(self, name)}")
        if self.max_calls is not None and self.max_calls < 1:
            raise InputError(f"max_calls must be at least 1, got {self.max_calls}")
        if not self.teacher_temperature >= 0:
            raise InputError(f"teacher_temperature must be >= 0, got {self.teacher_temperature}")


@dataclass(frozen=True)
class OptimizeResult:
    """What `optimize` wrote: the optimised program's main file, its folder and the report."""

    program: Path
    folder: Path
    report: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The line `decomp optimize` prints."""
        chosen, zero = self.report["chosen"], self.report["candidates"][0]
        return {"program": str(self.program), "chosen": chosen["name"], "dev_score": chosen["dev_score"],
                "zero_shot_dev_score": zero["dev_score"], "demos": chosen["demos"], "calls": self.report["calls"],
                "tokens": self.report["tokens"], "wall_s": self.report["wall_s"],
                **({"stopped_early": self.report["stopped_early"]} if "stopped_early" in self.report else {}),
                "report": str(self.folder / "report.json")}


def optimize(program: str | Path, train: str | Path, dev: str | Path, *, out: str | Path,
             model: str | None = None, teacher: str | None = None, options: RunOptions | None = None,
             settings: OptimizeSettings | None = None, main: str | None = None, force: bool = False,
             progress: bool | None = False, on_note: Callable[[str], None] | None = None,
             **setting_values: Any) -> OptimizeResult:
    """Optimise `program`'s few-shot handlers on `train`, choosing on `dev`, into the folder `out`.

    model:    the student, the model the optimised program is scored with (None: the
              program's default, as `decomp run`); teacher: the model whose traces give the
              demonstrations (None: the same); options: the runs' options (`RunOptions`)
    settings: the search (`OptimizeSettings`), or its fields as keyword arguments
    force:    discard an earlier optimisation's work in `out` instead of resuming it
    on_note:  called with each thing worth saying before and while it runs (the projection,
              overlapping rows, handlers skipped, each candidate's score)

    An `OptimizeError` (a `DecompError`) for what cannot be done as asked; a program that does
    not load is a `DecompError` with its position."""
    settings = settings if settings is not None else OptimizeSettings(**setting_values)
    options = options or RunOptions()
    if model is not None:
        options = dataclasses.replace(options, model=model)
    optimizer = _Optimizer(find_program(program), Path(train), Path(dev), Path(out), teacher, options, settings,
                           main, progress, on_note or (lambda note: None))
    try:
        return optimizer.run(force)
    except KeyboardInterrupt as err:
        if isinstance(err, OptimizeInterrupted):
            raise
        raise optimizer.interrupted() from err


class _Optimizer:
    def __init__(self, path: Path, train: Path, dev: Path, out: Path, teacher: str | None, options: RunOptions,
                 settings: OptimizeSettings, main: str | None, progress, note: Callable[[str], None]):
        self.path, self.train, self.dev, self.out = path, train, dev, out
        self.teacher, self.options, self.settings, self.main = teacher, options, settings, main
        self.progress, self.note = progress, note
        self.work = out / WORK
        self.calls = self.tokens = 0
        self.stopped: str | None = None
        self.stopped_early: str | None = None  # zero-shot scored the best possible: no other candidate runs
        self.started = time.perf_counter()
        self.scheduler = Scheduler(options.concurrency, rpm=options.rpm, tpm=options.tpm)
        #: The API each `api="auto"` model was found to answer on (see `RunOptions.apis`).
        self.found_apis: dict[str, str] = {}
        #: The runs under way: their run directory, and the data and rows they run.
        self.under_way: dict[Path, tuple[Path, int, int | None]] = {}

    # ---- the steps
    def run(self, force: bool) -> OptimizeResult:
        loaded = self._load(self.options.session())
        self.metric_name = self.settings.metric or loaded.metric or "em"
        self.metric_max = 1.0 if self.metric_name in _AT_MOST_ONE else None
        self.best = float("-inf")
        try:
            folder = Path.cwd() if self.settings.metric else self.path.parent  # the program's own: its folder
            self.metric = row_metric(self.metric_name, folder, self.options.metric_limits(), self.options.policy())
        except ValueError as err:
            raise OptimizeError(str(err)) from None
        self.targets, self.skipped = find_targets(loaded, self.path.parent)
        for name, reason in self.skipped.items():
            self.note(f"[{name}] is left as it is: {reason}")
        if not self.targets:
            raise OptimizeError(f"{self.path} has no handler decomp optimize can add demonstrations to (a prompt or "
                                "decomposer whose examples are a file=)")
        self.files = source_files(loaded, self.path)
        self.train_rows, self.dev_rows = self._rows(self.train, "--train"), self._rows(self.dev, "--dev")
        self.donors = self._donors()
        self._open_work(force)
        self.projected = self._project()
        self.pool, self.teacher_report = self._bootstrap(loaded)
        found = make_candidates(self.pool, self._labelled(loaded), random_candidates=self.settings.candidates,
                                max_demos=self.settings.max_demos, seed=self.settings.seed)
        if len(found) == 1:
            self.note("no training row passed the metric: no demonstrations, the program is kept as it is "
                      f"(zero-shot); {self.teacher_report['passed']} of {self.teacher_report['rows']} rows passed")
        return self._finish(self._score_all(found))

    def _load(self, session) -> LoadedModule:
        return use_main(session.load(self.path), self.main, self.path)

    def _rows(self, path: Path, option: str) -> list[Row]:
        try:
            rows = list(read_rows(path))
        except (OSError, ValueError) as err:
            raise OptimizeError(f"{option} {path}: {err}") from None
        if not rows:
            raise OptimizeError(f"{option} {path} has no rows")
        if option == "--dev":
            self.dev_positions = len(rows)
        bad = [row for row in rows if row.error is not None]
        for row in bad[:5]:
            self.note(f"warning: {option} row {row.id} cannot be read and is left out: {row.error}")
        rows = [row for row in rows if row.error is None]
        if not rows:
            raise OptimizeError(f"{option} {path} has no row that can be read")
        if len(rows) < 2:
            self.note(f"warning: {option} has only {len(rows)} row: few demonstrations and a noisy choice")
        return rows

    def _donors(self) -> set[str]:
        """The ids of the training rows that may give demonstrations: not those also in --dev
        (by id or by question), which are warned about."""
        dev_ids = {row.id for row in self.dev_rows}
        dev_questions = {json_text(row.fields.get("question")) for row in self.dev_rows}
        both = [row.id for row in self.train_rows
                if row.id in dev_ids or json_text(row.fields.get("question")) in dev_questions]
        if both:
            shown = ", ".join(both[:5]) + (f" and {len(both) - 5} more" if len(both) > 5 else "")
            self.note(f"warning: {len(both)} training row(s) are also development rows ({shown}): they give no "
                      "demonstrations, so that no row donates to its own evaluation")
        return {row.id for row in self.train_rows} - set(both)

    def _open_work(self, force: bool) -> None:
        state = {"program": sha256_file(self.path), "train": sha256_file(self.train), "dev": sha256_file(self.dev),
                 "files": {name: sha256_file(p) for name, p in sorted(self.files.items())},
                 "settings": dataclasses.asdict(dataclasses.replace(self.settings, max_calls=None)),
                 "metric": self.metric_name, "model": self.options.model, "teacher": self.teacher,
                 "main": self.main}
        self.state = state
        previous = self._claim(force)
        if previous is not None and previous != state:
            changed = sorted(k for k in state if previous.get(k) != state[k])
            raise OptimizeError(f"{self.out} holds an optimisation with other inputs or settings "
                                f"({', '.join(changed)}): give another --out, or --force to start over")
        if previous is not None:
            self.note(f"resuming the optimisation in {self.out}")
        rounds = range(1, self.settings.rounds + 1)
        self.owned.add_work([STATE, "candidates", "evals", *(f"teacher-{n}" for n in rounds),
                             *(f"teacher-{n}.jsonl" for n in rounds if n > 1)])
        (self.work / STATE).write_text(storable_json(state, indent=1, sort_keys=True), encoding="utf-8")

    def _claim(self, force: bool) -> dict[str, Any] | None:
        """Take --out as decomp's (`OwnedFolder`: new, empty, or marked by an earlier run; with
        `force`, what that run wrote removed): the state an earlier run recorded, if any."""
        try:
            self.owned, before = OwnedFolder.claim(self.out, WORK)
            self.owned.check_free([*self.files, "report.json"])  # before any call, as far as known here
            if before and force:
                self.owned.clear()
        except FolderError as err:
            raise OptimizeError(err.message) from None
        return self._recorded_state() if before and not force else None

    def _recorded_state(self) -> dict[str, Any] | None:
        """The inputs and settings an earlier run in the folder recorded (None: none); an
        `OptimizeError` naming the file when it is damaged."""
        recorded = self.work / STATE
        if not recorded.is_symlink() and not recorded.exists():
            return None
        problem = "not a plain file"
        if recorded.is_file():
            try:
                before = read_work_json(recorded)
            except (OSError, ValueError) as err:
                problem = getattr(err, "strerror", None) or str(err)
            else:
                if isinstance(before, dict):
                    return before
                problem = f"{json_kind(before)}, not an object"
        raise OptimizeError(f"{recorded} is damaged ({problem}): give another --out, or --force to start over")

    def _project(self) -> dict[str, int]:
        """Model calls at most (the dry run's estimate, every call a cache miss), printed and
        checked against max_calls."""
        session = dataclasses.replace(self.options, cache_mode="off").session(ReplayModel())
        loaded = self._load(session)
        teacher = sum(dryrun.dry_run(session, loaded, self.train_rows).calls) * self.settings.rounds
        dev = sum(dryrun.dry_run(session, loaded, self.dev_rows).calls)
        planned = 1 + 2 * (self.settings.candidates > 0) + self.settings.candidates  # zero-shot, labelled,
        projected = {"teacher_calls": teacher, "calls_per_candidate": dev, "candidates": planned,  # bootstrapped
                     "projected_calls": teacher + planned * dev}
        self.note(f"projected at most {projected['projected_calls']:,} model calls: the teacher on "
                  f"{len(self.train_rows)} training rows ({teacher:,}), then up to {planned} candidates on "
                  f"{len(self.dev_rows)} development rows ({dev:,} each); cache hits make fewer")
        cap = self.settings.max_calls
        least = teacher + 2 * dev  # the teacher, zero-shot and one candidate
        if cap is not None and least > cap:
            raise OptimizeError(f"--max-calls {cap:,} is fewer than the {least:,} model calls the teacher and two "
                                "candidates could take: raise it, or use fewer rows")
        if cap is not None and projected["projected_calls"] > cap:
            self.note(f"warning: the projection is over --max-calls {cap:,}: the optimisation stops when the calls "
                      "reach it, and keeps the best candidate scored in full by then")
        return projected

    # ---- the teacher
    def _bootstrap(self, loaded: LoadedModule) -> tuple[dict[str, list[Demo]], dict[str, Any]]:
        pool: dict[str, list[Demo]] = {name: [] for name in self.targets}
        todo, passed, failures = list(self.train_rows), set(), []
        by_id = {row.id: row for row in self.train_rows}
        rounds = []
        for number in range(1, self.settings.rounds + 1):
            if not todo or self.stopped:
                break
            data = self.train if number == 1 else self._rows_file(todo, f"teacher-{number}.jsonl")
            options = self.options if number == 1 else dataclasses.replace(
                self.options, temperature=self.settings.teacher_temperature, rollout=number - 1)
            done = self._run(self.path, data, self.work / f"teacher-{number}", options, model=self.teacher)
            if done is None:
                break
            kept = 0
            for row, record, trace, (score, problem) in self._scored(done, by_id):
                if problem:
                    failures.append({"row": row.id, "error": problem})
                if score is None or score < self.settings.threshold:
                    continue
                passed.add(row.id)
                kept += 1
                if row.id in self.donors and trace is not None:
                    for demo in harvest(trace, row.id, self.targets, self.settings.foreach_demos, loaded.main,
                                        row.fields.get("question"), row.gold):
                        pool[demo.handler].append(demo)
            rounds.append({"round": number, "rows": len(todo), "passed": kept})
            todo = [row for row in todo if row.id not in passed]
        if failures:
            self.note(f"the metric failed on {len(failures)} training row(s), which gave no demonstrations "
                      f"(report.json's bootstrap.metric_errors); row {failures[0]['row']}: {failures[0]['error']}")
        report = {"model": self.teacher or self.options.model, "rows": len(self.train_rows), "passed": len(passed),
                  "rounds": rounds, "metric_errors": failures[:20], "demos": {k: len(v) for k, v in pool.items()}}
        self.note(f"the teacher passed {len(passed)} of {len(self.train_rows)} training rows; demonstrations: "
                  + ", ".join(f"[{k}] {len(v)}" for k, v in pool.items()))
        return pool, report

    def _labelled(self, loaded: LoadedModule) -> dict[str, list[Demo]]:
        target = self.targets.get(loaded.main or "")
        if target is None:
            return {}
        demos = [labelled(target, row.id, row.fields.get("question"), row.gold) for row in self.train_rows
                 if row.id in self.donors]
        return {target.name: [d for d in demos if d is not None]}

    def _rows_file(self, rows: list[Row], name: str) -> Path:
        path = self.work / name
        path.write_text("".join(json_line({"id": row.id, **row.fields, **({"answer": row.gold} if row.gold is not None
                                                                           else {})}) for row in rows), encoding="utf-8")
        return path

    # ---- the candidates
    def _score_all(self, found: list[Candidate]) -> list[dict[str, Any]]:
        """Every candidate's entry of the report. Zero-shot is scored first, in full; the others
        race over the development rows in quarters, all of a quarter at once: after each, a
        candidate that can no longer reach the best score another one is sure of stops."""
        entries = [self._entry(number, candidate) for number, candidate in enumerate(found)]
        self._race(entries[:1], [(0, None)])
        if entries[0]["complete"]:
            self.note(f"zero-shot: dev score {entries[0]['dev_score']:.4f} ({entries[0]['calls']:,} calls)")
        if self._unbeatable(entries[0]) and len(entries) > 1:
            self.stopped_early = (f"zero-shot scored {entries[0]['dev_score']:g} on the development rows, the best "
                                  f"{self.metric_name} can give: the other {len(entries) - 1} candidate(s) were not "
                                  "scored (--no-prune scores them)")
            self.note(f"stopped early: {self.stopped_early}")
            for entry in entries[1:]:
                entry["not_scored"] = "zero-shot already scored the best possible"
        else:
            self._race(entries[1:], self._batches())
        for candidate, entry in zip(found[1:], entries[1:]):
            if entry["complete"]:
                self.note(f"{candidate.name}: dev score {entry['dev_score']:.4f} ({_counted(candidate)}; "
                          f"{entry['calls']:,} calls)")
            elif "pruned" in entry:
                self.note(f"{candidate.name}: {entry['pruned']} ({entry['calls']:,} calls)")
        for entry in entries:
            for private in ("_scores", "_main", "_runs"):
                entry.pop(private, None)
        return entries

    def _entry(self, number: int, candidate: Candidate) -> dict[str, Any]:
        folder = self.work / "candidates" / f"{number:02d}-{candidate.name}"
        main = write_candidate(self.files, self.path, self.targets, candidate, folder, self.settings.keep_examples)
        return {"name": candidate.name, "demos": candidate.counts(), "dev_score": None, "dev_rows": len(self.dev_rows),
                "scored_rows": 0, "calls": 0, "tokens": 0, "complete": False, "folder": str(folder),
                "demonstrations": {name: [d.to_dict() for d in demos]
                                   for name, demos in sorted(candidate.demos.items()) if demos},
                "_main": main, "_scores": [], "_runs": self.work / "evals" / folder.name}

    def _race(self, entries: list[dict[str, Any]], windows: list[tuple[int, int | None]]) -> None:
        alive = list(entries)
        for offset, limit in windows:
            if not alive:
                break
            if self.stopped:
                for entry in alive:
                    entry["not_scored"] = self.stopped
                return
            share = None if self.settings.max_calls is None else (self.settings.max_calls - self.calls) // len(alive)
            runs = [(entry["_main"], self.dev, entry["_runs"] / f"rows-{offset}", offset, limit) for entry in alive]
            results = run_sync(lambda: asyncio.gather(*(self._arun(*run, share=share) for run in runs)))
            for entry, (pairs, calls, tokens) in zip(alive, results):
                entry.update(calls=entry["calls"] + calls, tokens=entry["tokens"] + tokens)
                if pairs is None:
                    entry["not_scored"] = self.stopped
                    continue
                self._add_scores(entry, pairs)
            alive = [entry for entry in alive if "not_scored" not in entry]
            alive = self._pruned(alive)
        for entry in alive:
            scores = entry["_scores"]
            entry.update(dev_score=round(sum(scores) / len(scores), 6) if scores else 0.0, scored_rows=len(scores),
                         complete=True)
            self.best = max(self.best, entry["dev_score"])

    def _unbeatable(self, entry: dict[str, Any]) -> bool:
        """Whether `entry`, scored in full, has the best score the metric can give (`prune` on):
        no other candidate can then be chosen, as a tie goes to the fewest demonstrations and
        zero-shot has none."""
        return (self.settings.prune and self.metric_max is not None and entry["complete"]
                and entry["dev_score"] >= self.metric_max)

    def _add_scores(self, entry: dict[str, Any], pairs) -> None:
        by_id = {row.id: row for row in self.dev_rows}
        for row, _, _, (score, problem) in self._scored(pairs, by_id):
            entry["_scores"].append(score or 0.0)
            if problem:
                entry.setdefault("metric_errors", []).append({"row": row.id, "error": problem})

    def _pruned(self, alive: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`alive` less the candidates that can no longer reach the score another is sure of
        (the best scored in full, or what a racing one has in hand with the rest at 0)."""
        n = len(self.dev_rows)
        if not self.settings.prune or self.metric_max is None or not n:
            return alive
        sure = max([self.best] + [sum(e["_scores"]) / n for e in alive])
        kept = []
        for entry in alive:
            scores = entry["_scores"]
            bound = (sum(scores) + self.metric_max * (n - len(scores))) / n
            if bound < sure and len(scores) < n:
                entry.update(scored_rows=len(scores), dev_score_at_most=round(bound, 6),
                             pruned=f"stopped after {len(scores)} of {n} rows: it could score at most {bound:.4f}, "
                                    f"below {sure:.4f}")
            else:
                kept.append(entry)
        return kept

    def _batches(self) -> list[tuple[int, int | None]]:
        """The windows of development rows the candidates race over: quarters (of at least
        BATCH rows) when they may be stopped early, else all the rows at once."""
        if not self.settings.prune or self.metric_max is None:
            return [(0, None)]
        size = max(BATCH, -(-self.dev_positions // ROUNDS))
        return [(offset, size) for offset in range(0, self.dev_positions, size)]

    def _scored(self, pairs, by_id: dict[str, Row]) -> list[tuple[Row, dict, Any, tuple[float | None, str | None]]]:
        """Each (record, trace) of a run whose row is in `by_id`, with its (score, None) or (None,
        the metric's error): scored all at once (a contained metric, several rows in flight)."""
        items = [(by_id[record.get("id")], record, trace) for record, trace in pairs if record.get("id") in by_id]
        return [(*item, scored) for item, scored in zip(items, self.metric.score_rows(items))]

    def _run(self, program: Path, data: Path, run_dir: Path, options: RunOptions, model: str | None = None):
        """Run `program` over `data` into `run_dir` (resumed when there): its (record, trace)
        pairs, or None when the call budget ran out before it ended (`self.stopped` says so)."""
        if self.settings.max_calls is not None and self.calls >= self.settings.max_calls:
            self.stopped = f"the call budget (--max-calls {self.settings.max_calls:,}) was spent"
            return None
        share = None if self.settings.max_calls is None else self.settings.max_calls - self.calls
        pairs, _, _ = run_sync(lambda: self._arun(program, data, run_dir, 0, None, share=share, options=options,
                                                  model=model, progress=self.progress))
        return pairs

    async def _arun(self, program: Path, data: Path, run_dir: Path, offset: int, limit: int | None, *,
                    share: int | None, options: RunOptions | None = None, model: str | None = None,
                    progress: bool | None = False):
        """One run of `program` over the rows `offset` to `offset + limit` of `data` into
        `run_dir` (resumed when there), in the optimisation's scheduler, at most `share` model
        calls: its (record, trace) pairs (None: stopped at the budget) and its calls and tokens.
        Runs racing at once draw no progress bars (`progress` False): they would overwrite
        each other's."""
        options = options or self.options
        if share is not None:
            if share < 1:
                self.stopped = f"the call budget (--max-calls {self.settings.max_calls:,}) was spent"
                return None, 0, 0
            options = dataclasses.replace(options, max_calls=share)
        # what an "auto" model found in one run, every later run starts on (said once)
        found = {**options.apis, **self.found_apis}
        session = dataclasses.replace(options, model=model or options.model, apis=found).session(on_note=self.note)
        session.scheduler = self.scheduler  # one bound on the calls in flight, for all the runs at once
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        self.under_way[run_dir] = (data, offset, limit)  # until it ends: what an interrupt stopped
        done = await arun_dataset(program, data, session=session, run_dir=run_dir,
                                  resume=(run_dir / "run.json").is_file(), progress=progress, offset=offset,
                                  limit=limit)
        del self.under_way[run_dir]
        self.found_apis.update(session.apis)
        calls, tokens = _usage(done.summary)
        self.calls += calls
        self.tokens += tokens
        run = RunDir.open(done.run_dir)
        traces = dict(run.traces())
        pairs = [(record, traces.get(record.get("index"))) for record in run.records()]
        if share is not None and any("error" in record and "budget exhausted" in record["error"] for record, _ in pairs):
            self.stopped = f"the call budget (--max-calls {self.settings.max_calls:,}) was spent"
            self.note(f"stopped: {self.stopped}; the best candidate scored in full by then is kept")
            shutil.rmtree(run_dir)  # its rows ended at the budget, not by the program: a resume runs them again
            return None, calls, tokens
        return pairs, calls, tokens

    def interrupted(self) -> OptimizeInterrupted:
        """What an interrupt stopped: the rows the runs under way kept and had to run."""
        if not self.under_way:
            return OptimizeInterrupted(self.out, None, None)
        kept = rows = 0
        for run_dir, (data, offset, limit) in self.under_way.items():
            rows += sum(1 for _ in window(read_rows(data), offset, limit))
            try:
                kept += len(RunDir.open(run_dir, keep=False).indices)
            except (DecompError, OSError):  # stopped before its run.json was written: nothing kept
                pass
        dirs = list(self.under_way)
        if len(dirs) == 1 and dirs[0].parent == self.work:
            return OptimizeInterrupted(self.out, "the teacher on --train", dirs[0], kept, rows)
        return OptimizeInterrupted(self.out, f"{len(dirs)} candidate(s) on --dev", self.work / "evals", kept, rows)

    # ---- the end
    def _finish(self, scored: list[dict[str, Any]]) -> OptimizeResult:
        complete = [(number, entry) for number, entry in enumerate(scored) if entry["complete"]]
        if not complete:
            raise OptimizeError(f"no candidate was scored in full ({self.stopped or 'see the notes'}): nothing written; "
                                "raise --max-calls")
        number, chosen = max(complete, key=lambda c: (c[1]["dev_score"], -sum(c[1]["demos"].values()), -c[0]))
        source = Path(chosen["folder"])
        program = self.out / self.path.name
        report = {
            "program": str(self.path.resolve()), "optimized": str(program), "main": self.main,
            "metric": self.metric_name, "threshold": self.settings.threshold, "seed": self.settings.seed,
            "settings": dataclasses.asdict(self.settings), "model": self.options.model,
            "teacher": self.teacher or self.options.model,
            "data": {"train": {"path": str(self.train), "sha256": self.state["train"], "rows": len(self.train_rows)},
                     "dev": {"path": str(self.dev), "sha256": self.state["dev"], "rows": len(self.dev_rows)}},
            "handlers": {name: t.form for name, t in self.targets.items()}, "skipped": self.skipped,
            "bootstrap": self.teacher_report, "projected": self.projected,
            "chosen": {k: chosen[k] for k in ("name", "dev_score", "demos", "calls", "tokens")} | {"number": number},
            "candidates": scored, "calls": self.calls, "tokens": self.tokens,
            "wall_s": round(time.perf_counter() - self.started, 3),
            **({"stopped": self.stopped} if self.stopped else {}),
            **({"stopped_early": self.stopped_early} if self.stopped_early else {}),
        }
        files = {path.relative_to(source).as_posix(): path.read_bytes() for path in sorted(source.rglob("*"))
                 if path.is_file()}
        files["report.json"] = (storable_json(report, indent=1) + "\n").encode()
        try:
            self.owned.publish(files)  # only over the files an earlier run wrote: the user's stay
        except FolderError as err:
            raise OptimizeError(err.message) from None
        self.note(f"chose {chosen['name']}: dev score {chosen['dev_score']:.4f} (zero-shot "
                  f"{scored[0]['dev_score'] if scored[0]['dev_score'] is not None else '-'}); wrote {program}")
        return OptimizeResult(program, self.out, report)


def _counted(candidate: Candidate) -> str:
    counts = candidate.counts()
    return ", ".join(f"[{k}] {v}" for k, v in counts.items()) + " demonstrations" if counts else "its own examples"


def _usage(summary: dict[str, Any]) -> tuple[int, int]:
    """Model requests and tokens a run directory's run made (cache hits make none), over all its
    sessions: its summary's totals."""
    return summary.get("calls", 0), summary.get("prompt_tokens", 0) + summary.get("completion_tokens", 0)
