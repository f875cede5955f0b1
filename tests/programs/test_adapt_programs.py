"""The bundled ADaPT programs on TextCraft's 40 dev tasks, with deterministic agents.

Symbolic agents (no model): a task of recipe depth D is solved exactly when dmax >= D + 1; the
dev tasks are depth 3 (29) and 4 (11). The scripted model of capability K runs the real
prompts through the real executor and planner kinds: ADaPT beats every baseline at equal K.
"""
import json

import pytest
from click.testing import CliRunner

from tests.helpers import TEXTCRAFT_DEV
from decomp.runtime.cli import main
from decomp.runtime.runs.api import RunOptions, run_dataset

BASELINES = {"react": {}, "plan_execute": {}, "retry": {"tries": 3}, "reflect_retry": {"tries": 3}}


def _solved(tmp_path, program, main_name, fields, model=None) -> tuple[dict[int, tuple[int, int]], dict]:
    """(solved, tasks) by recipe depth, as the environment judged, and the run's summary."""
    done = run_dataset(program, TEXTCRAFT_DEV, options=RunOptions(model=model, cache_mode="off"), main=main_name,
                       fields=fields, run_dir=tmp_path / f"{main_name}-{json.dumps(fields, sort_keys=True)}-{model}")
    by_depth: dict[int, tuple[int, int]] = {}
    for record in done.records():
        assert "error" not in record, record["error"]
        env = record["environment"]["env"]
        solved, total = by_depth.get(env["recipe_depth"], (0, 0))
        by_depth[env["recipe_depth"]] = (solved + env["success"], total + 1)
        assert (record["outcome"] == "ok") == env["success"]  # exact agents never judge themselves wrong
    return by_depth, done.summary


@pytest.mark.parametrize("dmax, expected", [(1, (0, 0)), (2, (0, 0)), (3, (0, 0)), (4, (29, 0)), (5, (29, 11))])
def test_symbolic_adapt_solves_depth_d_exactly_from_dmax_d_plus_1(tmp_path, dmax, expected):
    by_depth, summary = _solved(tmp_path, "adapt/textcraft_symbolic", "textcraft", {"dmax": dmax})
    assert (by_depth[3], by_depth[4]) == ((expected[0], 29), (expected[1], 11))
    assert summary["success_rate"] == summary["env_success_rate"] == round(sum(expected) / 40, 6)
    assert summary["by_group"]["depth 3"]["rows"] == 29 and summary["calls"] == 0  # no model


@pytest.mark.parametrize("method", sorted(BASELINES))
def test_symbolic_baselines_solve_nothing(tmp_path, method):
    """One action per attempt: without as-needed decomposition no dev task is reachable."""
    by_depth, _ = _solved(tmp_path, "adapt/textcraft_symbolic", method, BASELINES[method])
    assert by_depth == {3: (0, 29), 4: (0, 11)}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_adapt_beats_every_baseline_at_equal_capability(tmp_path, k):
    model = f"scripted:{k}"
    adapt, summary = _solved(tmp_path, "adapt/textcraft", "textcraft", {"dmax": 4}, model)
    adapt_solved = sum(s for s, _ in adapt.values())
    assert adapt[3] == (29, 29)  # every depth-3 task, whatever K
    assert summary["calls"] > 0
    for method, fields in BASELINES.items():
        baseline, _ = _solved(tmp_path, "adapt/textcraft", method, fields, model)
        assert adapt_solved > sum(s for s, _ in baseline.values()), (method, k)


def test_decomp_run_prints_success_by_depth_and_calls_per_task(tmp_path):
    """The deterministic check as anyone runs it: `decomp run ... --field dmax=4`."""
    result = CliRunner().invoke(main, ["run", "adapt/textcraft_symbolic", "--input", str(TEXTCRAFT_DEV),
                                       "--field", "dmax=4", "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["success_rate"] == 0.725 and summary["failed_outcome"] == 11 and summary["failed"] == 0
    assert summary["by_group"]["depth 3"]["success_rate"] == 1.0
    assert summary["by_group"]["depth 4"]["success_rate"] == 0.0
    assert summary["handlers"]["act"]["calls"] + summary["handlers"]["plan"]["calls"] == 510  # 12.75 a task
    evaluated = CliRunner().invoke(main, ["eval", "--pred", str(tmp_path / "run")])
    assert json.loads(evaluated.output)["env_success_rate"] == 0.725
