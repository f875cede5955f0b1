"""A program inside a Ray Data pipeline: `Predictor`, a callable class for `Dataset.map_batches`.

    import ray
    from decomp import RunOptions
    from decomp.runtime.cluster.data import Predictor, shared_limits

    options = RunOptions(model="openai:NAME", base_url="http://vllm-host:8000/v1", concurrency=16)
    limits = shared_limits(options.concurrency)   # optional: one limit for every actor of the pool
    answered = ray.data.read_json("questions.jsonl").map_batches(
        Predictor, fn_constructor_kwargs={"program": "my.decomp", "options": options, "limits": limits},
        batch_size=16, concurrency=4)

Each actor of the pool loads the program once and runs every batch's rows at once in a session
of its own (the scheduler bounds the calls in flight: `options.concurrency` per actor, or for the
whole pool when `limits` is given). An actor that dies holding slots of `limits` keeps them
(nothing here learns of its death, as `decomp run --ray`'s driver does): with actors that may
die, give each its own limit instead. A row is a batch row read as a `decomp run --input` line
reads: `id` is the row's id, `answer` its gold answer, every other column an input field.

A batch comes back with the columns results.jsonl has, one type each so that batches join:
`id`, `answer` (the program's answer as JSON text: answers may be strings, numbers or lists),
`outcome` (ok, failed or error), `error` (null when none), `gold` and `score` (null without a
gold answer; the program's metric), `calls`, `cache_hits`, `prompt_tokens`, `completion_tokens`
and `seconds`, then the batch's other columns unchanged. An error in a row (a bad id, a failing
step, a model that does not answer) is that row's `error`; the batch goes on.

Ray is an optional extra (`pip install 'decomp-lang[ray]'`); this module imports none of it.
"""
from __future__ import annotations

import asyncio
import math
import threading
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

from decomp.dsl.values import storable_json
from decomp.runtime.runs.batch import _run_row, program_scorer
from decomp.runtime.storage.datasets import Row
from decomp.runtime.runs.programs import find_program
from decomp.runtime.cluster.limits import shared_limits
from decomp.runtime.cluster.rows import worker_session
from decomp.runtime.runs.remote import WorkerSpec

__all__ = ["COLUMNS", "Predictor", "shared_limits"]

#: The columns `Predictor` adds, in order (the batch's other columns follow).
COLUMNS = ("id", "answer", "outcome", "error", "gold", "score", "calls", "cache_hits", "prompt_tokens",
           "completion_tokens", "seconds")
_USAGE = ("calls", "cache_hits", "prompt_tokens", "completion_tokens")


class Predictor:
    """Runs `program` on the rows of each batch it is called with.

    program: a .decomp file or a bundled program's name; main: the program or handler to run
    instead of its `main`; options: a `RunOptions` (model, endpoint, concurrency, cache,
    budgets per row); limits: a `shared_limits(...)` actor whose concurrency and rate limits
    every actor given it shares; trust, roots: modules trusted and folders allowed (as
    `decomp run --trust` and `--allow-root`)."""

    def __init__(self, program: str | Path, *, main: str | None = None, options: Any = None,
                 limits: Any = None, trust: Iterable[str] = (), roots: Iterable[str | Path] = ()):
        from decomp.runtime.runs.api import RunOptions

        spec = WorkerSpec(str(find_program(program)), main, options if options is not None else RunOptions(),
                          tuple(trust), tuple(str(root) for root in roots))
        # the session's clients belong to one event loop: this predictor's own, on a thread of its
        # own, so that a call works where a loop runs already (a notebook) as well as in Ray
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=_serve, args=(self._loop,), name="decomp-predictor", daemon=True).start()
        self.session, self.module = worker_session(spec, limits, f"predictor-{uuid.uuid4().hex[:12]}")
        self._scorer = program_scorer(self.module, spec.options.metric_limits(), spec.options.metric,
                                      self.session.trust)
        self._seen = 0

    def __call__(self, batch: Any) -> dict[str, list]:
        """The batch (a dict of columns, or a pandas DataFrame) with the answer columns added."""
        records = _records(batch)
        rows = [_row(self._seen + position, record) for position, record in enumerate(records)]
        self._seen += len(rows)
        done = asyncio.run_coroutine_threadsafe(self._run(rows), self._loop).result()
        columns: dict[str, list] = {name: [] for name in COLUMNS}
        for record in done:
            for name, value in _columns(record).items():
                columns[name].append(value)
        for name in dict.fromkeys(key for record in records for key in record):
            if name not in ("id", "answer") and name not in columns:
                columns[name] = [record.get(name) for record in records]
        return columns

    async def _run(self, rows: list[Row]) -> list[dict]:
        ran = await asyncio.gather(*(_run_row(self.session, self.module, row, self._scorer) for row in rows))
        if self.session.cache is not None:
            self.session.cache.flush()
        return [record for record, _ in ran]

    def __del__(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.session.aclose(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        except Exception:  # pragma: no cover - the process is going away
            pass


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run `loop` until it is stopped (the predictor is dropped), then close it."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _records(batch: Any) -> list[dict]:
    """The batch's rows as plain dicts (numpy and pandas values as Python's own)."""
    if hasattr(batch, "to_dict") and hasattr(batch, "columns"):  # a pandas DataFrame: its missing values as None
        batch = {name: column.astype(object).where(column.notna(), None).tolist()
                 for name in batch.columns for column in [batch[name]]}
    columns = {name: _plain(values) for name, values in dict(batch).items()}
    size = max((len(values) for values in columns.values()), default=0)
    return [{name: values[i] for name, values in columns.items()} for i in range(size)]


def _plain(value: Any) -> Any:
    """`value` with numpy arrays and scalars turned into lists and Python numbers and strings,
    and a missing value (NaN, as numpy gives a null in a column of numbers) into None."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _row(index: int, record: dict) -> Row:
    """The row a results line would come from: `id` and `answer` (gold) apart, the rest fields."""
    row_id = record.get("id")
    if isinstance(row_id, float) and row_id.is_integer():  # an id column of numbers with a null in it
        row_id = int(row_id)
    if isinstance(row_id, bool) or (row_id is not None and not isinstance(row_id, (str, int))):
        return Row(index, None, None, f"row {index}: the 'id' must be a string or an integer")
    fields = {key: value for key, value in record.items() if key not in ("id", "answer")}
    return Row(index, None if row_id is None else str(row_id), fields, None, record.get("answer"))


def _columns(record: dict) -> dict[str, Any]:
    """A results record as the columns `Predictor` adds."""
    usage = record.get("usage") or {}
    answer = record.get("answer")
    return {"id": record.get("id"), "answer": None if answer is None else storable_json(answer),
            "outcome": record.get("outcome", "error"), "error": record.get("error"),
            "gold": None if record.get("gold") is None else storable_json(record["gold"]),
            "score": record.get("score"), **{name: usage.get(name, 0) for name in _USAGE},
            "seconds": record.get("seconds", 0.0)}
