"""`decomp trace html`: one standalone page of a run directory, checked as text and in a real
headless Chromium (selenium + Debian's chromium and chromium-driver).

Two runs are made once for the module through the command line: `decomp/letter_cat_symbolic`
(no model; one answer full of HTML special characters) and `decomp/letter_cat` against the
in-process mock OpenAI server answering with the benchmarks' oracle, with a row answered wrong
and a row that fails (the decomposer names an unknown handler) and whose prompt holds
`</script><!--<script>`.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.testing.mock_server import MockOpenAIServer
from decomp.runtime.cli import main
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.views.page import decode_text, page_data, render_html, script_json

REPO = Path(__file__).resolve().parents[3]
FEW_SHOT_LINE = 'QC: Take the last letters of the words in "Grace Brewster Hopper" and concatenate them using a space.'
BREAKOUT = "BROKEN </script><!--<script> question"
BAD_LINE = " [nosuch] </script><b>boom</b> & more"
NASTY_ID = 'r<1>&"x"'
NASTY_GOLD = "<b>&amp;</b>"


def _question(position: int, words: str, delimiter: str = "space") -> str:
    return f'Take the letters at position {position} of the words in "{words}" and concatenate them using a {delimiter}.'


def _write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _benchmark(name: str):
    """The module `benchmarks.NAME` (the repository root put on sys.path to import it)."""
    import importlib

    added = str(REPO) not in sys.path
    if added:
        sys.path.insert(0, str(REPO))
    try:
        return importlib.import_module(f"benchmarks.{name}")
    finally:
        if added:
            sys.path.remove(str(REPO))


def _oracle():
    """`benchmarks.letter_cat_oracle.respond`."""
    return _benchmark("letter_cat_oracle").respond


def _responder():
    respond = _oracle()

    def answer(prompt: str, request: dict | None = None) -> str:
        if prompt.endswith("QS:") and "BROKEN" in prompt[prompt.rfind("QC:"):]:
            return BAD_LINE  # an unknown handler: the row fails
        return respond(prompt, request)

    return answer


def _run(*args: str) -> None:
    result = CliRunner().invoke(main, ["run", *args, "--cache", "off"])
    failed = json.loads(result.stdout)["failed"]
    assert result.exit_code == (3 if failed else 0), result.output  # 3: the run finished with rows in error


@pytest.fixture(scope="module")
def symbolic_run(tmp_path_factory) -> RunDir:
    folder = tmp_path_factory.mktemp("symbolic")
    data = _write_rows(folder / "data.jsonl", [
        {"id": "donna", "question": _question(3, "Donna Guan Nascimento"), "answer": "n a s"},
        {"id": "html", "question": _question(1, "<b> &amp; </i>"), "answer": "< & <"},
    ])
    _run("decomp/letter_cat_symbolic", "--input", str(data), "--run-dir", str(folder / "run"))
    return RunDir.open(folder / "run")


@pytest.fixture(scope="module")
def model_run(tmp_path_factory) -> RunDir:
    folder = tmp_path_factory.mktemp("model")
    data = _write_rows(folder / "data.jsonl", [
        {"id": "donna", "question": _question(3, "Donna Guan Nascimento"), "answer": "n a s"},
        {"id": NASTY_ID, "question": _question(2, "Ada Lovelace", "comma"), "answer": NASTY_GOLD},
        {"id": "broken", "question": BREAKOUT, "answer": "x"},
    ])
    with pytest.MonkeyPatch.context() as mp, MockOpenAIServer(responder=_responder()) as server:
        mp.setenv("OPENAI_API_KEY", "sk-dummy")
        _run("decomp/letter_cat_llm", "--input", str(data), "--model", "openai:mock", "--base-url", server.base_url,
             "--run-dir", str(folder / "run"), "--concurrency", "4")
    return RunDir.open(folder / "run")


@pytest.fixture(scope="module")
def model_page(model_run, tmp_path_factory) -> Path:
    page = tmp_path_factory.mktemp("page") / "run.html"
    result = CliRunner().invoke(main, ["trace", "html", str(model_run.path), "-o", str(page)])
    assert result.exit_code == 0, result.output
    return page


def _table(page: str) -> str:
    return page[page.index('<table id="rows"'):page.index("</table>", page.index('<table id="rows"'))]


def _embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page, re.DOTALL)
    return json.loads(m.group(1))


def _decode(node: dict, strings: list[str]) -> dict:
    """An embedded node back in `TraceNode.to_dict` terms (the fields the page shows)."""
    keys = {"k": "kind", "l": "label", "h": "handler", "o": "operator", "at": "location", "q": "query",
            "p": "prompt", "r": "raw_output", "e": "error", "a": "answer"}
    out = {name: decode_text(node.get(key), strings) for key, name in keys.items()}
    out.update(cache_hit=bool(node.get("c")), prompt_tokens=node.get("pt", 0), completion_tokens=node.get("ct", 0))
    out["children"] = [_decode(c, strings) for c in node.get("ch", [])]
    return out


def _walk(node: dict):
    yield node
    for child in node["children"]:
        yield from _walk(child)


# ---------------------------------------------------------------- the page as text
@pytest.mark.network
def test_page_is_standalone(model_page):
    page = model_page.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert "<link" not in page.lower()
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", page, re.IGNORECASE)
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert not re.search(r"@import|url\(\s*['\"]?\s*(?:https?:)?//", page, re.IGNORECASE)
    assert not re.search(r"<(?:img|iframe|object|embed)\b", page, re.IGNORECASE)


@pytest.mark.network
def test_header_shows_program_input_model_and_totals(model_run, model_page):
    page = model_page.read_text(encoding="utf-8")
    assert f'<dd id="program">{model_run.manifest["program"]["path"]}</dd>' in page
    assert f'<dd id="input">{model_run.manifest["input"]["path"]}</dd>' in page
    assert '<dd id="model">openai:mock</dd>' in page
    assert '<div data-key="rows"><dt>rows</dt><dd>3</dd></div>' in page
    assert '<div data-key="failed" class="bad"><dt>failed</dt><dd>1</dd></div>' in page
    calls = sum(r["usage"]["calls"] for r in model_run.records())
    assert f'<div data-key="calls"><dt>calls</dt><dd>{calls}</dd></div>' in page
    assert '<table id="handlers">' in page


@pytest.mark.network
def test_rows_are_listed_with_usage_and_the_failure_marked(model_run, model_page):
    table = _table(model_page.read_text(encoding="utf-8"))
    rows = re.findall(r'<tr class="([^"]*)" data-index="(\d+)" data-id="([^"]*)"', table)
    assert [(int(i), c) for c, i, _ in rows] == [(0, "row"), (1, "row wrong"), (2, "row failed")]
    assert rows[1][2] == "r&lt;1&gt;&amp;&quot;x&quot;"
    for record in model_run.records():
        usage = record["usage"]
        row = re.search(rf'<tr [^>]*data-index="{record["index"]}".*?</tr>', table, re.DOTALL).group(0)
        assert f'<td class="calls">{usage["calls"]}</td>' in row
        assert f'>{usage["prompt_tokens"] + usage["completion_tokens"]}</td>' in row
        assert f'<td class="cache-hits">{usage["cache_hits"]}</td>' in row
        assert f'<td class="score">{record["score"]}</td>' in row
    assert '<td class="answer">n a s</td>' in table and '<td class="answer">d,o</td>' in table
    assert '<td class="status" title="' in table and ">failed</td>" in table


@pytest.mark.network
def test_html_special_characters_are_escaped(symbolic_run, model_page):
    page = render_html(symbolic_run)
    table = _table(page)
    assert '<td class="answer">&lt; &amp; &lt;</td>' in table
    model_table = _table(model_page.read_text(encoding="utf-8"))
    assert '<td class="gold">&lt;b&gt;&amp;amp;&lt;/b&gt;</td>' in model_table
    assert "<b>" not in model_table


@pytest.mark.network
def test_script_end_tag_in_a_prompt_stays_inside_the_json(model_run, model_page):
    page = model_page.read_text(encoding="utf-8")
    assert page.count("</script>") == 2  # the JSON's and the script's own end tags, nothing else
    assert "<!--" not in page
    data = _embedded(page)
    tree = _decode(data["trees"]["2"], data["strings"])
    prompts = [n["prompt"] for n in _walk(tree) if n["prompt"]]
    assert prompts and prompts[0].endswith(f"QC: {BREAKOUT}\nQS:")
    assert any(n["raw_output"] == BAD_LINE for n in _walk(tree))
    assert script_json({"x": "</script></SCRIPT><!--"}) == '{"x":"<\\/script><\\/SCRIPT>\\u003c!--"}'


@pytest.mark.network
def test_embedded_trees_decode_to_the_stored_trees(model_run):
    data = page_data(model_run)
    assert set(data["trees"]) == {"0", "1", "2"}
    for index, tree in model_run.traces():
        want = tree.to_dict()
        got = _decode(data["trees"][str(index)], data["strings"])
        for mine, theirs in zip(_walk(got), _walk(want), strict=True):
            for name in ("kind", "handler", "operator", "location", "query", "prompt", "raw_output", "error"):
                assert mine[name] == (theirs[name] or None), name  # empty texts are left out
            for name in ("cache_hit", "prompt_tokens", "completion_tokens"):
                assert mine[name] == theirs[name], name
            answer = theirs["answer"]
            assert mine["answer"] == (answer if answer is None or isinstance(answer, str)
                                      else json.dumps(answer, ensure_ascii=False))


@pytest.mark.network
def test_repeated_prompts_are_stored_once(model_run, model_page):
    data = _embedded(model_page.read_text(encoding="utf-8"))
    prompts = [n.prompt for _, tree in model_run.traces() for n in tree.walk() if n.prompt]
    assert len(prompts) >= 15
    assert sum(FEW_SHOT_LINE in s for s in data["strings"]) == 1
    stored = sum(len(s) for s in data["strings"])
    assert stored * 2 < sum(len(p) for p in prompts)  # 3 rows; 200 rows: see benchmarks/trace_html.py


def test_a_run_without_rows_renders(tmp_path):
    data = _write_rows(tmp_path / "data.jsonl", [])
    _run("decomp/letter_cat_symbolic", "--input", str(data), "--run-dir", str(tmp_path / "run"))
    page = render_html(RunDir.open(tmp_path / "run"))
    assert "This run has no finished rows." in page and '<tr class="row' not in _table(page)


@pytest.mark.network
def test_cli_refuses_to_overwrite_without_force(model_run, tmp_path):
    page = tmp_path / "page.html"
    page.write_text("old")
    result = CliRunner().invoke(main, ["trace", "html", str(model_run.path), "-o", str(page)])
    assert result.exit_code == 1 and "--force" in result.output and page.read_text() == "old"
    result = CliRunner().invoke(main, ["trace", "html", str(model_run.path), "-o", str(page), "--force"])
    assert result.exit_code == 0 and page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# ---------------------------------------------------------------- the page in Chromium (`browser`: conftest.py)
def _artifacts() -> Path:
    folder = Path(os.environ.get("DECOMP_TEST_ARTIFACTS") or REPO / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def _wait(condition, timeout: float = 30.0):
    """`condition()` once it holds (polled); the timeout only stops a hang, so it is generous."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


