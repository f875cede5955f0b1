"""The engine: runs a loaded program on one row.

    budgets.py      usage and limits per row and per run
    cache.py        the SQLite step cache of handler calls and model samples
    call.py         `EngineCall`, the engine's side of the handler interface
    checking.py     `decomp check` as a library call: what a file is, its problems and warnings
    containment.py  `run_kind`: plugin kinds contained, every answer sized
    deepjson.py     JSON text of any nesting depth, written and read without recursion
    interpreter.py  steps and programs: references, operators' fan-out, `if`, dataflow
    loader.py       a module and its imports parsed, built and checked
    plans.py        `(plan)`: a handler run over an ADaPT plan in its AND/OR order
    run_secrets.py  the run's own secrets, masked in what its models say
    scheduler.py    slots, rate limits and retries for every outbound service
    session.py      `Session`: wires a run (registry, models, scheduler, cache, budgets)
    syncrun.py      a coroutine run to its end from synchronous code, loop or not
    tracing.py      the decomposition tree: a node per handler call
"""
