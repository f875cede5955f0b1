"""MkDocs hook: the checkout folder is the package `decomp` itself, under whatever name it was
cloned, so the API pages find it through `build/docs-path/decomp`, a link to the checkout made
here before mkdocstrings looks (mkdocs.yml: `paths: [build/docs-path]`)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def on_startup(command, dirty):
    link = ROOT / "build" / "docs-path" / "decomp"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() or link.resolve() != ROOT:
        if link.is_symlink():
            link.unlink()
        link.symlink_to(ROOT, target_is_directory=True)