@pytest.mark.chromium
@pytest.mark.network
def test_chromium_shows_a_row_tree_and_a_prompt(browser, model_page):
    from selenium.webdriver.common.by import By

    browser.get(model_page.as_uri())
    assert browser.find_element(By.ID, "tree").text == ""
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-index]")
    assert [r.get_attribute("data-index") for r in rows] == ["0", "1", "2"]
    rows[0].click()
    assert "selected" in rows[0].get_attribute("class")
    root = _wait(lambda: browser.find_elements(By.CSS_SELECTOR, '#tree > .node[data-path="0"]'))
    assert root and "open" in root[0].get_attribute("class")
    assert browser.find_element(By.ID, "tree").get_attribute("data-index") == "0"
    assert browser.find_elements(By.CSS_SELECTOR, "#tree pre.prompt") == []  # built only when expanded

    model = browser.find_element(By.CSS_SELECTOR, '#tree .node[data-kind="model"]')
    assert "[letter_cat]" in model.find_element(By.CSS_SELECTOR, ":scope > .node-head .handler").text
    toggle = model.find_element(By.CSS_SELECTOR, ":scope > .node-head > .toggle")
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    prompt = model.find_element(By.CSS_SELECTOR, ":scope > .node-body > pre.prompt")
    raw = model.find_element(By.CSS_SELECTOR, ":scope > .node-body > pre.raw-output")
    assert prompt.is_displayed() and raw.is_displayed()
    # the decomposer shows its 4 examples nearest the question (nearest=4), then the question
    assert prompt.text.startswith("QC: Take the ") and prompt.text.count("QC: ") == 5
    assert prompt.text.rstrip().endswith('QC: ' + _question(3, "Donna Guan Nascimento") + "\nQS:")
    assert raw.text == ' [split] What are the words in "Donna Guan Nascimento"?'
    tokens = model.find_element(By.CSS_SELECTOR, ":scope > .node-head .tokens").text
    assert re.fullmatch(r"\d+/\d+ tok", tokens)
    browser.execute_script("arguments[0].scrollIntoView()", model)
    browser.save_screenshot(str(_artifacts() / "trace_html.png"))

    toggle.click()
    assert not prompt.is_displayed() and "open" not in model.get_attribute("class")
    assert _errors(browser) == []


