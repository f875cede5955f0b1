"""Imports every built-in handler kind of this package so that each registers itself, as a
plugin would. (The `program` kind and the model backends belong to the engine, which registers
them in `decomp.runtime.engine.defaults`.)"""
from decomp.handlers import calculator, decomposer, prompt, python, regex, score  # noqa: F401
