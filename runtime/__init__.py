"""Everything that runs programs, in layers that import downwards only (ARCHITECTURE.md).

    cli.py           the `decomp` command line: parses options, calls the library
    cluster/         runs on a Ray cluster: rows on actors, a program in a Ray Data pipeline
    engine/          runs a loaded program on one row
    exports/         runs sent elsewhere as they happen (OpenTelemetry over OTLP)
    models/          model backends: outbound services of kind "model"
    module_entry.py  `python -m decomp`: the working folder taken off `sys.path` first
    paths.py         where decomp keeps its files (the cache folder)
    runs/            runs over datasets: the run loop and its Python API
    scoring/         metrics and statistics: answers scored, predictions evaluated, runs compared
    sqlite_store.py  decomp's SQLite files opened one way (WAL, a busy timeout)
    storage/         what runs read and write: datasets, run directories, JSON Lines
    testing/         test doubles shipped with the package: the fake model, mock servers
    version.py       this decomp's version (read by the language server and run directories)
    views/           views of runs: terminal, HTML page, diff, compare
"""
