"""The code blocks of the manual (docs/*.md) and of README.md, read the way tests/test_docs.py runs them.

Every code block is fenced, and its fence language says what the test does with it:

    text            what a command prints, a listing or a layout: shown, never run
    python          run with this venv's Python (a fresh process) in the page's folder
    sh              run with bash (`set -e -o pipefail`), this venv's bin/ first on PATH
                    (so `decomp` is this venv's entry point), in the page's folder
    decomp          a .decomp module: written to a file and checked with `decomp check`
    fewshot         a few-shot prompt file (QC:/QS:/Q:/A: lines): likewise checked
    json, jsonl     parsed (each line, for jsonl)
    toml            parsed

Words after the language, `key=value`:

    file=NAME       write the block to NAME in the page's folder first (then run or check it
                    there), so a later block of the page can use it
    bundled=NAME    (decomp) the block's lines (comments and blank lines aside) are lines of the
                    bundled program NAME, in order and together; `decomp check NAME` must pass
                    (with file= too, the block is also written there, for later blocks;
                    with check=OTHER, the bundled program OTHER is checked instead: a library
                    file whose handlers come from the file that imports it)
    plugin=MODULE   (decomp, fewshot) checked with `--plugin MODULE` (a kind or environment it registers)
    exit=N          (sh) the exit status the block's last command is expected to end with

A block right after an HTML comment `<!-- illustrative: REASON -->` (REASON not empty) is shown
and not run. Any other block (an indented code block, a fence without a language, a language
not listed above) makes the test fail: nothing in the manual goes untested by accident.
Every page runs in one temporary folder of its own, its blocks in order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
RUN_LANGS = {"python", "sh", "decomp", "fewshot", "json", "jsonl", "toml"}
SHOWN_LANGS = {"text"}
_ILLUSTRATIVE = re.compile(r"^\s*<!--\s*illustrative:\s*(.*?)\s*-->\s*$", re.S)


@dataclass
class Block:
    page: Path
    line: int                      # 1-based line of the opening fence
    lang: str                      # "" for an indented block or a bare fence
    code: str
    options: dict[str, str] = field(default_factory=dict)
    illustrative: str | None = None  # the reason, when marked
    indented: bool = False

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def problem(self) -> str | None:
        """Why this block can be neither run nor skipped, or None."""
        if self.illustrative is not None:
            return None if self.illustrative else "marked illustrative without a reason"
        if self.indented:
            return "an indented code block: fence it with a language (``` text, sh, python, decomp, ...)"
        if not self.lang:
            return "a fence without a language"
        if self.lang not in RUN_LANGS | SHOWN_LANGS:
            return f"fence language {self.lang!r} is neither run nor shown (see tests/docs_blocks.py)"
        return None


def pages() -> list[Path]:
    """README.md and every page of the manual."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The code blocks of one page, in order, each with its marker if the token before it is one."""
    tokens = MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
    found: list[Block] = []
    previous = None
    for token in tokens:
        if token.type in ("fence", "code_block"):
            words = token.info.split()
            lang = words[0] if words else ""
            options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            marked = _ILLUSTRATIVE.match(previous.content) if previous is not None and previous.type == "html_block" else None
            found.append(Block(page, token.map[0] + 1, lang, token.content, options,
                               marked.group(1) if marked else None, token.type == "code_block"))
        previous = token
    return found


def bundled_lines(code: str) -> list[str]:
    """A program's lines as compared with a bundled file: stripped, comments and blank lines left out."""
    return [s for s in (line.strip() for line in code.splitlines()) if s and not s.startswith("#")]