@pytest.mark.chromium
@pytest.mark.network
def test_chromium_marks_the_failure_and_shows_data_as_text(browser, model_page):
    from selenium.webdriver.common.by import By

    browser.get("about:blank")
    browser.get(model_page.as_uri() + "#row=2")  # the hash selects the row
    failed = browser.find_element(By.CSS_SELECTOR, 'tr[data-index="2"]')
    assert "failed" in failed.get_attribute("class") and "selected" in failed.get_attribute("class")
    red, green, blue = (int(x) for x in re.findall(r"\d+", failed.value_of_css_property("background-color"))[:3])
    assert red > green + 10 and red > blue + 10
    nasty = browser.find_element(By.CSS_SELECTOR, 'tr[data-index="1"]')
    assert nasty.get_attribute("data-id") == NASTY_ID
    assert nasty.find_element(By.CSS_SELECTOR, "td.gold").text == NASTY_GOLD

    browser.find_element(By.ID, "expand-all").click()
    step = browser.find_element(By.CSS_SELECTOR, '#tree .node.failed[data-kind="step"]')
    assert step.find_element(By.CSS_SELECTOR, ":scope > .node-head .query").text == BAD_LINE.split("] ", 1)[1]
    assert "unknown handler [nosuch]" in step.find_element(By.CSS_SELECTOR, ":scope > .node-head .error").text
    assert step.find_element(By.CSS_SELECTOR, ":scope > .node-head .ok").text == "failed"
    prompt = browser.find_element(By.CSS_SELECTOR, "#tree pre.prompt")
    assert prompt.is_displayed() and prompt.text.endswith(f"QC: {BREAKOUT}\nQS:")
    assert browser.find_elements(By.CSS_SELECTOR, "#tree b, #tree script, body > b") == []
    assert browser.find_element(By.ID, "tree-title").text == "Row 2: broken"

    browser.find_element(By.ID, "collapse-all").click()
    assert not prompt.is_displayed()
    assert _errors(browser) == []
