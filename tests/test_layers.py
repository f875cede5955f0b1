"""The package's layers run one way (cli -> views | taskgraph -> runs -> engine -> testing ->
models -> handlers -> dsl): the import-linter contracts in pyproject.toml hold, with no
exceptions listed, and no module is named after a standard-library module."""
import ast
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


# ---- no import circle inside any folder (issue 21)
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["decomp", *parts])


def package_modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (`decomp.dsl.parser`), with its file."""
    skip = {"tests", "benchmarks", ".venv", "build", "docs", "site"}
    return {_module_name(p): p for p in REPO.rglob("*.py") if not skip & set(p.relative_to(REPO).parts)}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package that `name` imports, at any depth of its code: imports inside
    functions and under `if TYPE_CHECKING:` count like the others."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != name:
                found.add(target)
    return found


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
