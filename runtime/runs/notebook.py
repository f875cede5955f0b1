"""The one way in from Python: load a program, run it on one question or a dataset, read a run back.

    import decomp

    program = decomp.load("decomp/letter_cat_symbolic")       # a file or a bundled program
    result = program.run("Take the letters ...")               # one question: a RunResult
    run = program.run_dataset("rows.jsonl")                    # a dataset: a Run (its run directory)
    run.rows(), run.trace("q1"), run.summary, run.to_pandas()
    run = decomp.open_run("runs/letter_cat_symbolic-rows-...")  # any run directory

`Program.run` and the other synchronous calls work inside a running event loop too (a Jupyter
cell): the work then runs on a worker thread with a loop of its own
(`decomp.runtime.engine.syncrun`); `await program.arun(...)` runs it in the caller's loop.
Everything here delegates: a question runs through `Session.arun`, a dataset through
`api.arun_dataset`, a run directory is read with `RunDir`; trust (`--trust`) and allowed
folders (`--allow-root`) are the `RunOptions` of the program's session (`Session.trust`, its
own: two programs never share it). A dataset given in memory is written as JSONL by
`datasets.jsonl_text`; the progress bar is `decomp.runtime.runs.bars`'. `decomp.evaluate` and
`decomp.compare` read runs back as figures (`notebook_evaluate`,
`decomp.runtime.views.notebook_compare`).

The old top-level calls `decomp.run`, `decomp.arun`, `decomp.run_dataset` and
`decomp.arun_dataset` are here for one release more, each a thin alias that warns
(`DeprecationWarning`) and calls the `Program` method that replaces it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from decomp.runtime.engine.loader import LoadedModule
from decomp.runtime.engine.session import RunResult, Session
from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.models.base import Model
from decomp.runtime.runs import api
from decomp.runtime.runs.api import RunOptions, RunSummary, find_program, interrupts_said, use_main, user_folders
from decomp.runtime.runs.bars import run_bar
from decomp.runtime.storage.datasets import ACCEPTED, jsonl_text, read_rows
from decomp.runtime.runs.remote import Workers
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.manifest import read_manifest, runs_root, sha256_file
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.runs.shards import Shard

__all__ = ["Program", "Run", "load", "open_run"]

#: The settings `load` takes besides the model: the `RunOptions` fields (`trust` and
#: `allow_roots` among them).
SETTINGS = tuple(f.name for f in dataclasses.fields(RunOptions) if f.name != "model")
#: What only a dataset run takes (`Program.run_dataset`), for the deprecated `decomp.run`.
_DATASET_ONLY = ("run_dir", "resume", "force", "output", "progress", "shard", "offset", "limit", "metric")


@dataclass(frozen=True)
class Program:
    """A loaded and checked program, ready to run (`decomp.load` makes one): `run(question)` for
    one question (a `RunResult`), `run_dataset(data)` for a dataset (a `Run`); `arun` and
    `arun_dataset` are the same in the caller's event loop.

    Its `session` runs every question given to it, so its usage (`program.session.usage`) and
    step cache carry over from one question to the next. A dataset run gets a session of its
    own built from `options`, as `decomp run --input` does; a program loaded with `session=`
    runs its datasets in that session too."""

    path: Path
    module: LoadedModule
    session: Session
    options: RunOptions
    model: str | Model | None = None
    main: str | None = None
    #: True when the caller gave the session (`load(..., session=)`): its settings are the session's.
    own_session: bool = False

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

    def run(self, question: str | None = None, *, fields: Mapping[str, Any] | None = None) -> RunResult:
        """Run the program on one question: its `RunResult` (answer, error, usage, trace).

        question: the row's question; fields: the row's other inputs (a field naming an
                  existing folder is the caller's: handlers may read it, as with --allow-root)

        A row's error is in the result (`RunResult.error`), not raised. Inside a running event
        loop (Jupyter) this runs on a worker thread; `await program.arun(...)` runs in the
        caller's loop."""
        return run_sync(lambda: self.arun(question, fields=fields))

    async def arun(self, question: str | None = None, *, fields: Mapping[str, Any] | None = None) -> RunResult:
        """`run` in the caller's event loop: `await program.arun(question)`."""
        if question is not None and not isinstance(question, str):
            raise TypeError(f"run() takes one question (text), not {type(question).__name__}; "
                            f"a dataset of rows runs with run_dataset()")
        fields = dict(fields or {})
        if question is None and not fields:
            raise TypeError("give the question (or the row's fields=...); a dataset runs with run_dataset()")
        row = {**fields, "question": question} if question is not None else fields
        with self.session.trusting(user_folders(fields)):  # a folder the caller gives is the caller's
            try:
                return await self.session.arun(self.module, row)
            finally:
                await self.session.aclose()

    def run_dataset(self, data: str | Path | Iterable[Mapping[str, Any]] | Any, *,
                    fields: Mapping[str, Any] | None = None, run_dir: str | Path | None = None,
                    resume: bool = False, force: bool = False, output: str | Path | None = None,
                    progress: bool | None = None, shard: Shard | str | None = None, offset: int = 0,
                    limit: int | None = None, metric: str | Callable[..., Any] | None = None,
                    otlp: str | None = None, cluster: Workers | None = None) -> Run:
        """Run the program on every row of `data` into a run directory, as `decomp run PROGRAM
        --input DATA` does: the `Run` (its directory, read: `rows()`, `summary`, `trace(row)`).

        data:     a JSONL, CSV or DROP-style JSON file; or rows in memory: a list (or any
                  iterable, a generator) of row dicts ({id, question, ..., answer?}) or a pandas
                  DataFrame (its columns the fields; a missing cell, NaN, None, NaT or NA, is a
                  field the row lacks; its index is not a field), written once to
                  `inputs/rows-HASH.jsonl` beside the run directory so that the run records its
                  input file like any other (and can be resumed)
        fields:   input fields given to every row (`--field NAME=VALUE`)
        run_dir:  the run directory (None: runs/PROGRAM-INPUT-TIME, under $DECOMP_RUNS_DIR)
        resume, force: finish the run in `run_dir` (`--resume`), or start it over (`--force`)
        output:   also write every row's results line to this file, in input order
        progress: a progress bar on stderr: None, when in a Jupyter kernel or stderr is a
                  terminal; True always; False never. tqdm's when tqdm is installed
                  (`decomp.runtime.runs.bars`)
        shard, offset, limit: run only shard "I/N" of the rows, or the rows at input positions
                  `offset` to `offset + limit - 1` (`--shard`, `--offset`, `--limit`)
        metric:   what rows with gold are scored with, over the program's `metric`: a name or a
                  function (docs/runs.md, "The metric function")
        otlp:     also send each row's tree to this OpenTelemetry endpoint (`--otlp`)
        cluster:  run the rows on a pool of workers: Ray actors (`--ray`; `decomp.runtime.cluster.rows.Cluster`)

        What each does in detail: `decomp.runtime.runs.api.run_dataset`. A row's error is in its
        line (a row's `error` in `Run.rows()`), not raised; an interrupt (Ctrl-C, the stop
        button) raises `RunInterrupted`, the rows done kept for `resume=True`."""
        with interrupts_said():  # a dataset run stopped: `RunInterrupted`, its rows kept and left
            return run_sync(lambda: self.arun_dataset(
                data, fields=fields, run_dir=run_dir, resume=resume, force=force, output=output, progress=progress,
                shard=shard, offset=offset, limit=limit, metric=metric, otlp=otlp, cluster=cluster))

    async def arun_dataset(self, data: str | Path | Iterable[Mapping[str, Any]] | Any, *,
                           fields: Mapping[str, Any] | None = None, run_dir: str | Path | None = None,
                           resume: bool = False, force: bool = False, output: str | Path | None = None,
                           progress: bool | None = None, shard: Shard | str | None = None, offset: int = 0,
                           limit: int | None = None, metric: str | Callable[..., Any] | None = None,
                           otlp: str | None = None, cluster: Workers | None = None) -> Run:
        """`run_dataset` in the caller's event loop: `await program.arun_dataset(data)`."""
        runner = {"session": self.session} if self.own_session else {"model": self.model, "options": self.options}
        done = await api.arun_dataset(self.path, _dataset_file(data, run_dir), **runner, main=self.main,
                                      run_dir=run_dir, resume=resume, force=force, output=output,
                                      progress=run_bar(progress), fields=dict(fields or {}), shard=shard,
                                      offset=offset, limit=limit, metric=metric, otlp=otlp, cluster=cluster)
        return Run(done.run_dir, done)

    def changed(self, **changes: Any) -> "Program":
        """This program loaded again with some of its settings (what `load` takes) changed: a
        new session. A program loaded with `session=` is loaded again with another session."""
        if self.own_session:
            raise TypeError("this program runs in the session given to load(session=...): load it again with "
                            "another session instead of changing its settings")
        settings = {name: getattr(self.options, name) for name in SETTINGS}
        given = {"model": self.model, "main": self.main, **settings, **changes}
        return load(self.path, **given)


def load(program: str | Path, *, model: str | Model | None = None, main: str | None = None,
         trust: Iterable[str] = (), allow_roots: Iterable[str | Path] = (), session: Session | None = None,
         **settings: Any) -> Program:
    """Load and check `program` (a .decomp file, or a bundled program such as
    `decomp/letter_cat_symbolic`) into a `Program`: the one way to run a program from Python.

    model:       the model of every handler naming none (`openai:NAME`, `fake:FILE.json`, a
                 `Model` instance such as a `FakeModel`, which runs uncached); None: the
                 program's `model default`, else the embedded local model
    main:        run this program or handler of the file instead of its `main`
    trust:       modules its python handlers may import besides its own (`--trust MODULE`)
    allow_roots: folders it may read files in besides its own (`--allow-root DIR`)
    settings:    any `RunOptions` field (`cache_mode="off"`, `concurrency=4`, `max_calls=100`,
                 ...), with the command line's defaults: the step cache is on
    session:     a `Session` of one's own to run in, instead of one built from the above: it
                 owns the model, the limits, the cache and the trust, so none of model, trust,
                 allow_roots or settings goes with it. Its datasets run in it too

    Raises `DecompError` for a program that does not load or check (often `Diagnostics`,
    each problem positioned), `TypeError` for a setting that does not exist.
    """
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"load() got unknown settings {', '.join(unknown)} (known: model, main, session, "
                        f"{', '.join(SETTINGS)})")
    if session is not None:
        owned = {"model": model, "trust": trust, "allow_roots": allow_roots, **settings}
        return _in_session(program, session, main, [name for name, value in owned.items()
                                                   if name in settings or value not in (None, (), [])])
    options = RunOptions(model=model if isinstance(model, str) else None, trust=_names(trust, "trust"),
                         allow_roots=_names(allow_roots, "allow_roots"), **settings)
    session = options.session(model if isinstance(model, Model) else None)
    path = find_program(program)
    module = use_main(session.load(path), main, path)
    return Program(path, module, session, options, model, main)


