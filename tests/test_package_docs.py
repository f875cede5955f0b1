"""Each package's docstring and ARCHITECTURE.md name the modules that exist, and the floors run
the way the imports do. The rules the text is held to (prose outside them is not read):

* Package docstrings (every folder of the package with an `__init__.py`: the root, `programs/`
  and the folders outside the package aside) list their members in an indented listing: a line
  of four spaces, then `name.py` (a module) or `name/` (a subpackage), then what it is. The names
  listed are exactly the folder's modules (its `*.py` files but `__init__` and `__main__`) and
  subpackages, each once.
* ARCHITECTURE.md's "Floors inside each folder" block: a line that starts in the first column
  with a folder (`runtime/engine/`) begins that folder's entry; the indented lines below it go on
  with it. Text in parentheses is prose and dropped. The rest is member names (a module's stem,
  `name/` for a subfolder taken whole) separated by spaces, commas and semicolons, in floors
  separated by `->` and by line breaks (a line that begins with `->` goes on from the one above),
  top floor first. The names are exactly the folder's members, each once; a member imports only
  from the floors below its own (imports at any depth count, as tests/test_layers.py reads them);
  and every folder whose members import one another has an entry.
* The layers diagram (ARCHITECTURE.md's first block): the paths that begin its lines
  (`runtime/views/  learning/ ...`, `runtime/cli.py`) exist, and its folders are exactly the
  top-level packages (`runtime/` and `programs/` aside) and `runtime/`'s subpackages.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from tests.helpers import imports_of, package_modules

REPO = Path(__file__).resolve().parents[1]
OUTSIDE = {"programs"}  # the bundled programs: described by their own README files
LISTED = re.compile(r"^ {4}(\w+(?:\.py|/))(?:\s|$)", re.M)
ARCHITECTURE = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")


def packages() -> list[Path]:
    """Every folder of the package below the root, `programs/` aside."""
    found = []

    def walk(folder: Path) -> None:
        for child in sorted(folder.iterdir()):
            if child.is_dir() and (child / "__init__.py").exists() and child.name not in OUTSIDE:
                found.append(child)
                walk(child)

    walk(REPO)
    return found


def members(folder: Path) -> Counter:
    """A folder's modules (`parser`) and subpackages (`kinds/`)."""
    modules = [p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")]
    subpackages = [p.name + "/" for p in folder.iterdir() if (p / "__init__.py").exists()]
    return Counter(modules + subpackages)


def listed(folder: Path) -> Counter:
    """The members a package docstring lists (`name.py` written as `name`)."""
    source = (folder / "__init__.py").read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source), clean=False) or ""  # as written: listings keep their indent
    return Counter(name.removesuffix(".py") for name in LISTED.findall(doc))


@cache
def package_imports() -> dict[str, set[str]]:
    """Every module of the package with the modules of the package it imports."""
    modules = package_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def folder_imports(folder: Path) -> dict[str, set[str]]:
    """For each member of a folder, the other members it imports (a subfolder taken whole)."""
    prefix = ".".join(["decomp", *folder.relative_to(REPO).parts]) + "."

    def member(module: str) -> str | None:
        if not module.startswith(prefix):
            return None
        first = module[len(prefix):].split(".")[0]
        return first + "/" if (folder / first).is_dir() else first

    edges: dict[str, set[str]] = {}
    for name, imported in package_imports().items():
        if (a := member(name)) is not None:
            found = {b for b in map(member, imported) if b and b != a}
            edges.setdefault(a, set()).update(found)
    return edges


def parse_floors(block: str) -> dict[str, list[list[str]]]:
    """The floors block's entries: folder -> its floors, top first, each a list of member names."""
    texts: dict[str, str] = {}
    folder = None
    for line in block.splitlines():
        if line[:1].strip():
            folder, _, line = line.partition(" ")
            assert folder not in texts, f"the floors block has two entries for {folder}"
            texts[folder] = ""
        assert folder is not None, f"the floors block starts without a folder: {line!r}"
        texts[folder] += "\n" + line
    return {folder: _floors(text) for folder, text in texts.items()}


