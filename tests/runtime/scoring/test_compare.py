"""The comparison's statistics against scipy called directly, a case computed by hand, the
degenerate cases, and runs read from run directories (rows matched by id, groups, metrics,
calls and cost, the errors)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from tests.runtime.scoring.compare_helpers import make_run, scored
from decomp.runtime.scoring.compare import (
    ALL,
    CompareError,
    Settings,
    compare_runs,
    mean_score,
    paired_difference,
    run_labels,
)


def _mean_diff(x, y, axis=-1):
    return np.mean(y - x, axis=axis)


@pytest.fixture
def known():
    """Two methods' scores on 30 rows: B better than A by about 0.15, with noise."""
    rng = np.random.default_rng(12345)
    a = rng.uniform(0, 1, 30)
    b = np.clip(a + 0.15 + rng.normal(0, 0.2, 30), 0, 1)
    return a, b


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_paired_difference_is_scipys_bootstrap_and_permutation_test(known, method):
    a, b = known
    found = paired_difference(a, b, seed=7, method=method, resamples=2000)
    boot = stats.bootstrap((a, b), _mean_diff, paired=True, vectorized=True, method=method,
                           confidence_level=0.95, n_resamples=2000, rng=np.random.default_rng(7))
    perm = stats.permutation_test((a, b), _mean_diff, permutation_type="samples", vectorized=True,
                                  n_resamples=2000, alternative="two-sided", rng=np.random.default_rng(7))
    assert found["n"] == 30
    assert found["difference"] == pytest.approx(float(np.mean(b - a)))
    assert found["ci"] == pytest.approx(list(boot.confidence_interval))
    assert found["p_value"] == pytest.approx(perm.pvalue)
    assert found["ci"][0] < found["difference"] < found["ci"][1]
    assert found["p_value"] < 0.01 and "note" not in found


def test_the_seed_fixes_the_draws_and_another_seed_moves_them(known):
    a, b = known
    first, again = paired_difference(a, b, seed=1, resamples=500), paired_difference(a, b, seed=1, resamples=500)
    other = paired_difference(a, b, seed=2, resamples=500)
    assert first == again
    assert first["ci"] != other["ci"]


def test_mean_score_is_scipys_one_sample_bootstrap(known):
    a, _ = known
    found = mean_score(a, seed=3, resamples=1500)
    boot = stats.bootstrap((a,), np.mean, vectorized=True, method="BCa", n_resamples=1500,
                           rng=np.random.default_rng(3))
    assert found["score"] == pytest.approx(float(np.mean(a))) and found["n"] == 30
    assert found["ci"] == pytest.approx(list(boot.confidence_interval))


def test_a_hand_computed_case_exact_permutations():
    """Differences 1, 1, 1, 0: swapping a pair flips its difference's sign; of the 16 sign
    patterns, |mean| >= 0.75 needs the three ones to agree: 4 of 16, p = 0.25 (scipy enumerates
    all 16 when resamples exceed them)."""
    found = paired_difference([0, 0, 0, 0], [1, 1, 1, 0], resamples=9999)
    assert found["difference"] == 0.75 and found["n"] == 4
    assert found["p_value"] == pytest.approx(0.25)
    low, high = found["ci"]
    assert 0 <= low <= 0.75 <= high <= 1  # a bootstrap mean of 0/1 differences stays in [0, 1]


def test_all_differences_equal_gives_a_point_interval_and_no_crash():
    found = paired_difference([0, 0, 0], [1, 1, 1])
    assert found["ci"] == [1.0, 1.0] and found["difference"] == 1.0
    assert found["p_value"] == pytest.approx(0.25)  # 2 of the 8 sign patterns reach |mean| 1
    assert "point" in found["note"]
    same = paired_difference([0.5, 1, 0], [0.5, 1, 0])
    assert same["ci"] == [0.0, 0.0] and same["p_value"] == 1.0


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_paired_rows_says_so(n):
    found = paired_difference([0.0] * n, [1.0] * n)
    assert found["n"] == n and found["ci"] is None and found["p_value"] is None
    assert "fewer than 2" in found["note"]
    assert found["difference"] == (1.0 if n else None)


