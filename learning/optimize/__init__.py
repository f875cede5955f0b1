"""Programs that improve from data: `decomp optimize` bootstraps few-shot demonstrations from a
program's successful traces and keeps the candidate that scores best on development rows.

    candidates.py  the programs tried: which demonstrations each target handler gets
    command.py     the `decomp optimize` command, a built-in plugin
    folder.py      a candidate written as an ordinary program folder
    harvest.py     demonstrations harvested from the traces of accepted rows
    metrics.py     how one row is scored
    owner_key.py   the user's owner key, which signs the marker of every --out folder
    search.py      `optimize`: the search over candidates
    targets.py     which handlers can be given demonstrations, and in what form
"""
from decomp.learning.optimize.search import OptimizeError, OptimizeResult, OptimizeSettings, optimize

__all__ = ["OptimizeError", "OptimizeResult", "OptimizeSettings", "optimize"]
