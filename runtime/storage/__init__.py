"""What runs read and write: dataset rows in, run directories out, JSON Lines both ways.

    datasets.py      dataset rows read from JSONL, CSV or DROP-style JSON, and written
    jsonl.py         JSON Lines read and written one way
    layout.py        a run directory's files by name, and `RunDirError`
    locks.py         a run directory's writer lock, and the lock that reads one whole
    manifest.py      a run's run.json: made, read back and checked; where runs go
    result_lines.py  results.jsonl's lines: which is a row, what a row says
    rundir.py        run directories stored (`RunDir`): created, resumed, read
    summary.py       a run's summary statistics: rows, score, outcomes, usage
    writable.py      whether a run directory can be written; its traces read read-only
"""