def test_unequal_sides_are_refused():
    with pytest.raises(ValueError, match="as many rows"):
        paired_difference([1, 2], [1])


def test_settings_are_checked():
    with pytest.raises(CompareError, match="unknown bootstrap method 'studentized'"):
        Settings(method="studentized")
    with pytest.raises(CompareError, match="between 0 and 1"):
        Settings(confidence=95)


# ---- run directories
def test_rows_are_matched_by_id_and_scores_are_each_runs_own_mean(tmp_path):
    base = make_run(tmp_path, "a", scored({"q1": 0, "q2": 1, "q3": 0, "q4": 0, "only_a": 1}))
    # the other run ended its rows in another order, and lacks one row and has another
    other = make_run(tmp_path, "b", scored({"q4": 1, "q3": 1, "q2": 1, "q1": 0, "only_b": 0}))
    result = compare_runs([base, other], settings=Settings(resamples=999))
    (comparison,) = result["comparisons"]
    assert comparison["metric"] == "em" and comparison["group"] == ALL
    assert [s["score"] for s in comparison["scores"]] == [pytest.approx(0.4), pytest.approx(0.6)]
    (diff,) = comparison["differences"]
    assert diff["n"] == 4 and diff["vs"] == "a" and diff["run"] == "b"
    assert diff["difference"] == pytest.approx(0.5)  # (0-0) + (1-1) + (1-0) + (1-0) over 4
    expected = paired_difference([0, 1, 0, 0], [0, 1, 1, 1], resamples=999)
    assert diff["ci"] == pytest.approx(expected["ci"]) and diff["p_value"] == pytest.approx(expected["p_value"])
    assert result["seed"] == 0 and result["baseline"] == "a"
    json.dumps(result)  # JSON-ready


def test_groups_come_from_row_fields_environment_summaries_or_input_rows(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "?", "level": "easy" if i < 3 else "hard"}) + "\n"
                            for i in range(6)))
    a = make_run(tmp_path, "a", scored({f"q{i}": 0 for i in range(6)}), data=data)
    b = make_run(tmp_path, "b", scored({f"q{i}": float(i < 3) for i in range(6)}), data=data)
    result = compare_runs([a, b], group_by="level", settings=Settings(resamples=999))
    groups = {c["group"]: c for c in result["comparisons"]}
    assert set(groups) == {ALL, "easy", "hard"} and result["group_by"] == "level"
    assert groups["easy"]["differences"][0]["difference"] == 1.0
    assert groups["hard"]["differences"][0]["difference"] == 0.0
    assert groups["easy"]["scores"][1]["n"] == 3
    with pytest.raises(CompareError, match="no row of the runs has the field 'colour'"):
        compare_runs([a, b], group_by="colour")


def test_environment_success_is_a_metric_and_groups_by_depth(tmp_path):
    def judged(solved):
        return [{"id": f"t{i}", "answer": None, "outcome": "ok" if ok else "failed",
                 "environment": {"env": {"success": ok, "recipe_depth": depth, "group": f"depth {depth}"}}}
                for i, (ok, depth) in enumerate(solved)]

    a = make_run(tmp_path, "adapt", judged([(True, 3), (True, 3), (True, 4), (False, 4)]))
    b = make_run(tmp_path, "react", judged([(False, 3), (True, 3), (False, 4), (False, 4)]))
    result = compare_runs([a, b], group_by="recipe_depth", settings=Settings(resamples=999))
    assert [c["metric"] for c in result["comparisons"]] == ["env_success"] * 3
    assert [c["group"] for c in result["comparisons"]] == [ALL, "3", "4"]
    assert result["comparisons"][0]["differences"][0]["difference"] == -0.5
    assert result["runs"][0]["metric"] is None  # no gold: no stored score


