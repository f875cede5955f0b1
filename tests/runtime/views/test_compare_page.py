"""`decomp compare` shown: the text table within 80 columns, the standalone HTML page, and its
SVG charts as headless Chromium draws them."""
from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

from tests.helpers import TEXTCRAFT_DEV
from decomp.runtime.runs.api import RunOptions, run_dataset
from decomp.runtime.scoring.compare import Settings, compare_runs
from decomp.runtime.views.compare import format_table, render_html, write_html

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    """The symbolic TextCraft agents on 12 dev tasks (depth 3 and 4): ADaPT with dmax 4 solves
    the depth-3 ones, with dmax 5 all, ReAct none."""
    root = tmp_path_factory.mktemp("compare")
    lines = TEXTCRAFT_DEV.read_text(encoding="utf-8").splitlines()
    data = root / "tasks.jsonl"
    data.write_text("\n".join(lines[:6] + lines[-6:]) + "\n", encoding="utf-8")
    made = []
    for name, main, fields in [("adapt-dmax4", "textcraft", {"dmax": 4}), ("react", "react", {}),
                               ("adapt-dmax5-with-a-long-folder-name-to-shorten", "textcraft", {"dmax": 5})]:
        run_dataset("adapt/textcraft_symbolic", data, options=RunOptions(cache_mode="off"), main=main,
                    fields=fields, run_dir=root / "deep" / "folders" / name)
        made.append(root / "deep" / "folders" / name)
    return made


@pytest.fixture(scope="module")
def result(runs) -> dict:
    return compare_runs(runs, group_by="recipe_depth", settings=Settings(resamples=999))


def test_the_table_fits_80_columns_and_names_every_figure(result):
    text = format_table(result)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[0] == "runs (A is the baseline; BCa bootstrap, 95% intervals, seed 0):"
    assert re.match(r"  A  .*adapt-dmax4  12 rows  calls 0$", lines[1])
    assert re.match(r"  C  \.\.\..*-to-shorten  12 rows  calls 0$", lines[3])
    assert "env_success - all rows" in lines and "env_success - recipe_depth = 3" in lines
    first = lines.index("env_success - all rows")
    b = result["comparisons"][0]["differences"][0]
    row_b = lines[first + 3]
    assert row_b.startswith("  B    0.000 [0.000, 0.000]      12  -0.500 ")
    assert f"{b['difference']:.3f} [{b['ci'][0]:.3f}, {b['ci'][1]:.3f}]" in row_b
    assert row_b.endswith(f"{b['p_value']:.4f}    12")


def test_the_page_is_standalone_and_holds_a_chart_per_comparison(result):
    page = render_html(result)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert not re.search(r"(src|href)=", page)  # nothing fetched
    sections = re.findall(r'<section class="comparison" data-metric="([^"]+)" data-group="([^"]+)">', page)
    assert sections == [("env_success", "all rows"), ("env_success", "3"), ("env_success", "4")]
    assert page.count('<svg class="scores"') == 3 and page.count('<svg class="differences"') == 3
    assert page.count('<g class="run" data-label="react">') == 3


def test_labels_are_escaped(result):
    hostile = {**result, "runs": [{**r, "path": "<b>&"} for r in result["runs"]],
               "comparisons": [{**c, "metric": "<script>"} for c in result["comparisons"]]}
    page = render_html(hostile)
    assert "<script>" not in page and html.escape("<script>") in page and "&lt;b&gt;&amp;" in page


def test_write_html_refuses_to_overwrite_without_force(result, tmp_path):
    page = tmp_path / "c.html"
    write_html(result, page)
    with pytest.raises(FileExistsError, match="--force"):
        write_html(result, page)
    write_html(result, page, force=True)
    assert page.read_text(encoding="utf-8") == render_html(result)
    with pytest.raises(IsADirectoryError):
        write_html(result, tmp_path)


@pytest.mark.chromium
@pytest.mark.network
def test_chromium_draws_every_point_and_interval(browser, result, tmp_path):
    from selenium.webdriver.common.by import By

    page = tmp_path / "compare.html"
    write_html(result, page)
    browser.get(page.as_uri())
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.scores, svg.differences")
    assert len(charts) == 6
    for chart in charts:
        box = browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];",
                                     chart)
        assert box[0] > 100 and box[1] > 40
    points = browser.find_elements(By.CSS_SELECTOR, "svg circle.point")
    assert len(points) == 3 * (3 + 2)  # per comparison: 3 scores, 2 differences
    for point in points:
        assert point.rect["width"] > 0 and point.rect["height"] > 0
    # intervals of non-zero width are drawn as long as they are: ADaPT dmax 5 minus dmax 4 overall
    overall = browser.find_element(By.CSS_SELECTOR, 'section[data-group="all rows"] svg.differences')
    wide = overall.find_element(By.CSS_SELECTOR, 'g.difference[data-label$="-to-shorten"] line.interval')
    assert wide.rect["width"] > 20
    zero = overall.find_element(By.CSS_SELECTOR, "line.zero")
    assert zero.rect["height"] > 20
    calls = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#runs tr.run td.calls")]
    assert calls == ["0", "0", "0"]
    artifacts = Path(os.environ.get("DECOMP_TEST_ARTIFACTS") or REPO / "test-artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(artifacts / "compare_html.png"))
    assert [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"] == []
