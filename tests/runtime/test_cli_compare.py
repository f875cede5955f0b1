"""`decomp compare` from the command line: ADaPT against ReAct on TextCraft with the scripted
model (the difference with its interval), --json, --html, --group-by, --seed, and the errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import TEXTCRAFT_DEV
from decomp.runtime.cli import main
from decomp.runtime.scoring.compare import paired_difference


def _decomp(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def adapt_and_react(tmp_path_factory) -> tuple[Path, Path]:
    """ADaPT (dmax 4) and ReAct over 10 dev tasks (4 of depth 4, 6 of depth 3), the scripted model
    of capability 2 answering every prompt through the real executor and planner kinds."""
    root = tmp_path_factory.mktemp("adapt-vs-react")
    lines = TEXTCRAFT_DEV.read_text(encoding="utf-8").splitlines()
    data = root / "tasks.jsonl"
    data.write_text("\n".join(lines[:4] + lines[-6:]) + "\n", encoding="utf-8")
    common = ["--input", str(data), "--model", "scripted:2", "--cache", "off"]
    for name, extra in [("adapt", ["--field", "dmax=4"]), ("react", ["--main", "react"])]:
        done = _decomp("run", "adapt/textcraft", *common, *extra, "--run-dir", str(root / name))
        assert done.exit_code == 0, done.output
    return root / "adapt", root / "react"


def _success(run: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return {r["id"]: float(r["environment"]["env"]["success"]) for r in rows}


def test_adapt_against_react_shows_the_difference_with_its_interval(adapt_and_react):
    adapt, react = adapt_and_react
    done = _decomp("compare", str(adapt), str(react), "--group-by", "recipe_depth", "--resamples", "2000")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert max(map(len, lines)) <= 80
    a, b = _success(adapt), _success(react)
    ids = sorted(a)
    expected = paired_difference([a[i] for i in ids], [b[i] for i in ids], resamples=2000)
    assert expected["difference"] < 0  # ReAct solves fewer tasks than ADaPT
    low, high = expected["ci"]
    overall = lines.index("env_success - all rows")
    assert lines[overall + 3].startswith("  B ")
    assert f"{expected['difference']:.3f} [{low:.3f}, {high:.3f}] {expected['p_value']:.4f}    10" in lines[overall + 3]
    assert "env_success - recipe_depth = 3" in lines and "env_success - recipe_depth = 4" in lines
    assert lines[1].startswith("  A  ") and "calls" in lines[1]


def test_json_reports_seed_calls_and_each_group(adapt_and_react):
    adapt, react = adapt_and_react
    done = _decomp("compare", str(adapt), str(react), "--json", "--group-by", "group", "--seed", "5",
                   "--method", "percentile", "--resamples", "500")
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert (result["seed"], result["method"], result["resamples"]) == (5, "percentile", 500)
    summaries = [json.loads((run / "summary.json").read_text()) for run in (adapt, react)]
    assert [r["calls"] for r in result["runs"]] == [s["calls"] for s in summaries]
    assert result["runs"][0]["calls"] > result["runs"][1]["calls"] > 0
    assert [c["group"] for c in result["comparisons"]] == ["all rows", "depth 3", "depth 4"]
    depth3 = result["comparisons"][1]
    assert depth3["scores"][0]["n"] == 6 and depth3["differences"][0]["n"] == 6
    again = json.loads(_decomp("compare", str(adapt), str(react), "--json", "--group-by", "group", "--seed", "5",
                               "--method", "percentile", "--resamples", "500").output)
    assert again == result


def test_html_writes_the_page_and_refuses_to_overwrite(adapt_and_react, tmp_path):
    adapt, react = adapt_and_react
    page = tmp_path / "compare.html"
    done = _decomp("compare", str(adapt), str(react), "--html", str(page), "--resamples", "200")
    assert done.exit_code == 0, done.output
    assert '<svg class="differences"' in page.read_text(encoding="utf-8")
    again = _decomp("compare", str(adapt), str(react), "--html", str(page), "--resamples", "200")
    assert again.exit_code == 1 and "exists: pass --force" in again.output
    assert _decomp("compare", str(adapt), str(react), "--html", str(page), "--force",
                   "--resamples", "200").exit_code == 0


def test_html_says_where_it_wrote_the_page_on_stderr(adapt_and_react, tmp_path):
    adapt, react = adapt_and_react
    page = tmp_path / "pages" / "compare.html"
    page.parent.mkdir()
    done = _decomp("compare", str(adapt), str(react), "--html", str(page), "--json", "--resamples", "200")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["runs"]  # stdout stays the one JSON object
    assert done.stderr.splitlines() == [f"wrote {page}"] and page.is_file()


def test_errors_are_clear(adapt_and_react, tmp_path):
    adapt, react = adapt_and_react
    one = _decomp("compare", str(adapt))
    assert one.exit_code == 2 and "at least two run directories" in one.output
    missing = _decomp("compare", str(adapt), str(tmp_path / "nowhere"))
    assert missing.exit_code == 1 and "nowhere" in missing.output
    no_gold = _decomp("compare", str(adapt), str(react), "--metric", "em")
    assert no_gold.exit_code == 1 and "no row of the run can be scored with 'em'" in no_gold.output
    unknown = _decomp("compare", str(adapt), str(react), "--metric", "accuracy")
    assert unknown.exit_code == 1 and "known metrics are: em, exact, f1, set_em" in unknown.output
    field = _decomp("compare", str(adapt), str(react), "--group-by", "colour")
    assert field.exit_code == 1 and "no row of the runs has the field 'colour'" in field.output
    method = _decomp("compare", str(adapt), str(react), "--method", "studentized")
    assert method.exit_code == 2
