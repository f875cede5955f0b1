"""Imports every built-in handler kind and model backend so that each registers itself, as a
plugin would."""
from . import calculator, decomposer, program, prompt, python, regex, score  # noqa: F401
from .models import local, openai_backend  # noqa: F401
