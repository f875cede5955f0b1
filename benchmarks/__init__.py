"""Benchmarks of the interpreter (not timed tests); run each as `python benchmarks/NAME.py`."""
