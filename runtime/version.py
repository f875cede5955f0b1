"""This decomp's version, found without importing anything of the runtime (the language server
and run directories report it)."""
from __future__ import annotations


def decomp_version() -> str:
    """This decomp's version ("unknown" when it runs from a checkout that is not installed)."""
    try:
        from importlib.metadata import version

        return version("decomp-lang")
    except Exception:  # not installed (running from a checkout)
        return "unknown"