def _floors(text: str) -> list[list[str]]:
    while (dropped := re.sub(r"\([^()]*\)", " ", text)) != text:  # nested parentheses too
        text = dropped
    floors = [piece.replace(",", " ").replace(";", " ").split() for piece in re.split(r"->|\n", text)]
    return [floor for floor in floors if floor]


def floors_block() -> str:
    section = ARCHITECTURE.split("## Floors inside each folder", 1)[1]
    return section.split("```\n", 2)[1]


def floor_problems(folder: Path, floors: list[list[str]]) -> list[str]:
    """What an entry says that the folder's files and imports do not."""
    names = Counter(name for floor in floors for name in floor)
    problems = [f"not a member: {n}" for n in sorted(names - members(folder))]
    problems += [f"missing: {n}" for n in sorted(members(folder) - names)]
    problems += [f"named twice: {n}" for n, count in sorted(names.items()) if count > 1]
    level = {name: i for i, floor in enumerate(floors) for name in floor}
    for a, imported in sorted(folder_imports(folder).items()):
        problems += [f"{a} imports {b}, on its own floor or above" for b in sorted(imported)
                     if a in level and b in level and level[b] <= level[a]]
    return problems


@pytest.mark.parametrize("folder", packages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_the_package_docstring_lists_its_members(folder):
    said, there = listed(folder), members(folder)
    assert sorted(said - there) == [], "listed but not a module or subpackage"
    assert sorted(there - said) == [], "modules or subpackages the docstring does not list"
    assert [n for n, count in said.items() if count > 1] == [], "listed twice"


@pytest.mark.parametrize("folder", sorted(parse_floors(floors_block())))
def test_each_floors_entry_holds_its_folder(folder):
    path = REPO / folder
    assert folder.endswith("/") and (path / "__init__.py").exists(), f"{folder} is not a package folder"
    assert floor_problems(path, parse_floors(floors_block())[folder]) == []


def test_every_folder_whose_members_import_each_other_has_floors():
    entries = set(parse_floors(floors_block()))
    tangled = [p.relative_to(REPO).as_posix() + "/" for p in packages() if any(folder_imports(p).values())]
    assert sorted(set(tangled) - entries) == []


def test_the_layers_diagram_names_every_layer():
    diagram = ARCHITECTURE.split("```\n", 2)[1]
    paths = []
    for line in diagram.splitlines():
        for word in line.split():
            if not word.endswith(("/", ".py")):
                break
            paths.append(word)
    assert [p for p in paths if not (REPO / p).exists()] == []
    expected = {p.relative_to(REPO).as_posix() + "/" for p in packages()
                if p.parent == REPO / "runtime" or (p.parent == REPO and p.name != "runtime")}
    assert sorted(p for p in paths if p.endswith("/")) == sorted(expected)


def test_the_floor_rules_catch_a_false_entry(tmp_path):
    (tmp_path / "__init__.py").write_text('"""A folder.\n\n    a.py  top\n    gone.py  not here\n"""\n')
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    assert listed(tmp_path) - members(tmp_path) == Counter(["gone"])
    assert members(tmp_path) - listed(tmp_path) == Counter(["b"])
    floors = parse_floors("x/  a (prose: f(b) -> c) -> b\n    -> c; d\n    e, f\n")["x/"]
    assert floors == [["a"], ["b"], ["c", "d"], ["e", "f"]]
    wrong = [["base", "guided"], ["local", "openai_backend", "openai_transport", "prefix_states", "prices"]]
    assert "local imports base, on its own floor or above" in floor_problems(REPO / "runtime/models", wrong)
    assert "guided imports base, on its own floor or above" in floor_problems(REPO / "runtime/models", wrong)
