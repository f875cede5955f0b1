"""The TaskLAMA programs (steps.decomp, graphs.decomp), their prompts, the trained S&F scorer and
the Python functions their `python` handlers call (handlers.py)."""
