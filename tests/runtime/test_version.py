"""decomp.runtime.version: this decomp's version, as its installed distribution says."""
from __future__ import annotations

from importlib.metadata import version

from decomp.runtime.version import decomp_version


def test_the_version_is_the_installed_distributions():
    assert decomp_version() == version("decomp-lang")
