"""What the plugin tests share (test_plugins.py, test_plugins_metrics.py): the `decomp` command
of this interpreter and a plugin package written to a folder, ready for `pip install`."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

DECOMP = Path(sys.executable).parent / "decomp"


def plugin_package(root: Path, name: str, module: str, source: str) -> Path:
    """A pip-installable package `name` under `root`: `module`.py holding `source`, registered
    under the `decomp` entry-point group."""
    folder = root / name
    folder.mkdir()
    (folder / f"{module}.py").write_text(source)
    (folder / "pyproject.toml").write_text(textwrap.dedent(f'''
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{name}"
        version = "1.0"
        [tool.setuptools]
        py-modules = ["{module}"]
        [project.entry-points.decomp]
        {module} = "{module}"
    '''))
    return folder
