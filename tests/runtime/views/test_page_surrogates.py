"""`decomp trace html` on text no encoding can write: a lone surrogate in a row's id, question and
answer is written as its escape `\\ud800` (as `decomp trace show` prints it), in the rows' table
and in the trees alike; the page is written whole or not at all (a new file renamed into place),
so a failure never leaves a partial page that blocks the retry."""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.views.page import page_data, shown, write_page

QUESTION = 'Take the letters at position 1 of the words in "ab\udc00 cd" and concatenate them using a space.'


@pytest.fixture(scope="module")
def surrogate_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("surrogates")
    data = folder / "data.jsonl"
    # json.dumps writes the lone surrogates as \ud800 escapes: the file is plain UTF-8
    data.write_text(json.dumps({"id": "s\ud800", "question": QUESTION, "answer": "x\udfff"}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", "decomp/letter_cat_symbolic", "--input", str(data),
                                       "--run-dir", str(folder / "run"), "--cache", "off"])
    assert result.exit_code == 0, result.output
    return folder / "run"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_shown_escapes_lone_surrogates_only():
    assert shown("plain é \\u") == "plain é \\u"
    assert shown("a\ud800b\udfff") == "a\\ud800b\\udfff"


def test_trace_html_writes_surrogates_escaped(surrogate_run, tmp_path):
    page = tmp_path / "page.html"
    result = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "trace", "html", str(surrogate_run),
                             "-o", str(page)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    text = page.read_bytes().decode("utf-8")  # strict UTF-8: nothing unwritable got in
    start = text.index('<table id="rows"')
    table = text[start:text.index("</table>", start)]
    assert 'data-id="s\\ud800"' in table and '<td class="id">s\\ud800</td>' in table
    assert '<td class="gold">x\\udfff</td>' in table
    data = json.loads(re.search(r'id="trace-data">(.*?)</script>', text, re.S).group(1))
    assert "s\\ud800" in data["strings"] and QUESTION.replace("\udc00", "\\udc00") in data["strings"]
    assert not any(re.search("[\ud800-\udfff]", s) for s in data["strings"])
    assert _leftovers(tmp_path) == []


def test_the_page_data_keeps_the_stored_trees_text_otherwise(surrogate_run):
    data = page_data(RunDir.open(surrogate_run))
    assert "ab\\udc00 cd" in data["strings"] and "a c" in data["strings"]


def test_a_page_that_cannot_be_rendered_leaves_no_file_and_the_old_page(surrogate_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(surrogate_run, run, ignore=shutil.ignore_patterns("run.lock"))
    db = sqlite3.connect(run / "traces.sqlite")
    with db:
        db.execute("UPDATE traces SET tree = ?", (b"garbage",))
    db.close()
    page = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["trace", "html", str(run), "-o", str(page)])
    assert result.exit_code == 1 and "traces.sqlite is corrupt" in result.output
    assert not page.exists() and _leftovers(tmp_path) == []
    page.write_text("old page", encoding="utf-8")
    result = CliRunner().invoke(main, ["trace", "html", str(run), "-o", str(page), "--force"])
    assert result.exit_code == 1 and page.read_text(encoding="utf-8") == "old page"
    assert _leftovers(tmp_path) == []


def test_a_retry_after_a_failure_is_not_blocked(surrogate_run, tmp_path):
    page = tmp_path / "page.html"
    first = CliRunner().invoke(main, ["trace", "html", str(surrogate_run), "-o", str(tmp_path / "no" / "page.html")])
    assert first.exit_code == 1 and not (tmp_path / "no").exists()
    done = CliRunner().invoke(main, ["trace", "html", str(surrogate_run), "-o", str(page)])
    assert done.exit_code == 0 and page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_folder_as_output_is_refused_in_words(surrogate_run, tmp_path):
    result = CliRunner().invoke(main, ["trace", "html", str(surrogate_run), "-o", str(tmp_path), "--force"])
    assert result.exit_code == 2 and "is a directory" in result.output  # click's usage error
    with pytest.raises(RunDirError, match="is a folder: name the page's file"):
        write_page(RunDir.open(surrogate_run), tmp_path, force=True)
