"""Programs that improve from data: `decomp optimize` bootstraps few-shot demonstrations from a
program's successful traces and keeps the candidate that scores best on development rows
(`decomp.runtime.optimize.search`)."""
from decomp.runtime.optimize.search import OptimizeError, OptimizeResult, OptimizeSettings, optimize

__all__ = ["OptimizeError", "OptimizeResult", "OptimizeSettings", "optimize"]
