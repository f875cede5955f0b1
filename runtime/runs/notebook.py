"""The notebook API: load a program, run it on one question or a dataset, read a run back.

    import decomp

    program = decomp.load("decomp/letter_cat_symbolic")          # a file or a bundled program
    result = decomp.run(program, question="Take the letters ...")  # a RunResult
    run = decomp.run(program, dataset="rows.jsonl")               # a Run (its run directory)
    run.rows(), run.trace("q1"), run.summary, run.to_pandas()
    run = decomp.open_run("runs/letter_cat_symbolic-rows-...")     # any run directory

`run` and the other synchronous calls work inside a running event loop too (a Jupyter cell):
the work then runs on a worker thread with a loop of its own (`decomp.runtime.engine.syncrun`);
`await decomp.arun(...)` runs it in the caller's loop. Everything here delegates: a question
runs through `Session.arun`, a dataset through `arun_dataset`, a run directory is read with
`RunDir`; trust (`--trust`) and allowed folders (`--allow-root`) are the `RunOptions` of the
program's session (`Session.trust`, its own: two programs never share it). A dataset
given in memory is written as JSONL by `datasets.jsonl_text`; the progress bar is
`decomp.runtime.runs.bars`'. `decomp.evaluate` and `decomp.compare` read runs back as figures
(`notebook_evaluate`, `decomp.runtime.views.notebook_compare`).
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decomp.runtime.engine.loader import LoadedModule
from decomp.runtime.engine.session import RunResult, Session
from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.models.base import Model
from decomp.runtime.runs.api import (
    RunOptions,
    RunSummary,
    arun_dataset,
    find_program,
    interrupts_said,
    use_main,
    user_folders,
)
from decomp.runtime.runs.bars import run_bar
from decomp.runtime.storage.datasets import ACCEPTED, jsonl_text, read_rows
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.manifest import read_manifest, runs_root, sha256_file
from decomp.runtime.storage.rundir import RunDir

__all__ = ["Program", "Run", "arun", "load", "open_run", "run"]

#: The settings `load` and `run` take besides the model: the `RunOptions` fields (`trust` and
#: `allow_roots` among them).
SETTINGS = tuple(f.name for f in dataclasses.fields(RunOptions) if f.name != "model")
#: What only a dataset run takes (an error with a question).
_DATASET_ONLY = ("run_dir", "resume", "force", "output", "shard", "offset", "limit")


@dataclass(frozen=True)
class Program:
    """A loaded and checked program, ready to run: `decomp.run(program, ...)` or `program.run(...)`.

    Its `session` (built from its settings) runs every question given to it, so its usage
    (`program.session.usage`) and step cache carry over from one question to the next; a
    dataset run gets a session of its own, as `decomp run --input` does."""

    path: Path
    module: LoadedModule
    session: Session
    options: RunOptions
    model: str | Model | None = None
    main: str | None = None

    @property
    def trust(self) -> tuple[str, ...]:
        """The modules its python handlers may import besides its own (`load(trust=...)`)."""
        return self.options.trust

    @property
    def allow_roots(self) -> tuple[str, ...]:
        """The folders it may read files in besides its own (`load(allow_roots=...)`)."""
        return self.options.allow_roots

    def __repr__(self) -> str:
        model = self.session.default_model_spec(self.module)
        trusted = f", trust={list(self.trust)}" if self.trust else ""
        roots = f", allow_roots={list(self.allow_roots)}" if self.allow_roots else ""
        return f"<decomp.Program {self.path.name} main={self.module.main!r} model={model!r}{trusted}{roots}>"

    def run(self, question: str | None = None, **kwargs: Any) -> RunResult | Run:
        """`decomp.run(self, question, ...)`."""
        return run(self, question, **kwargs)

    async def arun(self, question: str | None = None, **kwargs: Any) -> RunResult | Run:
        """`await decomp.arun(self, question, ...)`."""
        return await arun(self, question, **kwargs)

    def changed(self, **changes: Any) -> "Program":
        """This program loaded again with some of its settings changed (a new session)."""
        settings = {name: getattr(self.options, name) for name in SETTINGS}
        given = {"model": self.model, "main": self.main, **settings, **changes}
        return load(self.path, **given)


def load(program: str | Path, *, model: str | Model | None = None, main: str | None = None,
         trust: Iterable[str] = (), allow_roots: Iterable[str | Path] = (), **settings: Any) -> Program:
    """Load and check `program` (a .decomp file, or a bundled program such as
    `decomp/letter_cat_symbolic`) into a `Program` to run.

    model:       the model of every handler naming none (`openai:NAME`, `fake:FILE.json`, a
                 `Model` instance such as a `FakeModel`, which runs uncached); None: the
                 program's `model default`, else the embedded local model
    main:        run this program or handler of the file instead of its `main`
    trust:       modules its python handlers may import besides its own (`--trust MODULE`)
    allow_roots: folders it may read files in besides its own (`--allow-root DIR`)
    settings:    any `RunOptions` field (`cache_mode="off"`, `concurrency=4`, `max_calls=100`,
                 ...), with the command line's defaults: the step cache is on

    Raises `DecompError` for a program that does not load or check (often `Diagnostics`,
    each problem positioned), `TypeError` for a setting that does not exist.
    """
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"load() got unknown settings {', '.join(unknown)} (known: model, main, "
                        f"{', '.join(SETTINGS)})")
    options = RunOptions(model=model if isinstance(model, str) else None, trust=_names(trust, "trust"),
                         allow_roots=_names(allow_roots, "allow_roots"), **settings)
    session = options.session(model if isinstance(model, Model) else None)
    path = find_program(program)
    module = use_main(session.load(path), main, path)
    return Program(path, module, session, options, model, main)


def run(program: Program | str | Path, question: str | None = None, *, fields: Mapping[str, Any] | None = None,
        dataset: str | Path | Iterable[Mapping[str, Any]] | Any = None, run_dir: str | Path | None = None,
        resume: bool = False, force: bool = False, output: str | Path | None = None, progress: bool | None = None,
        shard: str | None = None, offset: int = 0, limit: int | None = None, **settings: Any) -> RunResult | Run:
    """Run `program` on one question (a `RunResult`) or on every row of `dataset` (a `Run`).

    program:  a `Program` from `load`, or what `load` takes (loaded here with `settings`)
    question: the question of one row; `fields` are that row's other inputs (or every row's,
              with `dataset`: `decomp run --field NAME=VALUE`)
    dataset:  a JSONL, CSV or DROP-style JSON file; or rows in memory: a list (or any iterable,
              a generator) of row dicts ({id, question, ..., answer?}) or a pandas DataFrame
              (its columns the fields; a missing cell, NaN, None, NaT or NA, is a field the
              row lacks; its index is not a field), written once to `inputs/rows-HASH.jsonl`
              beside the run directory so that the run records its input file like any other
              (and can be resumed)
    progress: a progress bar on stderr (a dataset only): None, when in a Jupyter kernel or
              stderr is a terminal; True always; False never. tqdm's when tqdm is installed
              (`decomp.runtime.runs.bars`)
    run_dir, resume, force, output, shard, offset, limit: as `run_dataset` takes them (a
              dataset only)
    settings: what `load` takes (model, main, trust, allow_roots, `RunOptions` fields); given
              with a `Program`, it is loaded again with them changed

    A row's error is in its result (`RunResult.error`, a row's `error` in `Run.rows()`), not
    raised. Inside a running event loop (Jupyter) this runs on a worker thread; `await arun(...)`
    runs in the caller's loop.
    """
    with interrupts_said():  # a dataset run stopped: `RunInterrupted`, its rows kept and left
        return run_sync(lambda: arun(program, question, fields=fields, dataset=dataset, run_dir=run_dir,
                                     resume=resume, force=force, output=output, progress=progress, shard=shard,
                                     offset=offset, limit=limit, **settings))


async def arun(program: Program | str | Path, question: str | None = None, *,
               fields: Mapping[str, Any] | None = None,
               dataset: str | Path | Iterable[Mapping[str, Any]] | Any = None, run_dir: str | Path | None = None,
               resume: bool = False, force: bool = False, output: str | Path | None = None,
               progress: bool | None = None, shard: str | None = None, offset: int = 0, limit: int | None = None,
               **settings: Any) -> RunResult | Run:
    """`run` in the caller's event loop: `await decomp.arun(program, question=...)`."""
    metric = settings.pop("metric", None)  # a dataset run's (`run_dataset`): no reason to load the program again
    program = _program(program, settings)
    fields = dict(fields or {})
    if dataset is None:
        given = [name for name, value in zip((*_DATASET_ONLY, "metric"),
                                             (run_dir, resume, force, output, shard, offset, limit, metric)) if value]
        if given:
            raise TypeError(f"{', '.join(given)} go with dataset=..., not with one question")
        return await _one(program, question, fields)
    if question is not None:
        raise TypeError("give question=... (one row) or dataset=... (every row has its own question), not both")
    data = _dataset_file(dataset, run_dir)
    done = await arun_dataset(program.path, data, model=program.model, options=program.options,
                              main=program.main, run_dir=run_dir, resume=resume, force=force, output=output,
                              progress=run_bar(progress), fields=fields, shard=shard,
                              offset=offset, limit=limit, metric=metric)
    return Run(done.run_dir, done)


