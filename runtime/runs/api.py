"""Run a program over a dataset into a run directory, from Python: what `decomp run FILE --input
DATA` does, as one call.

    from decomp import run_dataset

    done = run_dataset("prog.decomp", "data.jsonl", model="fake:answers.json")
    done.run_dir, done.rows, done.failed, done.score   # the run directory and its totals
    done.records()                                     # every row's results line, in input order

`run_dataset` loads and checks the program (or takes a module a session loaded), reads the
rows, opens the run directory (a new one, or with `resume=True` the unfinished one, checked to
be of the same program, input and model; `force=True` starts over), runs every row not yet done
while writing each row's results line and trace as it ends, writes summary.json, optionally
copies every row's line to `output` in input order, and returns the summary: the very line
`decomp run` prints. The command line is a thin layer over it (runtime/cli.py).

What shapes the run (model, endpoint limits, step cache, budgets) is a `RunOptions`, the
`decomp run` options with the same defaults: the step cache is on, in $DECOMP_CACHE_DIR or
~/.cache/decomp. A `Session` of one's own can be passed instead.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from decomp.dsl.redact import redact_url
from decomp.handlers.sandbox.trust import Trust
from decomp.runtime.engine.budgets import DEFAULT_ANSWER_MB, DEFAULT_ROW_HANDLER_CALLS, Budget
from decomp.runtime.engine.cache import StepCache, default_cache_dir
from decomp.runtime.engine.loader import LoadedModule
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.session import Session
from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.models.base import DEFAULT_ATTEMPT_DEADLINE, DEFAULT_CALL_DEADLINE, Model, ModelSettings
from decomp.runtime.models.prices import load_prices
from decomp.runtime.exports import otel
from decomp.runtime.runs.batch import program_scorer, run_rows
from decomp.runtime.exports.otel import RunExport
from decomp.runtime.runs.programs import PROGRAMS_DIR, find_program, load_program, use_main
from decomp.runtime.runs.remote import WorkerSpec, Workers
from decomp.runtime.storage.datasets import window, Row, read_rows
from decomp.runtime.runs.progress import progress as progress_bar
from decomp.runtime.runs.resumed import recorded_run, with_recorded_trust
from decomp.runtime.runs.shards import Shard
from decomp.runtime.storage.jsonl import json_line
from decomp.runtime.scoring.metric_calls import DEFAULT_METRIC_MEMORY_MB, DEFAULT_METRIC_TIMEOUT, MetricLimits
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.manifest import (default_run_dir, latest_run, make_manifest, program_files, read_manifest,
                                          runs_root)
from decomp.runtime.storage.rundir import RunDir
__all__ = ["PROGRAMS_DIR", "RunInterrupted", "RunOptions", "RunSummary", "arun_dataset", "find_program", "run_dataset",
           "use_main", "user_folders", "with_fields"]

@dataclass(frozen=True)
class RunOptions:
    """What shapes a run beyond the program and its data: the `decomp run` options, with the
    same names and defaults.

    model:         the model of every handler that names none (`openai:NAME`, `local:...`,
                   `fake:FILE.json`); None: the program's `model default`, else the embedded one
    base_url:      an OpenAI-compatible endpoint (else $OPENAI_BASE_URL)
    transport:     how `openai:` models send requests: "auto" (aiohttp), "aiohttp" or "openai"
                   (the official client); a model declaration's own `transport=` wins
    api:           which API `openai:` models use: "chat", "completions" or "auto" (chat at
                   api.openai.com, completions at a base URL, switching once to the other when
                   the endpoint refuses in words that point to it); a model declaration's own
                   `api=` wins. Recorded in run.json only when not "auto"
    apis:          what "auto" found, by `NAME@ENDPOINT` (`openai:gpt-4o-mini@http://host/v1`:
                   "chat"): such a model starts on that API, with no request to find out. A run
                   records what its models find in run.json as they find it (`apis`), and a
                   resume takes it unless `api` is given again
    attempt_deadline, call_deadline: seconds one request of an `openai:` model may take in all
                   (300), and one call, its retries and backoff included (600); None: no
                   limit; a model declaration's own `attempt_deadline=` / `call_deadline=` wins
    concurrency:   model calls in flight at once, per endpoint; rpm, tpm: rate limits per endpoint
    cache_mode:    the step cache: "read-write", "refresh", "off" or "replay"
    cache_dir:     where the step cache lives (None: $DECOMP_CACHE_DIR, else ~/.cache/decomp)
    max_calls, max_tokens:         budgets for the whole run
    max_row_calls, max_row_tokens: budgets per row
    max_depth:     the deepest nesting of programs; max_steps: most steps any decomposer takes
    handler_timeout: seconds any one handler call may take unless its `timeout=` says (None: 10 s)
    handler_memory_mb: MiB any one python handler call may add to its worker process unless its
                   `memory=` says (None: 1,024 MiB)
    max_row_handler_calls, max_handler_calls: budgets of handler calls of every kind, symbolic
                   ones too, per row (10,000) and for the run
    max_memory_mb: the process's resident memory (MiB) past which a row's next call ends the row
    max_answer_mb: the most text (MiB of characters) one handler answer may hold (16; None: no limit)
    max_cost:      money the run may spend on model requests (needs every model's price)
    prices:        a prices file (JSON or TOML: model name -> price_in, price_out per million
                   tokens; see `decomp.runtime.models.prices`)
    default_temperature: the temperature of model calls whose handler writes no `temperature=`
                   (`--temperature`; None: the kind's default, 0); a handler's own option wins
    max_output_tokens: the most tokens one model call may generate, for handlers that write no
                   `max_tokens=` (`--max-output-tokens`; None: the kind's default). Not the run's
                   token budget, which is `max_tokens`. Both recorded in run.json only when set
    temperature:   every model request's temperature, over the handlers' own and
                   `default_temperature` (None: theirs; `decomp optimize`'s teacher rounds)
    rollout:       which rollout the run's samples are: at temperature > 0, rollout k > 0 draws
                   samples of its own instead of the cache's (`decomp optimize`'s retry rounds).
                   Both are recorded in run.json only when set.
    metric_timeout, metric_memory_mb: the seconds (10) and MiB (1,024) one row's scoring may take
                   with a metric that is not decomp's own (a plugin's: it runs contained, in a
                   worker process; see `decomp.runtime.scoring.metric_calls`); recorded only when set.
    metric:        what rows with gold are scored with, over the program's `metric` statement: a
                   name (`em`, `exact`, a plugin's, `module:function` of the working folder) or a
                   function, called as docs/runs.md "The metric function" says (None: the
                   program's). run.json records it as its `metric`, not among the options
    trust:         modules whose functions the program's python handlers (and a `module:function`
                   metric or fake responder) may import besides its own (`--trust MODULE`)
    allow_roots:   folders its `import` lines and `file=` options may read besides its own
                   (`--allow-root DIR`; recorded resolved). Both are the session's alone
                   (`Session.trust`), recorded in run.json only when given
    """

    model: str | None = None
    base_url: str | None = None
    transport: str = "auto"
    api: str = "auto"
    apis: Mapping[str, str] = dataclasses.field(default_factory=dict)
    attempt_deadline: float | None = DEFAULT_ATTEMPT_DEADLINE
    call_deadline: float | None = DEFAULT_CALL_DEADLINE
    concurrency: int = 8
    rpm: float | None = None
    tpm: float | None = None
    cache_mode: str = "read-write"
    cache_dir: Path | None = None
    max_calls: int | None = None
    max_tokens: int | None = None
    max_row_calls: int | None = None
    max_row_tokens: int | None = None
    max_depth: int = 64
    max_steps: int | None = None
    handler_timeout: float | None = None
    handler_memory_mb: float | None = None
    max_row_handler_calls: int | None = DEFAULT_ROW_HANDLER_CALLS
    max_handler_calls: int | None = None
    max_memory_mb: float | None = None
    max_answer_mb: float | None = DEFAULT_ANSWER_MB
    max_cost: float | None = None
    prices: Path | None = None
    default_temperature: float | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    rollout: int = 0
    metric_timeout: float = DEFAULT_METRIC_TIMEOUT
    metric_memory_mb: float = DEFAULT_METRIC_MEMORY_MB
    metric: str | Callable[..., Any] | None = None
    trust: tuple[str, ...] = ()
    allow_roots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("cache_dir", "prices"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))
        object.__setattr__(self, "apis", dict(self.apis))  # the caller's mapping stays the caller's
        for name in ("trust", "allow_roots"):  # names, from a list, a tuple or run.json
            value = getattr(self, name)
            if isinstance(value, (str, Path)):
                raise TypeError(f"{name} is a list of {'modules' if name == 'trust' else 'folders'}, not {value!r}")
            object.__setattr__(self, name, tuple(str(item) for item in value))
        self.metric_limits()  # a limit that is no number > 0: a ValueError now
        if not (self.metric is None or callable(self.metric) or (isinstance(self.metric, str) and self.metric)):
            raise TypeError(f"metric is a metric's name or a function, not {self.metric!r}")

    def session(self, model: Model | None = None, on_note: Callable[[str], None] | None = None) -> Session:
        """A `Session` with these options. A `Model` instance given here replaces `model` and
        runs uncached (as `decomp run --dry-run` does with its stand-in): the cache keys answers
        by model name, which does not tell two instances apart. `on_note`: told, as one line,
        what the session finds out as it runs (an "auto" model's API; `Session.on_note`)."""
        cache = None
        if self.cache_mode != "off" and model is None:
            cache = StepCache((self.cache_dir or default_cache_dir()) / "steps.sqlite", self.cache_mode)
        settings = ModelSettings(base_url=self.base_url, transport=self.transport, api=self.api,
                                 attempt_deadline=self.attempt_deadline, call_deadline=self.call_deadline)
        return Session(model=model or self.model, settings=settings,
                       scheduler=Scheduler(self.concurrency, rpm=self.rpm, tpm=self.tpm), cache=cache,
                       budget=self.budget(), max_depth=self.max_depth, max_steps=self.max_steps,
                       handler_timeout=self.handler_timeout, handler_memory_mb=self.handler_memory_mb,
                       prices=load_prices(self.prices) if self.prices is not None else None,
                       temperature=self.temperature, rollout=self.rollout, on_note=on_note, apis=self.apis,
                       default_temperature=self.default_temperature, max_output_tokens=self.max_output_tokens,
                       trust=self.policy())

    def policy(self) -> Trust:
        """What a session of these options trusts (`trust`, `allow_roots`)."""
        return Trust.of(self.trust, self.allow_roots)

    def metric_limits(self) -> MetricLimits:
        """The time and memory one row's contained metric call may take."""
        return MetricLimits(self.metric_timeout, self.metric_memory_mb)

    def budget(self) -> Budget:
        """The budgets these options set, per row and for the run."""
        return Budget(self.max_row_calls, self.max_row_tokens, self.max_calls, self.max_tokens,
                      row_handler_calls=self.max_row_handler_calls, run_handler_calls=self.max_handler_calls,
                      memory_mb=self.max_memory_mb, answer_mb=self.max_answer_mb, run_cost=self.max_cost)

    @classmethod
    def of(cls, session: Session) -> "RunOptions":
        """The options `session` runs with (what a run directory records for it; its model is
        recorded as the spec the program's handlers resolve to)."""
        cache, budget, scheduler = session.cache, session.budget, session.scheduler
        settings = session.settings
        return cls(model=None, base_url=settings.base_url, transport=settings.transport, api=settings.api,
                   apis=dict(session.apis), attempt_deadline=settings.attempt_deadline,
                   call_deadline=settings.call_deadline, concurrency=scheduler.concurrency,
                   rpm=scheduler.rpm, tpm=scheduler.tpm, cache_mode=cache.mode if cache is not None else "off",
                   cache_dir=cache.path.parent if cache is not None else None, max_calls=budget.run_calls,
                   max_tokens=budget.run_tokens, max_row_calls=budget.row_calls, max_row_tokens=budget.row_tokens,
                   max_depth=session.max_depth, max_steps=session.max_steps,
                   handler_timeout=session.limits.timeout, handler_memory_mb=session.limits.memory_mb,
                   max_row_handler_calls=budget.row_handler_calls,
                   max_handler_calls=budget.run_handler_calls, max_memory_mb=budget.memory_mb,
                   max_answer_mb=budget.answer_mb, max_cost=budget.run_cost, temperature=session.temperature,
                   rollout=session.rollout, default_temperature=session.default_temperature,
                   max_output_tokens=session.max_output_tokens, trust=session.trust.modules,
                   allow_roots=tuple(str(root) for root in session.trust.roots))

    def to_dict(self) -> dict[str, Any]:
        """The options as run.json records them: paths as text, and `base_url` without the
        credentials a URL can carry (`redact_url`: user-info and query values as ***); the
        session still calls the URL as given."""
        recorded = {f.name: (str(value) if isinstance(value, Path) else dict(value) if f.name == "apis" else value)
                    for f in dataclasses.fields(self) for value in [getattr(self, f.name)]}
        recorded["base_url"] = redact_url(self.base_url)
        del recorded["metric"]  # run.json's own `metric`, the name the rows were scored with
        del recorded["trust"], recorded["allow_roots"]
        recorded.update(self.policy().record())  # each only when given, the folders resolved
        for name, unset in _UNRECORDED.items():  # recorded only when set: older run.json files stay the same
            if recorded[name] == unset:
                del recorded[name]
        return recorded


#: Options run.json records only when they are not at these values.
_UNRECORDED = {"temperature": None, "rollout": 0, "metric_timeout": DEFAULT_METRIC_TIMEOUT,
               "metric_memory_mb": DEFAULT_METRIC_MEMORY_MB, "api": "auto", "apis": {},
               "default_temperature": None, "max_output_tokens": None}


@dataclass(frozen=True)
class RunSummary:
    """What a dataset run left: its run directory, its totals (summary.json, over every
    session of the run), the `output` file written, and what opening the directory found."""

    run_dir: Path
    summary: dict[str, Any]
    output: Path | None = None
    notes: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return self.summary["rows"]

    @property
    def failed(self) -> int:
        return self.summary["failed"]

    @property
    def score(self) -> float | None:
        """Mean score over the rows with gold answers (None without gold), by the program's
        `metric` (exact match when it declares none; `summary["metric"]` names it)."""
        return self.summary["score"]

    def to_dict(self) -> dict[str, Any]:
        """The line `decomp run --input` prints: summary.json with `run_dir` (and `output`)."""
        extra = {"output": str(self.output)} if self.output is not None else {}
        return {**self.summary, "run_dir": str(self.run_dir), **extra}

    def records(self) -> list[dict]:
        """Every row's results line, in input order."""
        return RunDir.open(self.run_dir).records()


def run_dataset(program: str | Path | LoadedModule, data: str | Path, *, model: str | Model | None = None,
                options: RunOptions | None = None, session: Session | None = None, main: str | None = None,
                run_dir: str | Path | None = None, resume: bool = False, force: bool = False,
                output: str | Path | None = None, progress: bool | None = False,
                on_note: Callable[[str], None] | None = None, fields: Mapping[str, Any] | None = None,
                shard: Shard | str | None = None, offset: int = 0, limit: int | None = None,
                cluster: Workers | None = None, otlp: str | None = None,
                metric: str | Callable[..., Any] | None = None) -> RunSummary:
    """Run `program` on every row of `data` into a run directory: `decomp run PROGRAM --input DATA`.

    program:  a .decomp file, the name of a bundled program (`decomp/letter_cat`), or a module
              that `session` loaded
    data:     JSONL rows {id, question, ..., answer?} or DecomP's DROP-style JSON
    model:    the model spec (or a `Model`, which runs uncached) of every handler naming none
    options:  the rest of the run's options (`RunOptions()`: the command line's defaults,
              the step cache on); or give a `session` of one's own instead of model and options
    main:     run this program or handler of the module instead of its `main`
    run_dir:  the run directory; None: runs/PROGRAM-INPUT-TIME, under $DECOMP_RUNS_DIR if set
    resume:   finish the run in `run_dir` (None: the latest run of this program on this input),
              running only the rows it lacks; refused when the program, the input, `main` or
              the model differ from that run's. What is left at its default is taken from the
              run's run.json (`decomp.runtime.runs.resumed`): with no `options` (nor `session`)
              its options, `model` replacing the recorded one when given; `main` (same program
              file), `fields`, the row window (`offset`/`limit` both at their defaults), and its
              trusted modules and allowed folders when `options` gives none (`trust`, `allow_roots`)
    force:    start over in `run_dir`, deleting the run there (never a folder holding no run)
    output:   also write every row's results line to this file, in input order
    progress: draw a progress bar on stderr (None: when stderr is a terminal)
    on_note:  called with each thing opening the run directory found and repaired (a
              half-written last line, rerun), before any row runs; they are in `notes` too
    fields:   input fields given to every row (`decomp run --field NAME=VALUE`); a field
              here overrides the row's own field of that name. Recorded in run.json's options
              (`fields`, when given); `resume` is refused when they differ from the run's.
              A field naming an existing folder is the caller's: handlers may read it during
              the run (`retrieve(index="#index")`), as if given with --allow-root; a folder
              named by a row of `data` has no such trust (see `user_folders`)
    shard:    run only shard `I/N` of the rows (a `Shard` or "I/N": the rows whose index is I
              modulo N), recorded in run.json's options; `resume` is refused for another
              shard. `merge_runs` (`decomp merge`) joins the shards' run directories
    offset, limit: run only the rows at input positions `offset` to `offset + limit - 1`
              (`decomp run --offset K --limit N`; limit None: to the end), recorded in
              run.json's options; `resume` is refused for another window
    cluster:  run the rows on Ray actors (`decomp run --ray [ADDRESS]`; `decomp.runtime.cluster.rows.Cluster`, or any `remote.Workers`):
              this process keeps the run directory, the limits and budgets hold for the whole
              run. Needs `program` as a path and no `session` of one's own
    otlp:     also send each row's tree as an OpenTelemetry trace to this OTLP endpoint ("": the
              one $OTEL_EXPORTER_OTLP_ENDPOINT names, as when it is set and `otlp` is None); see
              `decomp.runtime.exports.otel`. What could not be sent is warned once; the run goes on
    metric:   what rows with gold are scored with, over `options.metric` and the program's
              `metric` statement: a name (`exact`, `module:function` of the working folder) or
              a function of one's own, called as every command calls a metric (docs/runs.md,
              "The metric function": `function(row, answer, trace)`, or `function(prediction,
              gold)` per gold alternative). run.json records its name (`module:function` for a
              function given itself). A metric that cannot be used is a `ValueError` before
              the run directory is made

    Returns the `RunSummary` (its `to_dict()` is the line `decomp run` prints). A row that fails
    is recorded in its line and the run goes on. Raises `DecompError` for a program that does
    not load or check, or a `main` it lacks; `RunDirError` (a `DecompError`) for a run directory
    that cannot be used as asked (it holds a run and neither `resume` nor `force` is given, it
    holds something else, or it differs from what `resume` would continue); `OSError` for a
    file that cannot be read or written; `ValueError` for a data file in neither format.
    An interrupt (Ctrl-C, a notebook's stop button) once the run directory is open stops the
    rows in flight and raises `RunInterrupted` (a `KeyboardInterrupt`): the rows kept, the rows
    left, and the run directory, which `resume=True` finishes.
    Inside a running event loop (a Jupyter cell) it runs on a worker thread with a loop of its
    own (`decomp.runtime.engine.syncrun`); `await arun_dataset(...)` runs in that loop instead.
    """
    with interrupts_said():
        return run_sync(lambda: arun_dataset(program, data, model=model, options=options, session=session,
                                             main=main, run_dir=run_dir, resume=resume, force=force, output=output,
                                             progress=progress, on_note=on_note, fields=fields, shard=shard,
                                             offset=offset, limit=limit, cluster=cluster, otlp=otlp, metric=metric))


class RunInterrupted(KeyboardInterrupt):
    """A dataset run stopped by an interrupt: `kept` of its `rows` are in `run_dir` (each whole,
    its results line and trace), `left` are not; a resume (`decomp run ... --run-dir RUN_DIR
    --resume`, `run_dataset(..., run_dir=RUN_DIR, resume=True)`) runs only those."""

    def __init__(self, run_dir: Path, kept: int, rows: int):
        super().__init__(run_dir, kept, rows)
        self.run_dir, self.kept, self.rows = Path(run_dir), kept, rows

    @property
    def left(self) -> int:
        return max(self.rows - self.kept, 0)

    def __str__(self) -> str:
        return (f"{self.kept} of {self.rows} rows kept in {self.run_dir}, {self.left} left; "
                f"run_dataset(..., run_dir={str(self.run_dir)!r}, resume=True) finishes them")


#: The runs `_arun_dataset` opened, with their row counts, for the `interrupts_said` around it:
#: a list the caller's context shares with the coroutine's copy of it (None: nobody asks).
_OPENED: contextvars.ContextVar[list | None] = contextvars.ContextVar("decomp_runs_opened", default=None)


@contextlib.contextmanager
def interrupts_said() -> Iterator[None]:
    """Within the block (`run_dataset`, `decomp.run` on a dataset), an interrupt of a run whose directory was opened is a `RunInterrupted`."""
    opened: list[tuple[RunDir, int]] = []
    token = _OPENED.set(opened)
    try:
        yield
    except KeyboardInterrupt as err:
        if not opened or isinstance(err, RunInterrupted):
            raise
        run, rows = opened[-1]
        raise RunInterrupted(run.path, len(run.indices), rows) from err
    finally:
        _OPENED.reset(token)


async def arun_dataset(program: str | Path | LoadedModule, data: str | Path, *, model: str | Model | None = None,
                       options: RunOptions | None = None, session: Session | None = None, main: str | None = None,
                       run_dir: str | Path | None = None, resume: bool = False, force: bool = False,
                       output: str | Path | None = None, progress: bool | None = False,
                       on_note: Callable[[str], None] | None = None,
                       fields: Mapping[str, Any] | None = None, shard: Shard | str | None = None,
                       offset: int = 0, limit: int | None = None, cluster: Workers | None = None,
                       otlp: str | None = None, metric: str | Callable[..., Any] | None = None) -> RunSummary:
    """`run_dataset` in a running event loop."""
    data = Path(data)
    shard = Shard.parse(shard) if isinstance(shard, str) else shard
    known = None
    if resume and not force and session is None and not isinstance(program, LoadedModule):
        known = recorded_run(find_program(program), data, Path(run_dir) if run_dir is not None else None, shard)
    if known is not None:  # what is left at its default is the run's own (`decomp.runtime.runs.resumed`)
        if options is None:
            options = RunOptions(**known.session_options(f.name for f in dataclasses.fields(RunOptions)
                                                         if f.name not in ("trust", "allow_roots")))
        options = with_recorded_trust(options, known, on_note)
        main = main if main is not None else known.main
        fields = fields if fields is not None else known.fields
        offset, limit = (known.offset, known.limit) if (offset, limit) == (0, None) else (offset, limit)
    return await _arun_dataset(program, data, model, options, session, main, run_dir, resume, force, output,
                               progress, on_note, fields, shard, offset, limit, cluster, otlp, metric)


async def _arun_dataset(program, data: Path, model, options, session, main, run_dir, resume, force, output,
                        progress, on_note, fields, shard, offset, limit, cluster=None, otlp=None,
                        metric=None) -> RunSummary:
    if cluster is not None and (session is not None or isinstance(program, LoadedModule) or isinstance(model, Model)):
        raise TypeError("a run on Ray loads the program in every worker: give the program as a path, and "
                        "model and options, not a session, a loaded module or a Model instance")
    session, options = _session(program, model, options, session)
    loaded, path = load_program(session, program, main)
    fields = dict(fields or {})
    recorded = {**options.to_dict(), "model": session.default_model_spec(loaded)}
    if fields:
        recorded["fields"] = fields
    if shard is not None:
        recorded["shard"] = str(shard)
    if offset < 0 or (limit is not None and limit < 1):
        raise ValueError(f"offset {offset}, limit {limit}: the offset counts rows from 0 and the limit is at least 1")
    recorded.update({"offset": offset} if offset else {}, **({"limit": limit} if limit is not None else {}))
    if metric is not None:  # over `options.metric`, and the program's `metric` statement
        options = dataclasses.replace(options, metric=metric)
    scorer = program_scorer(loaded, options.metric_limits(), options.metric, session.trust)  # refused before a run directory
    manifest = make_manifest(path, loaded.main, loaded.files, data, recorded, metric=scorer.metric)

    def rows() -> Iterator[Row]:  # read as they run, not all held: memory does not grow with the input
        return (_with_field_values(row, fields) for row in window(read_rows(data), offset, limit)
                if shard is None or shard.takes(row.index))

    if cluster is not None:
        cluster.connect()  # an address nobody answers at is said before a run directory is made
    refused = None
    if otel.wanted(otlp):
        otel.check(otlp)  # a missing SDK or an unknown protocol is said before a run directory is made
        refused = otel.receiver_problem(otlp)  # a receiver refusing: said once, nothing sent, no retries
    run = _open_run(path, data, manifest, loaded.files, run_dir, resume, force)
    export = RunExport.open(otlp, run.path, refused) if otel.wanted(otlp) else None
    try:
        for note in run.notes:
            if on_note is not None:
                on_note(note)
        todo = sum(row.index not in run.indices for row in rows())
        if _OPENED.get() is not None:  # what an interrupt will say it kept
            _OPENED.get().append((run, len(run.indices) + todo))
        with progress_bar(todo, session.usage, progress) as tick, session.trusting(user_folders(fields)), \
                _apis_recorded(session, run, on_note):
            def sink(record, trace):
                run.add(record, trace)
                if export is not None:
                    export.row(record)
                tick(record)
            if cluster is None:
                ran = await run_rows(session, loaded, rows(), sink, skip=run.indices, scorer=scorer)
            else:
                trust = session.trust  # the options' and the folders the fields name
                spec = WorkerSpec(str(path.resolve()), main, _absolute(options), trust.modules,
                                  tuple(str(r) for r in trust.roots))
                ran = await cluster.run_rows(spec, rows(), sink, skip=run.indices)
        summary = run.finish(ran.rows, ran.seconds)
    except BaseException:
        run.close()
        raise
    finally:
        if export is not None:
            export.close()
    output = Path(output) if output is not None else None
    if output is not None:
        _write_lines(output, run.records())
    return RunSummary(run.path, summary, output, tuple(run.notes))


@contextlib.contextmanager
def _apis_recorded(session: Session, run: RunDir, on_note: Callable[[str], None] | None) -> Iterator[None]:
    """Within the block, what the session finds out is said through `on_note` (else through its
    own `on_note`), and the APIs its "auto" models find are written to run.json's options at once
    (`apis`), so that a resume, even of a killed run, starts them on those APIs."""
    own = session.on_note

    def noted(line: str) -> None:
        recorded = run.manifest["options"].get("apis")
        recorded = recorded if isinstance(recorded, dict) else {}
        if any(recorded.get(where) != api for where, api in session.apis.items()):
            run.record_option("apis", {**recorded, **session.apis})
        if (on_note or own) is not None:
            (on_note or own)(line)

    session.on_note = noted
    try:
        yield
    finally:
        session.on_note = own


def _absolute(options: RunOptions) -> RunOptions:
    """`options` with its paths made absolute here, as a worker in another folder needs them."""
    return dataclasses.replace(options, **{name: getattr(options, name).resolve() for name in ("cache_dir", "prices")
                                           if getattr(options, name) is not None})


def user_folders(fields: Mapping[str, Any] | None) -> list[Path]:
    """The existing folders that `fields` (the user's --field values, not a data row's) name:
    what a run allows its handlers to read on purpose, like --allow-root."""
    found = []
    for value in (fields or {}).values():
        if isinstance(value, str) and value.strip():
            try:
                folder = Path(value).expanduser()
                if folder.is_dir():
                    found.append(folder)
            except (OSError, ValueError, RuntimeError):
                continue
    return found


def with_fields(rows: Iterable[Row], fields: Mapping[str, Any]) -> list[Row]:
    """`rows` with `fields` set in each (overriding a row's own field of the same name); rows
    that could not be read stay as they are."""
    return [_with_field_values(row, fields) for row in rows]


def _with_field_values(row: Row, fields: Mapping[str, Any]) -> Row:
    if not fields or row.fields is None:
        return row
    return dataclasses.replace(row, fields={**row.fields, **fields})


def _check_fields(path: Path, manifest: dict) -> None:
    """Refuse to resume the run in `path` with other `--field`s than it was run with (two runs
    mixed), before anything there is touched."""
    old, new = read_manifest(path)["options"].get("fields") or {}, manifest["options"].get("fields") or {}
    if _as_json(old) != _as_json(new):  # by JSON text: 4 and "4" (or 1 and true) are different fields
        given = lambda values: " ".join(f"--field {k}={_as_typed(v)}" for k, v in values.items()) or "no --field"  # noqa: E731
        raise RunDirError(f"{path} was run with {given(old)}; resuming with {given(new)} would mix two "
                          f"runs: pass the same fields, or --force to start over")


def _as_json(fields: Mapping[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)


def _as_typed(value: Any) -> str:
    """A field's value as one would type it after --field NAME= to get it back (text that reads
    as JSON, such as "4", quoted)."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False)


def _session(program, model, options: RunOptions | None, session: Session | None) -> tuple[Session, RunOptions]:
    """The session to run in and the options to record for it."""
    if session is not None:
        if model is not None or options is not None:
            raise TypeError("give a session, or model and options to build one, not both")
        return session, RunOptions.of(session)
    if isinstance(program, LoadedModule):
        raise TypeError("a loaded module runs in the session that loaded it: pass session=")
    options = options or RunOptions()
    if isinstance(model, Model):
        return options.session(model), options
    if model is not None:
        options = dataclasses.replace(options, model=model)
    return options.session(), options


def _open_run(program: Path, data: Path, manifest: dict, files, run_dir: str | Path | None, resume: bool,
              force: bool) -> RunDir:
    run_dir = Path(run_dir) if run_dir is not None else None
    if resume and not force:
        path = run_dir or latest_run(runs_root(), manifest)
        _check_fields(path, manifest)
        return RunDir.resume(path, manifest)
    target = run_dir or default_run_dir(program, data, manifest["options"].get("shard"))
    return RunDir.create(target, manifest, program_files(program, files), force=force)


def _write_lines(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json_line(record))
