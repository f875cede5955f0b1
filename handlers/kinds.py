"""Imports every built-in handler kind of this package so that each registers itself, as a
plugin would. (The `program` kind and the model backends belong to the engine, which registers
them in `decomp.runtime.engine.defaults`.)"""
from decomp.handlers import (  # noqa: F401
    calculator, decomposer, environment, executor, prompt, python, regex, retrieve, score, textcraft,
)