def test_other_metrics_rescore_the_stored_answers_against_the_gold(tmp_path, monkeypatch):
    rows = [{"id": "1", "answer": "red apple", "gold": [["red apple"]], "score": 1.0},
            {"id": "2", "answer": "apple", "gold": [["red apple"]], "score": 0.0},
            {"id": "3", "answer": None, "error": "boom", "gold": [["pear"]], "score": 0.0}]
    a = make_run(tmp_path, "a", rows)
    b = make_run(tmp_path, "b", [{**r, "answer": "red apple", "score": 1.0} if r["id"] == "2" else r for r in rows])
    result = compare_runs([a, b], metrics=["f1", "em"], settings=Settings(resamples=999))
    f1, em = result["comparisons"]
    assert f1["metric"] == "f1" and f1["scores"][0]["score"] == pytest.approx((1 + 0.67 + 0) / 3)
    assert em["scores"][0]["score"] == pytest.approx(1 / 3)
    (tmp_path / "mine.py").write_text("def longer(prediction, gold):\n    return float(len(str(prediction)) > 5)\n")
    monkeypatch.chdir(tmp_path)
    (mine,) = compare_runs([a, b], metrics=["mine:longer"], settings=Settings(resamples=99))["comparisons"]
    assert [s["score"] for s in mine["scores"]] == [pytest.approx(1 / 3), pytest.approx(2 / 3)]
    with pytest.raises(ValueError, match="unknown metric 'acc'.*em, exact, f1, set_em.*module:function"):
        compare_runs([a, b], metrics=["acc"])


def test_calls_and_cost_come_from_the_summary_when_there(tmp_path):
    usage = {"calls": 3, "cache_hits": 0, "prompt_tokens": 10, "completion_tokens": 2}
    a = make_run(tmp_path, "a", scored({"1": 1, "2": 0}, usage=usage), extra_summary={"cost": 0.25})
    b = make_run(tmp_path, "b", scored({"1": 1, "2": 1}))
    runs = compare_runs([a, b], settings=Settings(resamples=99))["runs"]
    assert runs[0]["calls"] == 6 and runs[0]["cost"] == 0.25
    assert runs[1]["calls"] == 0 and "cost" not in runs[1]


def test_a_run_without_scores_is_a_clear_error(tmp_path):
    a = make_run(tmp_path, "a", scored({"1": 1, "2": 0}))
    plain = make_run(tmp_path, "plain", [{"id": "1", "answer": "x", "outcome": "ok"}])
    with pytest.raises(CompareError, match=r"plain: the run has no scores: no row has gold"):
        compare_runs([a, plain])
    with pytest.raises(CompareError, match="plain: no row of the run can be scored with 'em'"):
        compare_runs([a, plain], metrics=["em"])
    # every row has an outcome: `success` compares them anyway
    (success,) = compare_runs([a, plain], metrics=["success"], settings=Settings(resamples=99))["comparisons"]
    assert success["differences"][0]["n"] == 1 and "fewer than 2" in success["differences"][0]["note"]


def test_runs_with_no_metric_in_common_name_each_ones(tmp_path):
    a = make_run(tmp_path, "a", scored({"1": 1, "2": 0}))
    judged = make_run(tmp_path, "j", [{"id": "1", "answer": None, "environment": {"e": {"success": True}}}])
    with pytest.raises(CompareError, match=r"no metric in common \(a: em; j: env_success\)"):
        compare_runs([a, judged])


def test_one_run_or_a_folder_that_is_no_run_is_refused(tmp_path):
    a = make_run(tmp_path, "a", scored({"1": 1}))
    with pytest.raises(CompareError, match="at least two runs"):
        compare_runs([a])
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match="not a decomp run directory"):
        compare_runs([a, tmp_path / "empty"])


def test_labels_are_folder_names_made_unique():
    assert run_labels(["x/run", "y/run", "z/other"]) == ["run#1", "run#2", "other"]