def _in_session(program: str | Path, session: Session, main: str | None, given: list[str]) -> Program:
    """`program` loaded in the caller's `session`, which owns every setting (none may be `given`)."""
    if given:
        raise TypeError(f"load() takes a session or the settings to build one, not both: the session owns "
                        f"{', '.join(sorted(given))}")
    path = find_program(program)
    return Program(path, use_main(session.load(path), main, path), session, RunOptions.of(session), None, main,
                   own_session=True)


def open_run(path: str | Path) -> Run:
    """The run directory `path` (as `decomp run --input` or `Program.run_dataset` wrote it), to
    read: `RunDirError` when it is not one."""
    return Run(Path(path))


class Run:
    """A dataset run: its run directory (`path`), read: `rows()`, `trace(row)`, `summary`,
    `to_pandas()`. `Program.run_dataset` returns one, `decomp.open_run` opens one.

    Each call reads the directory again, so a run still being written shows its rows so far."""

    def __init__(self, path: Path, done: RunSummary | None = None):
        self.path = Path(path)
        #: What the run that wrote it ended with (`Program.run_dataset`): the totals, the
        #: `output` file written, and the `notes` opening the directory found (None for `open_run`).
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


# One release more: the old top-level entry points, each a thin alias of the `Program` method
# that replaces it (served by `decomp.__getattr__`, not in `decomp.__all__`).

