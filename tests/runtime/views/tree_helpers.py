"""What the trace view tests share (test_tree.py, test_export.py): a finished run of the bundled
letter_cat program on three rows (one right, one in error, one wrong) and a drawing's text."""
from __future__ import annotations

import io
import json

from rich.console import Console

from tests.helpers import invoke


def question(words: str, position: str = "position 3", delimiter: str = "a space") -> str:
    return f'Take the letters at {position} of the words in "{words}" and concatenate them using {delimiter}.'


ROWS = [
    {"id": "ok", "question": question("Donna Guan Nascimento"), "answer": "n a s"},
    {"id": "bad", "question": "Take the letters at position 1 of the words in no quotes here and concatenate them."},
    {"id": "wrong", "question": question("Ada Lovelace", "the last", "a comma"), "answer": "a,x"},
]


def make_run(tmp_path, rows, name="run", program="decomp/letter_cat_symbolic", *extra):
    """`decomp run PROGRAM` on `rows`, into tmp_path/NAME: the run folder."""
    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run_dir = tmp_path / name
    result = invoke("run", program, "--input", data, "--run-dir", run_dir, *extra)
    failed = json.loads(result.stdout)["failed"]
    assert result.exit_code == (3 if failed else 0), result.output  # 3: the run finished with rows in error
    return run_dir


def text_of(draw, width=120) -> str:
    """What `draw(console)` prints, as plain text `width` columns wide."""
    console = Console(record=True, width=width, file=io.StringIO())
    draw(console)
    return console.export_text()
