"""The manual (docs/, MkDocs) builds with --strict, and every code block in it and in the README
that is a command, a Python snippet or a program is run here, unless the comment line before it
says `<!-- illustrative: REASON -->` (a reason is required). Blocks fenced `text` (what a
command prints, a layout), `toml` and other formats are shown, not run.

Runnable blocks of one page share one working folder, in page order, holding links to the
checkout's `programs/` and `tests/` (so `programs/decomp/letter_cat.decomp` and the fixtures
are where the commands say)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
RUN = {"bash", "sh", "console", "python", "decomp"}
SHOWN = {"text", "toml", "json", "jsonl", "yaml", ""}
ILLUSTRATIVE = re.compile(r"<!--\s*illustrative:\s*(.*?)\s*-->")
BIN = Path(sys.executable).parent


def blocks(page: Path) -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, illustrative reason or None) of every fenced block of `page`."""
    found, lines, i = [], page.read_text(encoding="utf-8").split("\n"), 0
    while i < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        start, language = i, opening.group(1)
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        reason = ILLUSTRATIVE.search(before)
        found.append((start + 1, language, "\n".join(lines[start + 1:i]), reason.group(1) if reason else None))
        i += 1
    return found


ALL = [(page, *block) for page in PAGES for block in blocks(page)]


def test_the_pages_have_blocks_and_the_readme_is_short():
    assert len(ALL) > 20
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("page, line, language, code, reason", ALL,
                         ids=[f"{p.name}:{line}" for p, line, *_ in ALL])
def test_every_block_is_run_or_marked_illustrative_with_a_reason(page, line, language, code, reason):
    assert language in RUN | SHOWN, f"{page.name}:{line}: unknown block language {language!r}"
    if reason is not None:
        assert reason.strip(), f"{page.name}:{line}: an illustrative block needs a reason"
    assert language or reason is not None or not code.strip().startswith(("decomp ", "python")), \
        f"{page.name}:{line}: a command block needs its language (bash) to be run"


def _workdir(tmp: Path) -> Path:
    for name in ("programs", "tests"):
        (tmp / name).symlink_to(REPO / name, target_is_directory=True)
    return tmp


def _run_block(language: str, code: str, work: Path, where: str, before: list[str]) -> None:
    """Run one block in `work`; a Python block runs after the page's Python blocks `before` it
    (a page is one session: a later snippet uses what an earlier one defined)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DECOMP_CACHE_DIR": str(work / ".cache")}
    if language == "python":
        script = work / "block.py"
        script.write_text("\n\n".join([*before, code]), encoding="utf-8")
        proc = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
    elif language == "decomp":
        program = work / "block.decomp"
        program.write_text(code, encoding="utf-8")
        proc = subprocess.run([str(BIN / "decomp"), "check", str(program)], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300)
    else:
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300)
    assert proc.returncode == 0, f"{where}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_the_runnable_blocks_of_each_page_run(page, tmp_path):
    work = _workdir(tmp_path)
    ran, python = 0, []
    for line, language, code, reason in blocks(page):
        if reason is None and language in RUN:
            _run_block(language, code, work, f"{page.name}:{line}", python)
            python += [code] if language == "python" else []
            ran += 1
    if page.name in {"getting-started.md", "api.md", "plugins.md", "runs.md"}:
        assert ran, f"{page.name} runs none of its blocks"


@pytest.mark.slow
def test_mkdocs_build_strict_passes(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8").count("decomp.Session") > 0
