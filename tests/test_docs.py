"""The manual builds (`mkdocs build --strict`) and every code block in it and in README.md runs.

What each fence language means, and how a block is marked illustrative: tests/docs_blocks.py.
`text` blocks (what a command prints, listings) are shown and never run. Each page's blocks run
in order in one temporary folder of the page's own (an answers file written by one block is
there for the next), with its own step cache and no OpenAI settings from the environment; the
folder holds links to this checkout's `programs/`, `benchmarks/` and `tests/`, so that commands
written from the repository root (`decomp index build programs/odqa/corpus.jsonl ...`) run as
written.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.docs_blocks import ROOT, Block, blocks, bundled_lines, pages

BIN = Path(sys.executable).parent
DECOMP = BIN / "decomp"
LINKED = ("programs", "benchmarks", "tests")
BLOCK_TIMEOUT = 300


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DECOMP_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", DECOMP_CACHE_DIR=str(folder / ".cache"),
               PYTHONPATH=str(folder), HOME=str(folder / ".home"), PYTHONDONTWRITEBYTECODE="1")
    (folder / ".home").mkdir(exist_ok=True)
    return env


def _run(argv: list[str], block: Block, folder: Path, expect: int = 0) -> None:
    done = subprocess.run(argv, cwd=folder, env=_env(folder), capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == expect, (
        f"{block.where}: the {block.lang} block exited {done.returncode} (expected {expect})\n"
        f"--- block ---\n{block.code}--- stdout ---\n{done.stdout[-4000:]}--- stderr ---\n{done.stderr[-4000:]}")


def _write(block: Block, folder: Path, default: str | None = None) -> Path | None:
    name = block.options.get("file", default)
    if name is None:
        return None
    path = folder / name
    assert folder in path.resolve().parents or path.resolve().parent == folder.resolve(), f"{block.where}: file= leaves the folder"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.code, encoding="utf-8")
    return path


def run_block(block: Block, folder: Path) -> None:
    """Run or check one block in its page's folder (see tests/docs_blocks.py)."""
    if block.lang == "python":
        path = _write(block, folder) or _write(block, folder, f".block_{block.line}.py")
        _run([sys.executable, str(path)], block, folder)
    elif block.lang == "sh":
        script = _write(block, folder, f".block_{block.line}.sh")
        _run(["bash", "-e", "-o", "pipefail", str(script)], block, folder, int(block.options.get("exit", 0)))
    elif block.lang in ("decomp", "fewshot"):
        if "bundled" in block.options:
            _check_bundled(block, folder)   # and with file=, a copy is written for later blocks
            _write(block, folder)
            return
        path = _write(block, folder, f".block_{block.line}." + ("decomp" if block.lang == "decomp" else "txt"))
        plugin = ["--plugin", block.options["plugin"], "--trust-folder", str(folder)] if "plugin" in block.options else []
        _run([str(DECOMP), "check", str(path), *plugin], block, folder)
    elif block.lang == "json":
        json.loads(block.code)
        _write(block, folder)
    elif block.lang == "jsonl":
        for line in block.code.splitlines():
            if line.strip():
                json.loads(line)
        _write(block, folder)
    elif block.lang == "toml":
        tomllib.loads(block.code)
        _write(block, folder)
    else:
        raise AssertionError(f"{block.where}: nothing runs a {block.lang!r} block")


def _check_bundled(block: Block, folder: Path) -> None:
    name = block.options["bundled"]
    source = (ROOT / "programs" / f"{name}.decomp").read_text(encoding="utf-8")
    want, have = bundled_lines(block.code), bundled_lines(source)
    spans = [have[i:i + len(want)] for i in range(len(have) - len(want) + 1)]
    assert want in spans, f"{block.where}: the block is not a part of programs/{name}.decomp as it is now"
    _run([str(DECOMP), "check", block.options.get("check", name)], block, folder)


def _page_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "page"
    folder.mkdir()
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    return folder


PAGES = pages()


def test_every_block_is_run_or_marked():
    """Fast and without subprocesses: no block is left neither runnable nor marked with a reason."""
    problems = [f"{b.where}: {b.problem()}" for page in PAGES for b in blocks(page) if b.problem()]
    assert not problems, "\n".join(problems)


def test_the_markers_are_seen():
    """The marker is read only right before a block, and a fence's words are its options."""
    from tests.docs_blocks import _ILLUSTRATIVE
    assert _ILLUSTRATIVE.match("<!-- illustrative: installs -->\n").group(1) == "installs"
    assert _ILLUSTRATIVE.match("<!-- illustrative:  -->").group(1) == ""
    counted = [b for page in PAGES for b in blocks(page)]
    assert sum(b.illustrative is not None for b in counted) >= 2   # the README's two set-up commands
    assert any(b.options.get("file") for b in counted)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_blocks_run(page: Path, tmp_path: Path):
    """Each page's blocks, in order, in one folder: a block that fails names its page and line."""
    folder = _page_folder(tmp_path)
    for block in blocks(page):
        assert block.problem() is None, f"{block.where}: {block.problem()}"
        if block.illustrative is None and block.lang not in ("text",):
            run_block(block, folder)


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path):
    """`mkdocs build --strict`: every page in the nav, every link and every API reference resolves."""
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if not k.startswith("DECOMP_")})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "Session" in api and "run_dataset" in api and "FakeModel" in api
    shutil.rmtree(site)


def test_ci_runs_exactly_the_readme_lines():
    """`.ci/run` runs the README's own test command, character for character, and nothing else."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#") and not line.startswith(("set ", "status=", "if ", "  ", "fi", "exit"))]
    assert len(lines) == 1
    assert lines[0] in readme.splitlines(), lines[0]
    assert lines[0].endswith("python -m pytest -q")
