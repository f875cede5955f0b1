"""Everything that runs programs, in layers that import downwards only (ARCHITECTURE.md).

    cli.py           the `decomp` command line: parses options, calls the library
    engine/          runs a loaded program on one row
    lsp/             `decomp lsp`: the language server
    models/          model backends: outbound services of kind "model"
    module_entry.py  `python -m decomp`: the working folder taken off `sys.path` first
    optimize/        `decomp optimize`: few-shot demonstrations bootstrapped from traces
    paths.py         where decomp keeps its files (the cache folder)
    runs/            runs over datasets: rows, batch runs, run directories, scoring
    sqlite_store.py  decomp's SQLite files opened one way (WAL, a busy timeout)
    testing/         test doubles shipped with the package: the fake model, mock servers
    tuning/          `decomp tune`: soft-prompt tuning
    version.py       this decomp's version (read by the language server and run directories)
    views/           views of runs: terminal, HTML page, diff, compare
"""
