"""Where decomp keeps its files: the cache folder (step cache, model weights)."""
from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """$DECOMP_CACHE_DIR, else $XDG_CACHE_HOME/decomp, else ~/.cache/decomp."""
    if os.environ.get("DECOMP_CACHE_DIR"):
        return Path(os.environ["DECOMP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "decomp"
