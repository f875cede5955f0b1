"""Non-finite scores: a results line whose `score` is NaN, an infinity or a number no float holds
is a corrupt line, named by file and line (by `decomp compare`, and by anything that reads the
run: its summary, `decomp eval --pred`, a resume); a metric that returns one fails that row; and
what decomp prints as JSON is strict JSON (no bare NaN or Infinity)."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.scoring.compare import compare_runs
from decomp.runtime.storage.layout import RESULTS, RunDirError
from decomp.runtime.storage.rundir import RunDir
from tests.runtime.scoring.compare_helpers import make_run, scored


def _strict(text: str):
    """JSON as the standard has it: NaN and the infinities are no JSON."""
    def refuse(word):
        raise ValueError(f"not JSON: {word}")
    return json.loads(text, parse_constant=refuse)


def _runs(tmp_path, bad: str):
    """Two runs of 4 rows; the second's second line says `"score": <bad>` (written by hand)."""
    a = make_run(tmp_path, "a", scored({"q1": 1.0, "q2": 0.0, "q3": 1.0, "q4": 0.0}))
    b = make_run(tmp_path, "b", scored({"q1": 1.0, "q2": 1.0, "q3": 1.0, "q4": 0.0}))
    lines = (b / RESULTS).read_text().splitlines()
    assert '"score": 1.0' in lines[1]
    lines[1] = lines[1].replace('"score": 1.0', f'"score": {bad}')
    (b / RESULTS).write_text("\n".join(lines) + "\n")
    return a, b


@pytest.mark.parametrize("bad, said", [("NaN", '"NaN"'), ("Infinity", '"Infinity"'), ("-Infinity", '"-Infinity"'),
                                       ("1e999", '"1e999"'), ('"0.5"', '"0.5"'), ("true", "a boolean"),
                                       ("null", "null"), ("1" + "0" * 400, "a number too large for a float")])
def test_compare_refuses_a_non_finite_score_naming_the_file_and_line(tmp_path, bad, said):
    a, b = _runs(tmp_path, bad)
    for extra in ([], ["--json"]):
        done = CliRunner().invoke(main, ["compare", str(a), str(b), "--resamples", "99", *extra])
        assert done.exit_code == 1, done.output
        assert done.stdout == ""
        assert (f"{b / RESULTS}:2: not a results line: its 'score' is {said}, not a finite number (corrupt file)"
                in done.stderr), done.stderr
        assert "Traceback" not in done.output
    with pytest.raises(RunDirError, match=f"{RESULTS}:2: .*not a finite number"):
        compare_runs([a, b])
    with pytest.raises(RunDirError, match=f"{RESULTS}:2: .*not a finite number"):
        RunDir.open(b).summary()  # the run's own totals never average a NaN in


def test_compare_json_is_strict_json(tmp_path):
    """A summary.json whose cost another tool wrote as NaN is left out, not printed bare."""
    a = make_run(tmp_path, "a", scored({"q1": 1.0, "q2": 0.0, "q3": 1.0}), extra_summary={"cost": float("nan")})
    b = make_run(tmp_path, "b", scored({"q1": 1.0, "q2": 1.0, "q3": 1.0}), extra_summary={"cost": 0.25})
    done = CliRunner().invoke(main, ["compare", str(a), str(b), "--resamples", "99", "--json"])
    assert done.exit_code == 0, done.output
    result = _strict(done.stdout)
    assert "cost" not in result["runs"][0] and result["runs"][1]["cost"] == 0.25
    for comparison in result["comparisons"]:
        for entry in comparison["scores"] + comparison["differences"]:
            assert all(isinstance(v, (int, float)) and math.isfinite(v) for k, v in entry.items()
                       if k in ("score", "difference", "p_value"))
    table = CliRunner().invoke(main, ["compare", str(a), str(b), "--resamples", "99"])
    assert table.exit_code == 0 and "nan" not in table.stdout.lower()


def test_a_metric_returning_nan_or_infinity_fails_that_row(tmp_path, monkeypatch):
    (tmp_path / "odd.py").write_text("def score(prediction, gold):\n"
                                     "    return {'nan': float('nan'), 'inf': float('inf')}.get(prediction, 1.0)\n")
    monkeypatch.chdir(tmp_path)
    records = [{"id": f"q{i}", "answer": answer, "gold": ["x"], "score": 1.0, "outcome": "ok"}
               for i, answer in enumerate(["x", "nan", "inf", "x"])]
    a, b = make_run(tmp_path, "a", records), make_run(tmp_path, "b", records)
    done = CliRunner().invoke(main, ["compare", str(a), str(b), "--metric", "odd:score", "--json", "--resamples", "99"])
    assert done.exit_code == 0, done.output
    result = _strict(done.stdout)
    errors = {(e["run"], e["row"]): e["error"] for e in result["metric_errors"]}
    assert "returned nan, not a finite number" in errors[("a", "q1")]
    assert "returned inf, not a finite number" in errors[("b", "q2")]
    assert [s["score"] for s in result["comparisons"][0]["scores"]] == [0.5, 0.5]


def test_eval_and_run_summaries_print_strict_json(tmp_path):
    (tmp_path / "gold.jsonl").write_text('{"id": "1", "answer": "a"}\n{"id": "2", "answer": "b"}\n')
    (tmp_path / "pred.jsonl").write_text('{"id": "1", "answer": NaN}\n{"id": "2", "answer": "b"}\n')
    done = CliRunner().invoke(main, ["eval", "--gold", str(tmp_path / "gold.jsonl"), "--pred",
                                     str(tmp_path / "pred.jsonl")])
    assert done.exit_code == 0, done.output
    assert _strict(done.stdout) == {"metric": "em", "score": 0.5, "n": 2, "missing": 0}
