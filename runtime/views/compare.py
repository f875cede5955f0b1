"""`decomp compare` shown: a text table that fits 80 columns, and a standalone HTML page whose
charts (inline SVG: no script, no font, no network) draw each run's score and each paired
difference from the baseline with its confidence interval. Both read the JSON-ready result of
`decomp.runtime.scoring.compare.compare_runs`.

What tests (and other tools) can rely on in the page:

    #runs tr.run                  one per run: data-label; td.calls, td.cost (when known)
    section.comparison            one per metric and group: data-metric, data-group
      svg.scores                  a run's score: g.run[data-label] > line.interval, circle.point
      svg.differences             a run minus the baseline: g.difference[data-label] >
                                  line.interval, circle.point; line.zero at no difference
      table.numbers               the same figures as text
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from decomp.handlers.files import write_whole

WIDTH = 80
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def letter(i: int) -> str:
    """The short name of the `i`-th run in the table: A (the baseline), B, C, ..."""
    return _LETTERS[i] if i < len(_LETTERS) else f"R{i + 1}"


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return f"{p:.4f}" if p >= 0.0001 else "<.0001"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3):]


def _group(result: dict, comparison: dict) -> str:
    """A comparison's rows in words: `all rows`, or `recipe_depth = 3`."""
    field = result.get("group_by")
    return f"{field} = {comparison['group']}" if field and comparison["group"] != "all rows" else comparison["group"]


def format_table(result: dict) -> str:
    """The comparison as plain text, no line longer than 80 columns: the runs (letters, paths,
    rows, calls and cost), then per metric and group each run's score with its interval and,
    for every run after the first, its difference from the baseline, interval, p-value and the
    number of paired rows."""
    letters = {run["label"]: letter(i) for i, run in enumerate(result["runs"])}
    lines = [f"runs (A is the baseline; {result['method']} bootstrap, {int(result['confidence'] * 100)}% "
             f"intervals, seed {result['seed']}):"]
    for run in result["runs"]:
        extra = f"  {run['rows']} rows" + (f"  calls {run['calls']}" if "calls" in run else "")
        extra += f"  cost {run['cost']:.4g}" if "cost" in run else ""
        prefix = f"  {letters[run['label']]}  "
        lines.append(prefix + _cut(run["path"], max(10, WIDTH - len(prefix) - len(extra))) + extra)
    header = f"  {'run':<3} {'score':>6} {'interval':<16} {'n':>5}  {'diff':>6} {'interval':<16} {'p':>6} {'pairs':>5}"
    for comparison in result["comparisons"]:
        lines += ["", _cut(f"{comparison['metric']} - {_group(result, comparison)}", WIDTH), header]
        differences = {d["run"]: d for d in comparison["differences"]}
        notes = []
        for score in comparison["scores"]:
            line = f"  {letters[score['run']]:<3} {_number(score['score']):>6} {_ci(score['ci']):<16} {score['n']:>5}"
            diff = differences.get(score["run"])
            if diff is not None:
                line += (f"  {_number(diff['difference']):>6} {_ci(diff['ci']):<16} {_p(diff['p_value']):>6} "
                         f"{diff['n']:>5}")
                if diff.get("note"):
                    notes.append(f"  {letters[score['run']]}-A: {diff['note']}")
            lines.append(line.rstrip())
        lines += [_cut(note, WIDTH) for note in notes]
    errors = result.get("metric_errors") or []
    if errors:
        lines += ["", f"metric errors: {len(errors)} row(s) scored 0 (each named on stderr):"]
        lines += [_cut(f"  {letters.get(run, run)}: {metric} failed on {n} row(s)", WIDTH)
                  for (metric, run), n in _errors_by(errors).items()]
    return "\n".join(lines)


def _errors_by(errors: list[dict]) -> dict[tuple[str, str], int]:
    """How many rows each metric failed on in each run."""
    counts: dict[tuple[str, str], int] = {}
    for error in errors:
        key = (error["metric"], error["run"])
        counts[key] = counts.get(key, 0) + 1
    return counts


