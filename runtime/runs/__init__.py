"""Runs over datasets: the run loop and its Python API, from the rows of a dataset to a run
directory, in this process or on a pool of workers.

    api.py                `run_dataset`: `decomp run FILE --input DATA` as one call
    bars.py               the Python API's progress bars
    batch.py              every row through a module; a bad row recorded, the others go on
    command_options.py    the command-line options every command running a program shares
    dryrun.py             dry runs: the model calls, tokens and cost a real run would take
    notebook.py           the notebook API: `load`, `Program`, `Run`, `open_run`
    notebook_evaluate.py  `decomp.evaluate`: `decomp eval` from Python
    programs.py           which program a run runs: a path or a bundled name, and its `main`
    progress.py           the live progress bar of dataset runs on a terminal
    remote.py             rows run by a pool of workers elsewhere (`Workers`, `WorkerSpec`)
    resumed.py            what a resumed run takes from its run.json
    shards.py             a run split across processes or machines, and the pieces joined
"""
