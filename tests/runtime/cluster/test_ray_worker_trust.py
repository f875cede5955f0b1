"""What a Ray worker's session trusts: the driver's session's trust, carried in its
`WorkerSpec` (its options' own, and the folders the run's fields named), never the worker
process's leftovers."""
from __future__ import annotations

import pytest

from decomp import RunOptions
from decomp.dsl.errors import DecompError
from decomp.handlers.sandbox.trust import Trust
from decomp.runtime.cluster.rows import worker_session
from decomp.runtime.runs.remote import WorkerSpec

PROGRAM = 'handler cap = python(function="string:capwords")\nmain cap\n'


def test_a_worker_trusts_what_the_driver_trusted_and_nothing_more(tmp_path):
    program = tmp_path / "cap.decomp"
    program.write_text(PROGRAM)
    lent = tmp_path / "index"
    options = RunOptions(cache_mode="off")
    session, module = worker_session(WorkerSpec(str(program), None, options, ("string",), (str(lent),)), None)
    assert session.trust == Trust.of(["string"], [lent]) and "cap" in module.handlers
    with pytest.raises(DecompError, match="'string:capwords' is not allowed"):
        worker_session(WorkerSpec(str(program), None, options), None)
    session, _ = worker_session(WorkerSpec(str(program), None, RunOptions(cache_mode="off", trust=["string"])), None)
    assert session.trust.modules == ("string",)  # the options' own trust, with none lent
