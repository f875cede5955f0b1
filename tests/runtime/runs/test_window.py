"""`decomp run --offset K --limit N` (`run_dataset(offset=, limit=)`): only the rows at input
positions K..K+N-1 run, the window is recorded in run.json and binds a resume, and a dry run
counts the same rows; `datasets.window` on its own."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.storage.datasets import Row, window
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.rundir import RunDir
DATA = Path(__file__).resolve().parents[2] / "fixtures/decomp/datasets/letter_cat/n3_eg20_pos2_space.json"
PROGRAM = "decomp/letter_cat_symbolic"  # symbolic handlers only: no model


def rows(n: int) -> list[Row]:
    return [Row(i, f"r{i}", {"question": "q"}, None) for i in range(n)]


@pytest.mark.parametrize("offset, limit, expected", [
    (0, None, list(range(6))), (2, None, [2, 3, 4, 5]), (0, 3, [0, 1, 2]), (4, 5, [4, 5]), (9, 2, []),
])
def test_window_picks_input_positions(offset, limit, expected):
    assert [row.index for row in window(rows(6), offset, limit)] == expected


def test_window_stops_reading_past_its_end():
    read = []

    def source():
        for row in rows(100):
            read.append(row.index)
            yield row

    assert [row.index for row in window(source(), 1, 2)] == [1, 2]
    assert read == [0, 1, 2, 3]  # the row past the end is read, no further


def test_cli_runs_only_the_window_and_records_it(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", PROGRAM, "--input", str(DATA), "--run-dir", str(run_dir),
                                       "--offset", "5", "--limit", "4"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rows"] == 4 and summary["failed"] == 0 and summary["score"] == 1.0
    records = RunDir.open(run_dir).records()
    assert [r["index"] for r in records] == [5, 6, 7, 8]
    options = json.loads((run_dir / "run.json").read_text())["options"]
    assert (options["offset"], options["limit"]) == (5, 4)


def test_resume_is_bound_to_the_window(tmp_path):
    run_dir = tmp_path / "run"
    run_dataset(PROGRAM, DATA, run_dir=run_dir, limit=3)
    with pytest.raises(RunDirError, match="limit"):
        run_dataset(PROGRAM, DATA, run_dir=run_dir, resume=True, limit=5)
    again = run_dataset(PROGRAM, DATA, run_dir=run_dir, resume=True, limit=3)
    assert again.rows == 3 and [r["index"] for r in again.records()] == [0, 1, 2]


def test_bad_window_is_refused(tmp_path):
    with pytest.raises(ValueError, match="offset"):
        run_dataset(PROGRAM, DATA, run_dir=tmp_path / "run", offset=-1)
    result = CliRunner().invoke(main, ["run", PROGRAM, "--input", str(DATA), "--limit", "0"])
    assert result.exit_code == 2 and "--limit" in result.output


def test_window_is_for_dataset_runs_only():
    result = CliRunner().invoke(main, ["run", PROGRAM, "-q", "x", "--limit", "2"])
    assert result.exit_code == 2 and "--limit" in result.output


def test_dry_run_counts_the_window():
    result = CliRunner().invoke(main, ["run", PROGRAM, "--input", str(DATA), "--dry-run", "--offset", "18",
                                       "--limit", "10"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["rows"] == 2


def test_notebook_run_takes_the_window(tmp_path):
    import decomp

    program = decomp.load(PROGRAM)
    run = program.run_dataset(DATA, run_dir=tmp_path / "run", offset=2, limit=3)
    assert [row["index"] for row in run.rows()] == [2, 3, 4]
    with pytest.raises(TypeError, match="limit"):
        program.run("a question", limit=3)
