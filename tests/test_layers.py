"""The package's layers run one way (cli -> views | taskgraph -> runs -> engine -> testing ->
models -> handlers -> dsl): the import-linter contracts in pyproject.toml hold, with no
exceptions listed, and no module is named after a standard-library module."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold(tmp_path):
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(lint).exists():
        pytest.fail("lint-imports is missing: install the test extra (pip install -e '.[test]')")
    # grimp finds packages as folders on the path; an editable install maps `decomp` through an
    # import hook instead, so the checkout is shown to it under its import name
    (tmp_path / "decomp").symlink_to(REPO, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([lint, str(REPO / "pyproject.toml")], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_contracts_list_no_exceptions():
    text = (REPO / "pyproject.toml").read_text()
    assert "ignore_imports" not in text and "unmatched_ignore_imports" not in text


def test_no_module_is_named_after_a_standard_library_module():
    package = [p for p in REPO.rglob("*.py")
               if not {"tests", "benchmarks", ".venv", "build"} & set(p.relative_to(REPO).parts)]
    clashes = sorted(str(p.relative_to(REPO)) for p in package if p.stem in sys.stdlib_module_names)
    assert clashes == []
