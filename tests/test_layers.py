"""The package's layers run one way (plugins -> cli | testing | programs -> views | cluster |
learning | editors -> runs -> exports | scoring -> storage -> engine -> models -> handlers ->
dsl): the import-linter contracts in pyproject.toml hold, with no exceptions listed, and no
module is named after a standard-library module."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import imports_of, package_modules

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


# ---- no import circle inside any folder (issue 21)
def folder_circles() -> list[list[str]]:
    """The import circles between the members of each folder: its modules and its subfolders
    (each subfolder as one, whatever of it is imported)."""
    import networkx as nx

    modules = package_modules()
    edges = {(a, b) for a, path in modules.items() for b in imports_of(a, path, modules)}
    folders = {m if modules[m].name == "__init__.py" else m.rpartition(".")[0] for m in modules}
    circles = []
    for folder in sorted(folders):
        def member(module: str) -> str | None:
            if not module.startswith(folder + "."):
                return None
            return folder + "." + module[len(folder) + 1:].split(".")[0]

        graph = nx.DiGraph()
        for a, b in edges:
            ma, mb = member(a), member(b)
            if ma and mb and ma != mb:
                graph.add_edge(ma, mb)
        circles += [sorted(c) for c in nx.simple_cycles(graph)]
    return circles


def test_no_import_circle_inside_any_folder():
    assert folder_circles() == []


def test_the_circle_check_sees_lazy_and_type_only_imports(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from decomp.pkg import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from decomp.pkg.a import f\n")
    modules = {"decomp.pkg.a": tmp_path / "a.py", "decomp.pkg.b": tmp_path / "b.py"}
    assert imports_of("decomp.pkg.a", modules["decomp.pkg.a"], modules) == {"decomp.pkg.b"}
    assert imports_of("decomp.pkg.b", modules["decomp.pkg.b"], modules) == {"decomp.pkg.a"}
