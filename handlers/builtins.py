"""Imports every built-in handler kind so that each registers itself, as a plugin would."""
from . import calculator, decomposer, program, prompt, python, regex  # noqa: F401
