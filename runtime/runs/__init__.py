"""Runs over datasets: reading rows, batch runs, run directories, scoring, the Python API.

    api.py                `run_dataset`: `decomp run FILE --input DATA` as one call
    bars.py               the Python API's progress bars
    batch.py              every row through a module; a bad row recorded, the others go on
    command_options.py    the command-line options every command running a program shares
    compare.py            runs compared with confidence intervals (`decomp compare`)
    datasets.py           dataset rows read from JSONL, CSV or DROP-style JSON, and written
    dryrun.py             dry runs: the model calls, tokens and cost a real run would take
    evaluation.py         predictions scored against gold rows (`decomp eval`)
    jsonl.py              JSON Lines read and written one way
    layout.py             a run directory's files by name, and `RunDirError`
    locks.py              a run directory's writer lock, and the lock that reads one whole
    manifest.py           a run's run.json: made, read back and checked; where runs go
    metric_calls.py       a user's metric function, called in a worker process
    notebook.py           the notebook API: `load`, `run`, `open_run`
    notebook_evaluate.py  `decomp.evaluate`: `decomp eval` from Python
    otel.py               OpenTelemetry export of each row's tree over OTLP
    otel_sender.py        the process that sends a dataset run's traces
    programs.py           which program a run runs: a path or a bundled name, and its `main`
    progress.py           the live progress bar of dataset runs on a terminal
    ray_data.py           a program inside a Ray Data pipeline (`Predictor`)
    ray_limits.py         a Ray run's limits and budgets, held for all its workers
    ray_rows.py           rows on a Ray cluster, the run directory kept by the driver
    resumed.py            what a resumed run takes from its run.json
    result_lines.py       results.jsonl's lines: which is a row, what a row says
    rundir.py             run directories stored (`RunDir`): created, resumed, read
    scoring.py            answers scored as DROP's evaluator does (em, f1, set match)
    shards.py             a run split across processes or machines, and the pieces joined
    summary.py            a run's summary statistics: rows, score, outcomes, usage
    writable.py           whether a run directory can be written; its traces read read-only
"""