# --- the HTML page ---------------------------------------------------------------------------

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1em; }
td, th { padding: 2px 10px; text-align: right; border-bottom: 1px solid #ddd; }
td.label, th.label, td.path { text-align: left; }
section.comparison { margin-bottom: 2em; }
svg { display: block; margin: .3em 0; }
svg text { font: 12px system-ui, sans-serif; fill: #222; }
line.interval { stroke: #2563eb; stroke-width: 2; }
circle.point { fill: #2563eb; }
g.difference line.interval { stroke: #c2410c; }
g.difference circle.point { fill: #c2410c; }
line.zero, line.axis { stroke: #888; stroke-width: 1; }
line.zero { stroke-dasharray: 4 3; }
"""

_SVG_W, _LEFT, _RIGHT, _ROW_H, _TOP = 640, 170, 30, 26, 24


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _scale(low: float, high: float):
    span = (high - low) or 1.0
    width = _SVG_W - _LEFT - _RIGHT
    return lambda v: _LEFT + (v - low) / span * width


def _bounds(items: list[dict], key: str, floor: float, ceiling: float) -> tuple[float, float]:
    values = [floor, ceiling]
    for item in items:
        if item.get(key) is not None:
            values.append(item[key])
        values += item.get("ci") or []
    return min(values), max(values)


def _svg(cls: str, items: list[dict], key: str, names: list[str], bounds: tuple[float, float],
         group_cls: str, zero: bool) -> str:
    x = _scale(*bounds)
    height = _TOP + _ROW_H * len(items) + 22
    parts = [f'<svg class="{cls}" width="{_SVG_W}" height="{height}" viewBox="0 0 {_SVG_W} {height}" '
             f'role="img" aria-label="{_esc(cls)}">',
             f'<line class="axis" x1="{_LEFT}" x2="{_SVG_W - _RIGHT}" y1="{height - 20}" y2="{height - 20}"/>']
    for tick in (bounds[0], (bounds[0] + bounds[1]) / 2, bounds[1]):
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 5}" text-anchor="middle">{tick:.2f}</text>')
    if zero and bounds[0] <= 0 <= bounds[1]:
        parts.append(f'<line class="zero" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{_TOP - 14}" y2="{height - 20}"/>')
    for row, (item, name) in enumerate(zip(items, names)):
        y = _TOP + row * _ROW_H
        parts.append(f'<g class="{group_cls}" data-label="{_esc(item["run"])}">'
                     f'<text x="{_LEFT - 8}" y="{y + 4}" text-anchor="end">{_esc(name)}</text>')
        if item.get("ci"):
            low, high = item["ci"]
            parts.append(f'<line class="interval" x1="{x(low):.1f}" x2="{max(x(high), x(low) + 2):.1f}" '
                         f'y1="{y}" y2="{y}"/>')
        if item.get(key) is not None:
            parts.append(f'<circle class="point" cx="{x(item[key]):.1f}" cy="{y}" r="5">'
                         f'<title>{_esc(name)}: {item[key]:.3f} {_ci(item.get("ci"))}</title></circle>')
        parts.append("</g>")
    return "".join(parts) + "</svg>"


def _comparison_html(result: dict, comparison: dict, letters: dict[str, str]) -> str:
    scores, differences = comparison["scores"], comparison["differences"]
    score_names = [f"{letters[s['run']]} {s['run']}"[:24] for s in scores]
    diff_names = [f"{letters[d['run']]} - A"[:24] for d in differences]
    parts = [f'<section class="comparison" data-metric="{_esc(comparison["metric"])}" '
             f'data-group="{_esc(comparison["group"])}">',
             f'<h2>{_esc(comparison["metric"])} &middot; {_esc(_group(result, comparison))}</h2>',
             "<h3>Scores</h3>",
             _svg("scores", scores, "score", score_names, _bounds(scores, "score", 0.0, 1.0), "run", False)]
    if differences:
        bounds = _bounds(differences, "difference", -0.1, 0.1)
        parts += ["<h3>Difference from A (paired)</h3>",
                  _svg("differences", differences, "difference", diff_names, bounds, "difference", True)]
    parts.append(_numbers_html(scores, differences, letters))
    return "\n".join(parts) + "\n</section>"


def _numbers_html(scores: list[dict], differences: list[dict], letters: dict[str, str]) -> str:
    by_run = {d["run"]: d for d in differences}
    rows = ['<table class="numbers"><tr><th class="label">run</th><th>score</th><th>interval</th><th>n</th>'
            '<th>difference</th><th>interval</th><th>p</th><th>pairs</th><th class="label">note</th></tr>']
    for score in scores:
        diff = by_run.get(score["run"], {})
        cells = [letters[score["run"]] + " " + score["run"], _number(score["score"]), _ci(score["ci"]), score["n"],
                 _number(diff.get("difference")) if diff else "", _ci(diff.get("ci")) if diff else "",
                 _p(diff.get("p_value")) if diff else "", diff.get("n", ""), diff.get("note", "")]
        rows.append("<tr>" + "".join(f'<td{" class=label" if i in (0, 8) else ""}>{_esc(c)}</td>'
                                      for i, c in enumerate(cells)) + "</tr>")
    return "".join(rows) + "</table>"


def _runs_html(result: dict, letters: dict[str, str]) -> str:
    rows = ['<table id="runs"><tr><th class="label">run</th><th class="label">path</th><th>rows</th>'
            '<th>calls</th><th>cost</th></tr>']
    for run in result["runs"]:
        rows.append(f'<tr class="run" data-label="{_esc(run["label"])}"><td class="label">'
                    f'{_esc(letters[run["label"]])} {_esc(run["label"])}</td><td class="path">{_esc(run["path"])}</td>'
                    f'<td class="rows">{run["rows"]}</td><td class="calls">{_esc(run.get("calls", "-"))}</td>'
                    f'<td class="cost">{_esc(run.get("cost", "-"))}</td></tr>')
    return "".join(rows) + "</table>"


def render_html(result: dict) -> str:
    """The comparison as one standalone HTML page (see the module's text for its parts)."""
    letters = {run["label"]: letter(i) for i, run in enumerate(result["runs"])}
    intro = (f"A is the baseline. Intervals: {int(result['confidence'] * 100)}% {_esc(result['method'])} "
             f"bootstrap, {result['resamples']} resamples, seed {result['seed']}; p: two-sided paired "
             "permutation test over the rows both runs hold.")
    body = "\n".join(_comparison_html(result, c, letters) for c in result["comparisons"])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>decomp compare</title>\n"
            f"<style>{_CSS}</style>\n</head>\n<body>\n<h1>decomp compare</h1>\n<p id=\"intro\">{intro}</p>\n"
            f"{_runs_html(result, letters)}\n{body}\n</body>\n</html>\n")


def write_html(result: dict, output: Path, *, force: bool = False) -> None:
    """Write `render_html(result)` to `output` whole or not at all (a new file renamed over it).
    `FileExistsError` when `output` exists and not `force`; `IsADirectoryError` for a folder."""
    if output.is_dir():
        raise IsADirectoryError(f"{output} is a folder: name the page's file")
    if output.exists() and not force:
        raise FileExistsError(f"{output} exists: pass --force to overwrite it")
    write_whole(output, render_html(result).encode("utf-8", "backslashreplace"))
