"""`decomp.compare` (runtime/views/notebook_compare.py): `decomp compare` from Python, on real run
directories: the same table, the same JSON, every figure as an attribute and a DataFrame."""
from __future__ import annotations

import json
import re

import pytest

import decomp
from decomp.runtime.scoring.compare import CompareError
from tests.helpers import invoke

ROWS = [{"id": f"r{i}", "question": f"word{i}", "answer": f"word{i}" if i % 3 else f"word{i} word{i}"}
        for i in range(9)]
FUNCS = "def same(question):\n    return question\n\ndef doubled(question):\n    return question + ' ' + question\n"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """Two runs of the same rows: A answers the question, B doubles it (better on 3 rows, worse on 6)."""
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "funcs.py").write_text(FUNCS, encoding="utf-8")
    made = []
    for name in ("same", "doubled"):
        (tmp_path / f"{name}.decomp").write_text(f'handler h = python(function="funcs:{name}")\nmain h\n')
        made.append(decomp.load(f"{name}.decomp").run_dataset(ROWS, run_dir=tmp_path / name, progress=False))
    return made


def test_the_table_and_the_json_are_decomp_compares(runs):
    a, b = runs
    found = decomp.compare(a, b)
    assert repr(found) == found.table() == invoke("compare", a.path, b.path, check=True).stdout.rstrip("\n")
    assert found.to_dict() == json.loads(invoke("compare", a.path, b.path, "--json", check=True).stdout)


def test_every_figure_is_an_attribute(runs):
    found = decomp.compare(runs)  # one list of runs
    assert [run.label for run in found.runs] == ["same", "doubled"] and found.baseline == "same"
    assert found.runs[0].rows == 9 and found.runs[0].metric == "em"
    (em,) = found.comparisons
    assert (em.metric, em.group) == ("em", "all rows")
    assert [(s.run, s.score, s.n) for s in em.scores] == [("same", pytest.approx(6 / 9), 9),
                                                          ("doubled", pytest.approx(3 / 9), 9)]
    (diff,) = em.differences
    assert (diff.run, diff.vs, diff.n) == ("doubled", "same", 9) and diff.difference == pytest.approx(-3 / 9)
    assert diff.ci[0] < diff.difference < diff.ci[1] and 0 < diff.p_value <= 1
    assert (found.seed, found.method, found.resamples, found.confidence) == (0, "BCa", 9999, 0.95)


def test_run_directories_metrics_by_name_and_function_and_settings(runs, tmp_path):
    a, b = runs

    def first_three(row, answer, trace):
        return float(row["id"] in ("r0", "r1", "r2"))

    found = decomp.compare(str(a.path), tmp_path / "doubled", metric=["f1", first_three], seed=3,
                           method="percentile", resamples=500)
    assert [c.metric for c in found.comparisons] == ["f1", found.comparisons[1].metric]
    assert found.comparisons[1].metric.endswith("first_three")
    assert [s.score for s in found.comparisons[1].scores] == [pytest.approx(1 / 3)] * 2
    cli = invoke("compare", a.path, b.path, "--metric", "f1", "--seed", "3", "--method", "percentile",
                 "--resamples", "500", "--json", check=True).stdout
    assert found.comparisons[0] == decomp.compare(a, b, metric="f1", seed=3, method="percentile",
                                                  resamples=500).comparisons[0]
    assert json.loads(cli)["comparisons"][0] == found.to_dict()["comparisons"][0]


def test_to_pandas_has_a_row_per_metric_group_and_run(runs):
    frame = decomp.compare(*runs).to_pandas()
    assert list(frame["run"]) == ["same", "doubled"]
    assert list(frame.columns) == ["metric", "group", "run", "score", "ci_low", "ci_high", "n", "difference",
                                   "diff_ci_low", "diff_ci_high", "p_value", "pairs"]
    assert frame["difference"].isna().tolist() == [True, False]
    assert frame.loc[1, "pairs"] == 9


def test_the_html_page(runs, tmp_path):
    found = decomp.compare(*runs)
    page = found.write_html(tmp_path / "cmp.html")
    assert 'class="comparison" data-metric="em"' in page.read_text(encoding="utf-8")
    with pytest.raises(FileExistsError):
        found.write_html(tmp_path / "cmp.html")


def test_what_cannot_be_compared_is_said(runs, tmp_path):
    a, b = runs
    with pytest.raises(CompareError, match="at least two runs"):
        decomp.compare(a)
    with pytest.raises(TypeError, match=re.escape("compare takes Run objects (Program.run_dataset, decomp.open_run) "
                                                  "or run directories, not int")):
        decomp.compare(a, 3)
    with pytest.raises(FileNotFoundError, match="run 'nope' is not a folder"):
        decomp.compare(a, "nope")
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        decomp.compare(a, b, metric="nope")
    with pytest.raises(CompareError, match="unknown bootstrap method"):
        decomp.compare(a, b, method="normal")