def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and goes in the next release: use {new}", DeprecationWarning, stacklevel=3)


def run(program: Program | str | Path, question: str | None = None, **given: Any) -> RunResult | Run:
    """Deprecated: `decomp.load(program).run(question)`, or `.run_dataset(dataset)` for a dataset."""
    _deprecated("decomp.run", "decomp.load(program, ...).run(question) or .run_dataset(data, ...)")
    with interrupts_said():
        return run_sync(lambda: _either(program, question, **given))


async def arun(program: Program | str | Path, question: str | None = None, **given: Any) -> RunResult | Run:
    """Deprecated: `await decomp.load(program).arun(question)`, or `.arun_dataset(dataset)`."""
    _deprecated("decomp.arun", "decomp.load(program, ...).arun(question) or .arun_dataset(data, ...)")
    return await _either(program, question, **given)


def run_dataset(program: str | Path | LoadedModule, data: str | Path, **given: Any) -> RunSummary:
    """Deprecated: `decomp.load(program, ...).run_dataset(data, ...)` (a `Run`); this returns
    `decomp.runtime.runs.api.run_dataset`'s `RunSummary`, as it did."""
    _deprecated("decomp.run_dataset", "decomp.load(program, ...).run_dataset(data, ...)")
    return api.run_dataset(program, data, **given)


async def arun_dataset(program: str | Path | LoadedModule, data: str | Path, **given: Any) -> RunSummary:
    """Deprecated: `await decomp.load(program, ...).arun_dataset(data, ...)` (a `Run`)."""
    _deprecated("decomp.arun_dataset", "decomp.load(program, ...).arun_dataset(data, ...)")
    return await api.arun_dataset(program, data, **given)


async def _either(program: Program | str | Path, question: str | None, *, fields: Mapping[str, Any] | None = None,
                  dataset: Any = None, **given: Any) -> RunResult | Run:
    """What the old `decomp.arun` did: one question, or a dataset, of `program` loaded with the
    settings `given` (again, with them changed, when it is a `Program`)."""
    options = {name: given.pop(name) for name in _DATASET_ONLY if name in given}
    program = _loaded(program, given)
    if dataset is None:
        named = [name for name, value in options.items() if value and name != "progress"]
        if named:
            raise TypeError(f"{', '.join(named)} go with dataset=..., not with one question")
        return await program.arun(question, fields=fields)
    if question is not None:
        raise TypeError("give question=... (one row) or dataset=... (every row has its own question), not both")
    return await program.arun_dataset(dataset, fields=fields, **options)


def _loaded(program: Program | str | Path, settings: dict[str, Any]) -> Program:
    if isinstance(program, Program):
        return program.changed(**settings) if settings else program
    if isinstance(program, (str, Path)):
        return load(program, **settings)
    raise TypeError(f"run() takes a Program from decomp.load, or a program's path or name, not "
                    f"{type(program).__name__}")