def open_run(path: str | Path) -> Run:
    """The run directory `path` (as `decomp run --input` or `decomp.run(..., dataset=...)`
    wrote it), to read: `RunDirError` when it is not one."""
    return Run(Path(path))


class Run:
    """A run directory, read: `rows()`, `trace(row)`, `summary`, `to_pandas()`.

    Each call reads the directory again, so a run still being written shows its rows so far."""

    def __init__(self, path: Path, done: RunSummary | None = None):
        self.path = Path(path)
        #: What `decomp.run` returned for the run that wrote it (None for `open_run`).
        self.result = done
        self._open().close()  # refuse now what is not a run directory

    def __repr__(self) -> str:
        summary = self.summary
        score = summary.get("score")
        scored = f" score={score:.3f} ({summary.get('metric', 'em')})" if isinstance(score, (int, float)) else ""
        program = Path(self.manifest["program"]["path"]).name
        return f"<decomp.Run {str(self.path)!r} program={program!r} rows={summary.get('rows')} " \
               f"failed={summary.get('failed')}{scored}>"

    def _open(self) -> RunDir:
        return RunDir.open(self.path)

    @property
    def summary(self) -> dict[str, Any]:
        """The run's totals over its complete rows: what summary.json holds once it has ended
        (rows, failed, score and metric with gold, calls, tokens, cache hits, per-handler latency)."""
        return self._open().summary()

    @property
    def manifest(self) -> dict[str, Any]:
        """run.json: the program, the input, the options and the sessions of the run."""
        return read_manifest(self.path)

    def records(self) -> list[dict[str, Any]]:
        """Every complete row's results line as stored, in input order."""
        return self._open().records()

    def rows(self) -> list[dict[str, Any]]:
        """One dict per complete row, in input order: index, id, question (from the input file,
        while it is there unchanged; else None), answer, outcome ("ok", "failed" or "error"),
        error (None when none), gold and score (with gold), seconds, and the usage counts."""
        run = self._open()
        questions = _questions(run.manifest)
        return [_row(record, questions.get(record["index"])) for record in run.records()]

    def trace(self, row: str | int) -> TraceNode:
        """The decomposition tree of the row whose id is `row` (else whose index is `row`): a
        `TraceNode`, each node with its kind, label, handler, query, answer, error and children."""
        run = self._open()
        record = run.find(str(row))
        try:
            tree = run.trace(record["index"])
        finally:
            run.close()
        if tree is None:
            raise RunDirError(f"{self.path} holds no trace of row {row!r}")
        return tree

    def to_pandas(self) -> Any:
        """`rows()` as a pandas DataFrame (pandas is optional: `pip install pandas`)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Run.to_pandas() needs pandas, which is not installed: pip install pandas") from None
        return pandas.DataFrame(self.rows())


def _program(program: Program | str | Path, settings: dict[str, Any]) -> Program:
    if isinstance(program, Program):
        return program.changed(**settings) if settings else program
    if isinstance(program, (str, Path)):
        return load(program, **settings)
    raise TypeError(f"run() takes a Program from decomp.load, or a program's path or name, not "
                    f"{type(program).__name__}")


async def _one(program: Program, question: str | None, fields: dict[str, Any]) -> RunResult:
    if question is None and not fields:
        raise TypeError("give question=... (or the row's fields=...) for one row, or dataset=... for many")
    row = {**fields, "question": question} if question is not None else fields
    with program.session.trusting(user_folders(fields)):  # a folder the caller gives is the caller's
        try:
            return await program.session.arun(program.module, row)
        finally:
            await program.session.aclose()


def _dataset_file(dataset: Any, run_dir: str | Path | None) -> Path:
    """The file of `dataset`: its own (a path), else its rows written by `_rows_file`."""
    if not isinstance(dataset, (str, Path)):
        return _rows_file(dataset, run_dir)
    path = Path(dataset)
    if path.is_dir():
        raise IsADirectoryError(f"dataset {str(path)!r} is a folder; give {ACCEPTED}")
    if not path.is_file():
        raise FileNotFoundError(f"dataset {str(path)!r} does not exist; give {ACCEPTED}")
    return path


def _rows_file(rows: Any, run_dir: str | Path | None) -> Path:
    """`rows` (`datasets.jsonl_text` takes them) written as JSONL to inputs/rows-HASH.jsonl
    beside the run directory (the same rows: the same file, so that a run over them can be
    resumed)."""
    text = jsonl_text(rows)
    folder = (Path(run_dir).parent if run_dir is not None else runs_root()) / "inputs"
    path = folder / f"rows-{hashlib.sha256(text.encode()).hexdigest()[:16]}.jsonl"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


def _questions(manifest: dict) -> dict[int, Any]:
    """Each row's question by index, from the run's input file when it is there unchanged."""
    source = manifest.get("input") or {}
    path = Path(source.get("path") or "")
    try:
        if not path.is_file() or sha256_file(path) != source.get("sha256"):
            return {}
        return {row.index: row.fields.get("question") for row in read_rows(path) if row.fields is not None}
    except (OSError, ValueError):
        return {}


def _row(record: dict[str, Any], question: Any) -> dict[str, Any]:
    row = {"index": record["index"], "id": record.get("id"), "question": question, "answer": record.get("answer"),
           "outcome": "error" if "error" in record else record.get("outcome", "ok"), "error": record.get("error")}
    for name in ("gold", "score", "seconds"):
        if name in record:
            row[name] = record[name]
    usage = record.get("usage")
    row.update({k: v for k, v in (usage.items() if isinstance(usage, dict) else ()) if not isinstance(v, (dict, list))})
    return row


def _names(values: Iterable[Any] | str, what: str) -> tuple[str, ...]:
    """A list of names; one name given as a string (not split into its letters)."""
    if isinstance(values, (str, Path)):
        return (str(values),)
    try:
        return tuple(str(v) for v in values)
    except TypeError:
        raise TypeError(f"{what} is a list of names, not {type(values).__name__}") from None

