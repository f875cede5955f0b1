"""The candidates: zero-shot first, the caps held, seeded, each set of demonstrations once."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from decomp.learning.optimize.candidates import make_candidates
from decomp.learning.optimize.harvest import Demo


def _pool(sizes: dict[str, int]) -> dict[str, list[Demo]]:
    return {name: [Demo(name, f"Q: {name} {i}\nA: {i}", f"{name} {i}", f"row{i}") for i in range(n)]
            for name, n in sizes.items()}


@settings(max_examples=60, deadline=None)
@given(sizes=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 9), min_size=1),
       labelled=st.integers(0, 6), random_candidates=st.integers(0, 6), max_demos=st.integers(1, 5),
       seed=st.integers(0, 3))
def test_no_candidate_holds_more_than_max_demos_and_each_is_new(sizes, labelled, random_candidates, max_demos, seed):
    pool = _pool(sizes)
    gold = {"a": [Demo("a", f"Q: g{i}\nA: {i}", f"g{i}", f"row{i}", "labelled") for i in range(labelled)]}
    found = make_candidates(pool, gold, random_candidates=random_candidates, max_demos=max_demos, seed=seed)
    assert found[0].name == "zero-shot" and found[0].size == 0
    assert len({c.identity for c in found}) == len(found)
    for candidate in found:
        for name, demos in candidate.demos.items():
            assert len(demos) <= max_demos
            assert len(set(demos)) == len(demos)
            source = gold[name] if candidate.name == "labelled" else pool[name]
            assert all(d in source for d in demos)
    again = make_candidates(pool, gold, random_candidates=random_candidates, max_demos=max_demos, seed=seed)
    assert [c.identity for c in again] == [c.identity for c in found]


def test_the_kinds_in_order():
    pool = _pool({"a": 6, "b": 3})
    gold = {"a": [Demo("a", "Q: g\nA: 1", "g", "row1", "labelled")]}
    names = [c.name for c in make_candidates(pool, gold, random_candidates=3, max_demos=2, seed=0)]
    assert names[:3] == ["zero-shot", "labelled", "bootstrapped"] and set(names[3:]) <= {"random-1", "random-2",
                                                                                         "random-3"}
    boot = make_candidates(pool, {}, random_candidates=0, max_demos=2, seed=0)[1]
    assert boot.counts() == {"a": 2, "b": 2} and [d.row for d in boot.demos["a"]] == ["row0", "row1"]


def test_no_demonstrations_leave_zero_shot_alone():
    assert [c.name for c in make_candidates({"a": []}, {}, random_candidates=4, max_demos=2, seed=1)] == ["zero-shot"]
