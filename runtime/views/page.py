"""A run directory as one standalone HTML page (`decomp trace html RUN -o PAGE.html`).

The page needs no network: its CSS and JavaScript are inline, it loads no font, script or image.
The header (program, input, model, the run's totals) and the rows' table are written here, in
HTML, escaped; the decomposition trees travel as JSON in a `<script type="application/json">`
element and a row's tree is built by the page's script only when that row is selected (a
node's children, prompt and raw output only when that node is first expanded), so a run of
thousands of rows with long few-shot prompts opens as fast as its table.

The JSON, `{"strings": [...], "trees": {"INDEX": NODE}}`, keeps each text once: a text field
is a number (an entry of `strings`) or a list of numbers (entries to join), texts of several
paragraphs being cut after each blank line, so the few-shot examples every prompt repeats are
stored once. A lone surrogate (text no encoding can write) is shown as its escape `\\ud800`,
in the tables and the trees alike, as `decomp trace show` prints it. A node is an object of
short keys, present only when set:

    k kind, l label, h handler, o operator, at location, q query, p prompt, r raw_output,
    a answer (text: strings as they are, other values as JSON), e error, d details (a note or
    a traceback), f failed (1: a failed outcome), sk skipped (1: a plan step that never ran),
    c cache_hit (1), pt prompt_tokens, ct completion_tokens, s seconds, qs queued (of s, the
    seconds it waited for a slot: shown as "0.102 s + 1.061 s queued"), ch children (nodes)

`</` is written `<\\/` (and `<!--` as `\\u003c!--`) inside the JSON, so no text can end the
script element early. The script writes data with `textContent` only, never `innerHTML`.

What tests (and other tools) can rely on:

    #run-header                   the header; #program, #input, #model hold those values
    #summary [data-key=NAME] dd   one run total (rows, failed, score, calls, prompt_tokens, ...)
    #handlers                     per-handler latency table (when any handler ran): calls, mean
                                  ms (whole), service ms and queue ms (its two parts), seconds
    #models                       per-model latency table (when any model was asked): requests,
                                  mean s, service s, queue s, p95 s
    table#rows tr.row             one per row: data-index, data-id; class `failed` when the row
                                  has an error, else `failed-outcome` when it answered with a
                                  failed outcome (td.status "outcome failed", amber), `wrong` when
                                  scored below 1; `selected` when shown
      td.index td.id td.question td.answer td.gold td.score td.status td.calls td.tokens
                                  td.cache-hits (td.score only when some row has a score;
                                  td.question only when the run's input file is there, as the
                                  run read it: the row's `question`, else its first text input,
                                  cut to QUESTION_WIDTH characters, whole in its title)
    #tree                         the selected row's tree (data-index = that row's index)
    #tree-title                   its heading; #expand-all, #collapse-all buttons
    .node                         a tree node: data-path ("0", "0.2", "0.2.1"), data-kind;
                                  class `failed` when it has an error, `failed-outcome` when it
                                  answered with a failed outcome, `skipped` when a plan step never
                                  ran, `open` when expanded
      .node-head > button.toggle  expands / collapses (aria-expanded); absent on empty leaves
      .node-head spans            .kind .handler .operator .label .location .query .answer
                                  .error .ok .tokens .seconds .cache-hit; .ok reads "ok", "failed"
                                  (red: an error), "failed" with class `outcome-failed` (amber: a
                                  failed outcome) or "skipped" with class `skipped`
      .node-head > details.details  a node's details (a traceback), collapsed; a plan's note is
                                  span.note instead, shown
      .node-body                  built on first expand: details.plan-text (a plan's text),
                                  pre.prompt, pre.raw-output, .children
    script#trace-data             the JSON above
    #row=INDEX in the URL         selects that row (on opening, and when the hash changes)

ADaPT nodes: a `plan` node's .label is its execution order (its planner's text in the body,
collapsed); its groups (`and` / `or`, badged AND / OR) show their own order only when nested;
a plan step (an `item` in a group) shows its label "Step n: text" as .label, not its query; an
`iteration` (one executor turn) shows its badge "turn N", span.action ("> " and the model's
line) and span.observation, and no .ok unless it has an error. Plans and groups show no answer
in their head (their steps show theirs).

The row node and its first-level children that hold no prompt start expanded; every other
node starts collapsed.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from decomp.dsl.text import shorten
from decomp.handlers.files import write_whole
from decomp.runtime.engine import deepjson
from decomp.runtime.storage.datasets import read_rows
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.manifest import sha256_file
from decomp.runtime.storage.rundir import RunDir
#: Texts longer than this are cut into paragraphs (after each blank line) before being stored.
_CUT_ABOVE = 80
_PARAGRAPHS = re.compile(r"(?<=\n\n)")
_TOTALS = ("rows", "failed", "score", "scored_rows", "calls", "cache_hits", "prompt_tokens",
           "completion_tokens", "wall_s", "sessions")
#: Totals shown only when the summary has them (runs whose rows have outcomes, environments).
_OUTCOME_TOTALS = ("failed_outcome", "success_rate", "env_success_rate")
#: The characters of a row's question its cell shows (the whole question is its title).
QUESTION_WIDTH = 80


def render_html(run: RunDir) -> str:
    """The whole page for `run`: header, rows' table, and every stored tree as embedded JSON."""
    records = run.records()
    summary = run.summary()
    data = page_data(run)
    title = f"decomp run: {run.program_name or '?'}"
    return "".join((
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<title>{_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n",
        _header_html(run, summary),
        "<main id=\"panes\">\n<section id=\"rows-pane\">\n",
        _rows_html(records, row_questions(run)),
        "</section>\n<section id=\"tree-pane\">\n",
        "<div id=\"tree-bar\"><h2 id=\"tree-title\">Select a row to see its decomposition tree</h2>",
        "<button type=\"button\" id=\"expand-all\" disabled>Expand all</button>",
        "<button type=\"button\" id=\"collapse-all\" disabled>Collapse all</button></div>\n",
        "<div id=\"tree\"></div>\n</section>\n</main>\n",
        f"<script type=\"application/json\" id=\"trace-data\">{script_json(data)}</script>\n",
        f"<script>{_JS}</script>\n</body>\n</html>\n",
    ))


def write_page(run: RunDir, output: Path, *, force: bool = False) -> None:
    """Write `render_html(run)` to `output` whole or not at all: into a new file in the same
    folder, renamed over `output` once written (a failure leaves no file, or the old page).
    `RunDirError` when `output` exists and not `force`, or names a folder."""
    if output.is_dir():
        raise RunDirError(f"{output} is a folder: name the page's file")
    if output.exists() and not force:
        raise RunDirError(f"{output} exists: pass --force to overwrite it")
    page = render_html(run)
    # `_esc` and the JSON leave no lone surrogate; backslashreplace keeps that a promise
    write_whole(output, page.encode("utf-8", "backslashreplace"))


def row_questions(run: RunDir) -> dict[int, str]:
    """Each row's question, by row index, read again from the run's input file: its `question`,
    else its first text input. None at all when the file is gone, cannot be read, or is no
    longer the one the run read (its sha256 is not run.json's)."""
    section = run.manifest.get("input")
    path, digest = (section.get("path"), section.get("sha256")) if isinstance(section, dict) else (None, None)
    if not isinstance(path, str) or not isinstance(digest, str):
        return {}
    try:
        if sha256_file(Path(path)) != digest:
            return {}
        return {row.index: question for row in read_rows(path)
                if (question := _question(row.fields)) is not None}
    except (OSError, ValueError):
        return {}


def _question(fields: dict | None) -> str | None:
    """A row's question as the rows' table shows it: its `question` (not text: as JSON), else
    its first text input."""
    if not fields:
        return None
    if "question" in fields and fields["question"] is not None:
        return show_value(fields["question"])
    return next((value for value in fields.values() if isinstance(value, str)), None)


def page_data(run: RunDir) -> dict:
    """The JSON the page embeds: the string table and each row's encoded tree, by row index."""
    strings = _Strings()
    trees = {str(index): _encode(tree.to_dict(), strings) for index, tree in run.traces()}
    return {"strings": strings.table, "trees": trees}


def script_json(value: Any) -> str:
    """`value` as JSON that is safe inside a `<script>` element (no `</`, no `<!--`), however
    deeply nested (the trees of deep recursions)."""
    text = deepjson.dumps(value, separators=(",", ":"), default=str)
    return text.replace("</", "<\\/").replace("<!--", "\\u003c!--")


def decode_text(ref: int | list[int] | None, strings: list[str]) -> str | None:
    """A text field of `page_data`'s nodes back as text (what the page's script does)."""
    if ref is None:
        return None
    return strings[ref] if isinstance(ref, int) else "".join(strings[i] for i in ref)


def show_value(value: Any) -> str:
    """An answer as the page shows it: a string as it is, None as "", anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except RecursionError:  # nested deeper than Python's encoder goes
        return deepjson.dumps(value, default=str)


def shown(text: str) -> str:
    """`text` as the page shows it: each lone surrogate (text no encoding can write, from a data
    row or a model reply) as its escape `\\ud800`, as `decomp trace show` prints it."""
    return _SURROGATE.sub(_surrogate_escape, text) if _SURROGATE.search(text) else text


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_escape(found: re.Match) -> str:
    return f"\\u{ord(found.group()):04x}"


# ---------------------------------------------------------------- the JSON
class _Strings:
    """Interned texts: each distinct text (or paragraph of a long text) stored once."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self._ids: dict[str, int] = {}

    def one(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self.table)
            self.table.append(shown(text))
        return found

    def ref(self, text: str) -> int | list[int]:
        """A number for a short text or a text of one paragraph, else a list of numbers."""
        if len(text) <= _CUT_ABOVE or "\n\n" not in text:
            return self.one(text)
        return [self.one(part) for part in _PARAGRAPHS.split(text) if part]


_TEXT_KEYS = (("kind", "k"), ("label", "l"), ("handler", "h"), ("operator", "o"), ("location", "at"),
              ("query", "q"), ("prompt", "p"), ("raw_output", "r"), ("error", "e"), ("details", "d"))


def _encode(tree: dict, strings: _Strings) -> dict:
    """The page's form of a tree (`TraceNode.to_dict`): every node `_encode_node`, children under
    "ch" (no recursion: trees may be thousands of levels deep)."""
    root = _encode_node(tree, strings)
    stack = [(tree, root)]
    while stack:
        node, out = stack.pop()
        if node.get("children"):
            out["ch"] = [_encode_node(child, strings) for child in node["children"]]
            stack.extend(zip(node["children"], out["ch"]))
    return root


def _encode_node(node: dict, strings: _Strings) -> dict:
    out: dict[str, Any] = {}
    for name, key in _TEXT_KEYS:
        value = node.get(name)
        if value is not None and (value != "" or name == "kind"):
            out[key] = strings.ref(str(value))
    if node.get("answer") is not None:
        out["a"] = strings.ref(show_value(node["answer"]))
    for name, key in (("failed", "f"), ("skipped", "sk"), ("cache_hit", "c")):
        if node.get(name):
            out[key] = 1
    for name, key in (("prompt_tokens", "pt"), ("completion_tokens", "ct")):
        if node.get(name):
            out[key] = node[name]
    if node.get("seconds") is not None:
        out["s"] = round(node["seconds"], 6)
    if node.get("queued"):
        out["qs"] = round(node["queued"], 6)
    return out


# ---------------------------------------------------------------- the HTML written here
def _esc(value: Any) -> str:
    return html.escape(shown("" if value is None else str(value)), quote=True)


def _header_html(run: RunDir, summary: dict) -> str:
    facts = [("program", run.program_path), ("input", run.input_path), ("model", run.model)]
    parts = ["<header id=\"run-header\">\n<h1>decomp run</h1>\n<dl id=\"run-facts\">"]
    parts += [f"<div><dt>{name}</dt><dd id=\"{name}\">{_esc(value)}</dd></div>" for name, value in facts]
    parts.append("</dl>\n<dl id=\"summary\">")
    for key in _TOTALS + tuple(k for k in _OUTCOME_TOTALS if k in summary):
        value = summary.get(key)
        bad = (" class=\"bad\"" if key == "failed" and value else
               " class=\"warn\"" if key == "failed_outcome" and value else "")
        parts.append(f"<div data-key=\"{key}\"{bad}><dt>{key.replace('_', ' ')}</dt>"
                     f"<dd>{_esc('' if value is None else value)}</dd></div>")
    parts.append("</dl>\n")
    parts.append(_handlers_html(summary.get("handlers") or {}))
    parts.append(_models_html(summary.get("models") or {}))
    parts.append("</header>\n")
    return "".join(parts)


#: The latency tables' columns: (heading, the summary's key), per handler and per model.
_HANDLER_COLUMNS = (("calls", "calls"), ("mean ms", "mean_ms"), ("service ms", "service_mean_ms"),
                    ("queue ms", "queue_mean_ms"), ("seconds", "seconds"))
_MODEL_COLUMNS = (("requests", "requests"), ("mean s", "mean_s"), ("service s", "service_mean_s"),
                  ("queue s", "queue_mean_s"), ("p95 s", "p95_s"))


def _handlers_html(handlers: dict) -> str:
    return _latency_html("handlers", "Handlers", "handler", _HANDLER_COLUMNS, handlers)


def _models_html(models: dict) -> str:
    return _latency_html("models", "Models", "model", _MODEL_COLUMNS, models)


def _latency_html(key: str, title: str, what: str, columns: tuple, entries: dict) -> str:
    """A collapsed table of `entries` (a summary's handlers or models): a row each, the columns'
    figures (a summary of another version may lack some: blank)."""
    if not entries:
        return ""
    rows = "".join(f"<tr><td>{_esc(name)}</td>" + "".join(f"<td>{_esc(figures.get(field))}</td>"
                                                            for _, field in columns) + "</tr>"
                   for name, figures in entries.items() if isinstance(figures, dict))
    heads = "".join(f"<th>{heading}</th>" for heading in (what, *(heading for heading, _ in columns)))
    return (f"<details id=\"{key}-box\"><summary>{title}</summary><table id=\"{key}\"><thead><tr>{heads}</tr>"
            f"</thead><tbody>{rows}</tbody></table></details>\n")


def _rows_html(records: list[dict], questions: dict[int, str] | None = None) -> str:
    scored = any("score" in r for r in records)
    questions = questions or {}
    asked = any(r.get("index") in questions for r in records)
    heads = ["#", "id", *(["question"] if asked else []), "answer", "gold", *(["score"] if scored else []),
             "status", "calls", "tokens", "cache hits"]
    parts = ["<table id=\"rows\"><thead><tr>", *(f"<th>{h}</th>" for h in heads), "</tr></thead><tbody>\n"]
    parts += [_row_html(record, scored, questions.get(record.get("index"), "") if asked else None)
              for record in records]
    if not records:
        parts.append(f"<tr class=\"empty\"><td colspan=\"{len(heads)}\">This run has no finished rows.</td></tr>")
    parts.append("</tbody></table>\n")
    return "".join(parts)


def _row_html(record: dict, scored: bool, question: str | None = None) -> str:
    """A row's line of the table; `question`: its question cell's text (None: no such column)."""
    usage = record.get("usage") or {}
    failed = "error" in record
    failed_outcome = not failed and record.get("outcome") == "failed"
    score = record.get("score")
    classes = (["row"] + (["failed"] if failed else []) + (["failed-outcome"] if failed_outcome else [])
               + (["wrong"] if not failed and score is not None and score < 1 else []))
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    status = (f"<td class=\"status\" title=\"{_esc(record['error'])}\">failed</td>" if failed
              else "<td class=\"status\" title=\"answered, but its outcome failed\">outcome failed</td>"
              if failed_outcome else "<td class=\"status\">ok</td>")
    cells = [
        f"<td class=\"index\">{_esc(record['index'])}</td>",
        f"<td class=\"id\">{_esc(record.get('id'))}</td>",
        *([_question_cell(question)] if question is not None else []),
        f"<td class=\"answer\">{_esc(show_value(record.get('answer')))}</td>",
        f"<td class=\"gold\">{_esc(show_value(record.get('gold')))}</td>",
        *([f"<td class=\"score\">{_esc(score)}</td>"] if scored else []),
        status,
        f"<td class=\"calls\">{_esc(usage.get('calls', 0))}</td>",
        (f"<td class=\"tokens\" title=\"{_esc(prompt)} prompt + {_esc(completion)} completion\">"
         f"{_esc(prompt + completion)}</td>"),
        f"<td class=\"cache-hits\">{_esc(usage.get('cache_hits', 0))}</td>",
    ]
    return (f"<tr class=\"{' '.join(classes)}\" data-index=\"{_esc(record['index'])}\" "
            f"data-id=\"{_esc(record.get('id'))}\" tabindex=\"0\">{''.join(cells)}</tr>\n")


def _question_cell(question: str) -> str:
    """The question cut to `QUESTION_WIDTH` characters, whole in the cell's title."""
    return f"<td class=\"question\" title=\"{_esc(question)}\">{_esc(shorten(question, QUESTION_WIDTH))}</td>"


_CSS = """
:root { --fg: #1d2127; --muted: #68707c; --line: #d8dce2; --bg: #fff; --soft: #f4f6f9;
  --red: #b3261e; --red-bg: #fde7e6; --amber-bg: #fff6dc; --sel: #dceafe; --accent: #1a5fb4;
  --amber: #a85b00; --orange-bg: #ffedd5; }
* { box-sizing: border-box; }
html, body { height: 100%; }
body { display: flex; flex-direction: column; margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { padding: 12px 16px; border-bottom: 1px solid var(--line); background: var(--soft); }
h1 { font-size: 18px; margin: 0 0 6px; }
h2 { font-size: 15px; margin: 0; flex: 1; }
dl { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 4px 0; }
dl > div { display: flex; gap: 6px; }
dt { color: var(--muted); }
dd { margin: 0; font-weight: 600; word-break: break-all; }
#run-facts dd { font-family: ui-monospace, Menlo, Consolas, monospace; font-weight: normal; }
#summary .bad dd { color: var(--red); }
#summary .warn dd { color: var(--amber); }
details#handlers-box { margin-top: 4px; }
table { border-collapse: collapse; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { position: sticky; top: 0; background: var(--soft); z-index: 1; }
#panes { display: grid; grid-template-columns: minmax(320px, 45%) minmax(0, 1fr); flex: 1; min-height: 300px; }
/* size containment: a new tree lays out its pane only, not the rows' table (60 ms -> 1 ms at 200 rows) */
#rows-pane, #tree-pane { contain: strict; overflow: auto; }
#rows-pane { border-right: 1px solid var(--line); }
#tree-pane { padding: 8px 12px; }
#rows { width: 100%; }
#rows td.answer, #rows td.gold, #rows td.id { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap; word-break: break-word; }
#rows td.question { word-break: break-word; }
#rows td.index, #rows td.calls, #rows td.tokens, #rows td.cache-hits, #rows td.score { text-align: right; }
tr.row { cursor: pointer; }
tr.row:hover { background: var(--soft); }
tr.row.wrong { background: var(--amber-bg); }
tr.row.failed { background: var(--red-bg); }
tr.row.failed td.status { color: var(--red); font-weight: 600; }
tr.row.selected { background: var(--sel); outline: 2px solid var(--accent); outline-offset: -2px; }
tr.row.failed.selected { background: var(--red-bg); }
tr.row.failed-outcome { background: var(--orange-bg); }
tr.row.failed-outcome td.status { color: var(--amber); font-weight: 600; }
tr.row.failed-outcome.selected { background: var(--orange-bg); }
#tree-bar { display: flex; gap: 8px; align-items: center; margin-bottom: 8px; }
#tree-bar.failed h2 { color: var(--red); }
#tree-bar.failed-outcome h2 { color: var(--amber); }
/* 18px a level (an ADaPT tree nests 25 deep); a head keeps its width: a deep tree scrolls sideways */
.node { margin-left: 12px; border-left: 1px solid var(--line); padding-left: 6px; }
#tree > .node { margin-left: 0; border-left: none; padding-left: 0; }
.node-head { display: flex; flex-wrap: wrap; gap: 2px 8px; align-items: baseline; padding: 2px 0; min-width: 26em; }
.node-head > span { white-space: pre-wrap; word-break: break-word; }
.toggle { width: 22px; padding: 0; border: 1px solid var(--line); background: var(--bg); border-radius: 3px; cursor: pointer; font-size: 11px; }
.toggle-space { display: inline-block; width: 22px; }
.node-head .kind { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: #fff; background: #5e6b7d; border-radius: 3px; padding: 0 4px; }
.node[data-kind="model"] > .node-head .kind { background: #6b3fa0; }
.node[data-kind="row"] > .node-head .kind { background: #2b6a3f; }
.node[data-kind="step"] > .node-head .kind { background: #1a5fb4; }
.node[data-kind="plan"] > .node-head .kind { background: #7a4f00; }
.node[data-kind="and"] > .node-head .kind, .node[data-kind="or"] > .node-head .kind { background: #fff; color: #7a4f00; border: 1px solid #c9a25a; font-weight: 700; }
.node[data-kind="iteration"] > .node-head .kind { background: #e8ebf0; color: var(--muted); text-transform: none; }
.node[data-kind="plan"] > .node-head .label { font-weight: 600; }
.node-head .handler { font-weight: 600; }
.node-head .operator, .node-head .location, .node-head .seconds, .node-head .tokens { color: var(--muted); font-size: 12px; }
.node-head .location { font-family: ui-monospace, Menlo, Consolas, monospace; }
.node-head .query, .node-head .answer, .node-head .label { font-family: ui-monospace, Menlo, Consolas, monospace; }
/* a long answer (ADaPT's nested list of attempts, at every level) scrolls in 5 lines */
.node-head .answer { max-height: 7em; overflow: auto; }
.node-head .answer::before { content: "\\2192  "; color: var(--muted); }
.node-head .error { color: var(--red); font-weight: 600; }
.node-head .ok { font-size: 11px; color: #2b6a3f; }
.node.failed > .node-head .ok { color: var(--red); font-weight: 600; }
.node.failed > .node-head { background: var(--red-bg); }
.node.failed-outcome { border-left-color: #e0a040; }
.node-head .ok.outcome-failed { color: #fff; background: var(--amber); border-radius: 3px; padding: 0 4px; font-weight: 600; }
.node.failed-outcome > .node-head .answer { color: var(--amber); }
.node.skipped > .node-head { opacity: .55; }
.node-head .ok.skipped { color: var(--muted); font-style: italic; }
.node-head .note { color: var(--amber); font-style: italic; }
.node-head .action, .node-head .observation { font-family: ui-monospace, Menlo, Consolas, monospace; }
.node-head .action { font-weight: 600; }
.node-head .observation { color: var(--muted); flex: 1 1 0; min-width: 12em; }
.node[data-kind="iteration"] > .node-head .kind { white-space: nowrap; }
.node[data-kind="iteration"] > .node-head { flex-wrap: nowrap; }
.node-head .observation::before { content: "\\2192  "; }
.node-head > details.details { flex-basis: 100%; margin-left: 28px; font-size: 12px; }
details.details > summary, details.plan-text > summary { color: var(--muted); cursor: pointer; }
.node-head .cache-hit { font-size: 11px; background: #e6f4ea; color: #2b6a3f; border-radius: 3px; padding: 0 4px; }
.node-body { padding: 2px 0 4px 0; }
.node-body > :not(.children) { margin-left: 28px; }
.block-title { font-size: 11px; color: var(--muted); margin-top: 4px; }
pre.prompt, pre.raw-output, pre.details, pre.plan-text { margin: 2px 0 6px; padding: 6px 8px; background: var(--soft); border: 1px solid var(--line); border-radius: 4px;
  white-space: pre-wrap; word-break: break-word; font: 12px/1.35 ui-monospace, Menlo, Consolas, monospace; max-height: 480px; overflow: auto; }
pre.raw-output { background: #f3effa; }
.node.failed pre.details { background: var(--red-bg); }
.muted { color: var(--muted); }
"""

_JS = r"""
(function () {
  "use strict";
  var DATA = null, current = null;
  function data() {
    if (DATA === null) { DATA = JSON.parse(document.getElementById("trace-data").textContent); }
    return DATA;
  }
  function text(ref) {
    if (ref === undefined || ref === null) { return null; }
    var S = data().strings;
    if (typeof ref === "number") { return S[ref]; }
    var out = "";
    for (var i = 0; i < ref.length; i++) { out += S[ref[i]]; }
    return out;
  }
  function el(tag, cls, content) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (content !== undefined && content !== null) { e.textContent = content; }
    return e;
  }
  function span(head, cls, content, title) {
    var s = el("span", cls, content);
    if (title) { s.title = title; }
    head.appendChild(s);
  }
  function expandable(n) { return !!(n.p !== undefined || n.r !== undefined || (n.ch && n.ch.length) || (planText(n) !== null)); }
  function planText(n) { return text(n.k) === "plan" && n.q !== undefined ? text(n.q) : null; }
  var GROUPS = { "and": 1, "or": 1 };
  function startsOpen(n, depth) { return depth === 0 || (depth === 1 && n.p === undefined && !!(n.ch && n.ch.length)); }

  function renderNode(n, depth, path, parent, turn) {
    var node = el("div", "node");
    node.dataset.path = path;
    var kind = text(n.k) || "";
    var parentKind = parent ? text(parent.k) : null;
    node.dataset.kind = kind;
    if (n.e !== undefined) { node.classList.add("failed"); }
    else if (n.f) { node.classList.add("failed-outcome"); }
    if (n.sk) { node.classList.add("skipped"); }
    var head = el("div", "node-head");
    node.appendChild(head);
    if (expandable(n)) {
      var toggle = el("button", "toggle", "\u25B8");
      toggle.type = "button";
      toggle.setAttribute("aria-expanded", "false");
      toggle.title = "expand / collapse";
      toggle.addEventListener("click", function (ev) { ev.stopPropagation(); setOpen(node, n, depth, !node.classList.contains("open")); });
      head.appendChild(toggle);
    } else {
      head.appendChild(el("span", "toggle-space"));
    }
    var query = text(n.q), label = text(n.l), details = text(n.d);
    if (kind === "iteration") {  // one executor turn: the model's line and what it saw
      span(head, "kind", "turn " + (turn || 1));
      span(head, "action", "> " + (label || ""));
      if (n.a !== undefined) { span(head, "observation", text(n.a)); }
    } else {
      span(head, "kind", kind);
      if (n.h !== undefined) { span(head, "handler", "[" + text(n.h) + "]"); }
      if (n.o !== undefined) { span(head, "operator", text(n.o)); }
      var planStep = kind === "item" && GROUPS[parentKind] && label;
      if (kind === "plan") { span(head, "label", label || "(no order)"); query = null; }
      else if (GROUPS[kind]) { if (label && !(parent && text(parent.l) === label)) { span(head, "label", label); } }
      else if (planStep) { span(head, "label", label); query = null; }
      else if (label && (!query || label.indexOf(query) < 0)) { span(head, "label", label); }
      if (n.at !== undefined) { span(head, "location", text(n.at)); }
      if (query !== null) { span(head, "query", query); }
      if (n.a !== undefined && kind !== "plan" && !GROUPS[kind]) { span(head, "answer", text(n.a)); }
    }
    if (n.e !== undefined) { span(head, "error", text(n.e)); }
    if (n.e !== undefined) { span(head, "ok", "failed"); }
    else if (kind === "iteration") { /* a turn: its observation says how it went */ }
    else if (n.sk) { span(head, "ok skipped", "skipped"); }
    else if (n.f) { span(head, "ok outcome-failed", "failed", "answered, but its outcome failed (not an error)"); }
    else { span(head, "ok", "ok"); }
    if (n.pt || n.ct) { span(head, "tokens", (n.pt || 0) + "/" + (n.ct || 0) + " tok", "prompt / completion tokens"); }
    if (n.s !== undefined && n.qs >= 0.0005) {  // a wait the 3 decimals show
      span(head, "seconds", (n.s - n.qs).toFixed(3) + " s + " + n.qs.toFixed(3) + " s queued",
           "the time it ran (its service time) + the time it waited for a slot");
    } else if (n.s !== undefined) { span(head, "seconds", n.s.toFixed(3) + " s"); }
    if (n.c) { span(head, "cache-hit", "cache hit"); }
    if (details !== null && kind === "plan") { span(head, "note", "note: " + details); }
    else if (details !== null) { head.appendChild(collapsed("details", /^Traceback/.test(details) ? "traceback" : "details", details)); }
    node._n = n; node._depth = depth;
    if (startsOpen(n, depth) && expandable(n)) { setOpen(node, n, depth, true); }
    return node;
  }

  function collapsed(cls, title, content) {
    var box = el("details", cls);
    box.appendChild(el("summary", null, title));
    box.appendChild(el("pre", cls, content));
    return box;
  }

  function buildBody(node, n, depth) {
    var body = el("div", "node-body");
    var plan = planText(n);
    if (plan !== null) { body.appendChild(collapsed("plan-text", "plan text", plan)); }
    if (n.p !== undefined) {
      body.appendChild(el("div", "block-title", "prompt"));
      body.appendChild(el("pre", "prompt", text(n.p)));
    }
    if (n.r !== undefined) {
      body.appendChild(el("div", "block-title", "raw output"));
      body.appendChild(el("pre", "raw-output", text(n.r)));
    }
    if (n.ch && n.ch.length) {
      var kids = el("div", "children");
      var turn = 0;
      for (var i = 0; i < n.ch.length; i++) {
        if (text(n.ch[i].k) === "iteration") { turn++; }
        kids.appendChild(renderNode(n.ch[i], depth + 1, node.dataset.path + "." + i, n, turn));
      }
      body.appendChild(kids);
    }
    node.appendChild(body);
    return body;
  }

  function setOpen(node, n, depth, open) {
    var body = node.querySelector(":scope > .node-body");
    if (open && !body) { body = buildBody(node, n, depth); }
    if (body) { body.hidden = !open; }
    node.classList.toggle("open", open);
    var toggle = node.querySelector(":scope > .node-head > .toggle");
    if (toggle) { toggle.setAttribute("aria-expanded", open ? "true" : "false"); toggle.textContent = open ? "\u25BE" : "\u25B8"; }
  }

  function setAll(open) {
    var root = document.querySelector("#tree > .node");
    if (!root) { return; }
    var stack = [root];
    while (stack.length) {
      var node = stack.pop();
      if (!node._n || !expandable(node._n)) { continue; }
      if (open || node !== root) { setOpen(node, node._n, node._depth, open); }
      var kids = node.querySelectorAll(":scope > .node-body > .children > .node");
      for (var i = 0; i < kids.length; i++) { stack.push(kids[i]); }
    }
  }

  function select(tr) {
    if (!tr) { return; }
    if (current) { current.classList.remove("selected"); }
    current = tr;
    tr.classList.add("selected");
    var index = tr.dataset.index, tree = document.getElementById("tree");
    var title = document.getElementById("tree-title"), bar = document.getElementById("tree-bar");
    tree.textContent = "";
    tree.dataset.index = index;
    title.textContent = "Row " + index + ": " + tr.dataset.id;
    bar.classList.toggle("failed", tr.classList.contains("failed"));
    bar.classList.toggle("failed-outcome", tr.classList.contains("failed-outcome"));
    var n = data().trees[index];
    document.getElementById("expand-all").disabled = !n;
    document.getElementById("collapse-all").disabled = !n;
    if (n) { tree.appendChild(renderNode(n, 0, "0", null, 0)); }
    else { tree.appendChild(el("p", "muted", "No trace is stored for this row.")); }
    if (history.replaceState) { history.replaceState(null, "", "#row=" + index); }
  }

  var rows = document.getElementById("rows");
  rows.addEventListener("click", function (ev) { select(ev.target.closest("tr.row")); });
  rows.addEventListener("keydown", function (ev) {
    var tr = ev.target.closest("tr.row");
    if (!tr) { return; }
    if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select(tr); }
    else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      var next = ev.key === "ArrowDown" ? tr.nextElementSibling : tr.previousElementSibling;
      if (next && next.classList.contains("row")) { ev.preventDefault(); next.focus(); select(next); }
    }
  });
  document.getElementById("expand-all").addEventListener("click", function () { setAll(true); });
  document.getElementById("collapse-all").addEventListener("click", function () { setAll(false); });
  function fromHash() {
    var m = /^#row=(-?\d+)$/.exec(location.hash);
    if (m) { select(rows.querySelector('tr.row[data-index="' + m[1] + '"]')); }
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
"""
