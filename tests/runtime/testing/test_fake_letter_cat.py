"""End to end: one fake model pattern decomposes all 20 questions of DecomP's letter_cat cut
(tests/fixtures/decomp/datasets/letter_cat/n3_eg20_pos2_space.json) for the bundled
decomp/letter_cat, whose decomposer is its only model handler; from the CLI and from Python.
The pattern file is letter_cat_patterns.json beside this test."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.testing.fake import FakeModel

PATTERNS = Path(__file__).with_name("letter_cat_patterns.json")
DATA = "decomp/datasets/letter_cat/n3_eg20_pos2_space.json"


def gold(fixture_data) -> dict[str, str]:
    data = json.loads((fixture_data / DATA).read_text())
    return {q["query_id"]: q["answer"]["spans"][0] for v in data.values() for q in v["qa_pairs"]}


def test_the_pattern_file_has_one_pattern_of_four_steps():
    model = FakeModel.from_file(PATTERNS)
    assert len(model.patterns) == 1 and len(model.patterns[0].steps) == 4
    assert not (model.queue or model.mapping or model.script or model.default)


def test_all_20_rows_right_from_the_cli(tmp_path, fixture_data):
    run_dir = tmp_path / "run"
    ran = CliRunner().invoke(main, ["run", "decomp/letter_cat", "--model", f"fake:{PATTERNS}",
                                    "--input", str(fixture_data / DATA), "--run-dir", str(run_dir)])
    assert ran.exit_code == 0, ran.output
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    expected = gold(fixture_data)
    assert len(rows) == len(expected) == 20
    assert {str(r["id"]): r["answer"] for r in rows} == expected
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["rows"], summary["failed"], summary["score"]) == (20, 0, 1.0)


def test_all_20_rows_right_from_python(tmp_path, fixture_data):
    done = run_dataset("decomp/letter_cat", fixture_data / DATA, model=f"fake:{PATTERNS}",
                       run_dir=tmp_path / "run")
    assert (done.rows, done.failed, done.score) == (20, 0, 1.0)
    assert {str(r["id"]): r["answer"] for r in done.records()} == gold(fixture_data)


def test_decomp_check_passes_the_pattern_file():
    ran = CliRunner().invoke(main, ["check", str(PATTERNS)])
    assert ran.exit_code == 0 and "ok (fake model file: 1 pattern, 0 scripts" in ran.output
