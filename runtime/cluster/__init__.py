"""Runs on a Ray cluster (an optional extra: `pip install 'decomp-lang[ray]'`): a run's rows on
Ray actors (`decomp run --ray`), or a program as one stage of a Ray Data pipeline.

    data.py    a program inside a Ray Data pipeline (`Predictor`)
    limits.py  a Ray run's limits and budgets, held for all its workers
    rows.py    rows on a Ray cluster, the run directory kept by the driver (`Cluster`)
"""
