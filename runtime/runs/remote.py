"""Rows run elsewhere than in this process: what the run loop hands a pool of workers
(`WorkerSpec`) and what it asks of one (`Workers`). The run directory stays with the driver;
a pool runs the rows and sends each row's record and trace back to the driver's sink as the
row ends. Ray's pool is `decomp.runtime.cluster.rows.Cluster` (`decomp run --ray`); the run
loop knows it only as `Workers`, so run storage and the loop never import Ray's code."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from decomp.runtime.engine.tracing import TraceNode
    from decomp.runtime.runs.batch import BatchSummary
    from decomp.runtime.storage.datasets import Row


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to run rows as the driver would: the program's path, the handler or
    program to run (`main`), the run's options (`api.RunOptions`), and the trust the driver has
    (modules trusted, folders allowed)."""

    program: str
    main: str | None
    options: Any
    trust: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()


class Workers(Protocol):
    """A pool of workers a run's rows may go to instead of this process."""

    def connect(self) -> None:
        """Reach the pool now, so that one nobody answers at is said before a run directory
        is made (an error naming where it was looked for)."""

    async def run_rows(self, spec: WorkerSpec, rows: Iterable["Row"], sink: Callable[[dict, "TraceNode"], None],
                       skip: Any = ()) -> "BatchSummary":
        """Run `rows` (but those whose index is in `skip`) as `spec` says; every row's (record,
        trace) goes to `sink` as it comes back; the totals of the rows run."""
