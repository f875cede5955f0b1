"""The TaskLAMA programs (programs/tasklama/) and their Python side (decomp.programs.tasklama.handlers,
decomp.programs.tasklama.taskgraph.scorer), run on the fake model: structure and plumbing, not model quality."""
import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from decomp import FakeModel, Session
from decomp.runtime.cli import PROGRAMS_DIR, main
from decomp.programs.tasklama import handlers as tp
from decomp.programs.tasklama.taskgraph.scorer import Scorer, features, fit_ridge, train
from decomp.programs.tasklama.taskgraph.similarity import ExactSimilarity

STEPS = PROGRAMS_DIR / "tasklama" / "steps.decomp"
GRAPHS = PROGRAMS_DIR / "tasklama" / "graphs.decomp"
TEA = ["Boil water.", "Put a tea bag in a cup.", "Pour the water.", "Drink the tea."]


# ---------------------------------------------------------------- parsing and merging
def test_parse_steps_reads_numbered_and_bulleted_lists_and_stops_at_prose():
    text = "1. Boil water.\n2) Put a tea bag in a cup.\n- Pour the water.\n3. boil water\nThat is all.\n4. Late."
    assert tp.parse_steps(text) == ["Boil water.", "Put a tea bag in a cup.", "Pour the water."]
    assert tp.parse_steps("no list here") == [] and tp.parse_steps(None) == []
    assert tp.parse_steps(["a", " a. ", "", 3, None, "b"]) == ["a", "3", "b"]


@pytest.fixture
def exact(monkeypatch):
    """Near-duplicates by exact text (the real encoder is tested once, below)."""
    monkeypatch.setattr(tp, "_similarity", lambda: ExactSimilarity())


def test_merge_keeps_the_first_sample_then_only_new_steps(exact):
    samples = ["1. Boil water.\n2. Pour the water.", "1. boil   WATER.\n2. Drink the tea.", "1. Drink the tea."]
    assert tp.merge([samples], {}) == ["Boil water.", "Pour the water.", "Drink the tea."]


@pytest.mark.slow
def test_merge_drops_paraphrases_with_the_sentence_encoder():
    merged = tp.merge([["1. Boil the water in a kettle.", "1. Boil water in the kettle.\n2. Sell the car."]], {})
    assert merged == ["Boil the water in a kettle.", "Sell the car."]


# ---------------------------------------------------------------- the scorer
def test_ridge_recovers_a_linear_rule_and_cv_picks_a_penalty():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 5))
    y = x @ np.array([1.0, -2.0, 0.0, 0.5, 0.0]) + 0.01 * rng.normal(size=80)
    w, b, mean, scale = fit_ridge(x, y, 0.01)
    assert np.allclose(w / scale, [1.0, -2.0, 0.0, 0.5, 0.0], atol=0.05)
    scorer = train(x, y, np.array([str(i // 4) for i in range(80)]))
    assert scorer.cv_spearman > 0.95 and scorer.trained_on == 80


def test_scorer_saves_loads_and_ranks(tmp_path, exact):
    sim = _ToySimilarity()
    good, bad = ["Boil water.", "Pour the water."], ["Sell the car."]
    x = np.array([features(sim, "make tea", s) for s in [good, bad] * 6])
    y = np.array([0.9, 0.1] * 6)
    scorer = train(x, y, np.array([str(i // 2) for i in range(12)]))
    scorer.save(tmp_path / "s.npz")
    loaded = Scorer.load(tmp_path / "s.npz")
    assert loaded.score(sim, "make tea", good) > loaded.score(sim, "make tea", bad)
    assert loaded.penalty == scorer.penalty and loaded.trained_on == 12


class _ToySimilarity:
    """Deterministic 8-dimensional 'embeddings' from a text's hash (for fast scorer tests)."""

    def embed(self, texts):
        out = []
        for text in texts:
            v = np.random.default_rng(abs(hash(text)) % 2**32).normal(size=8)
            out.append(v / np.linalg.norm(v))
        return np.array(out)

    def __call__(self, pred, gold):
        return np.clip(self.embed(pred) @ self.embed(gold).T, 0, 1) if pred and gold else np.zeros((len(pred), len(gold)))


# ---------------------------------------------------------------- graph helpers
def test_pairs_and_pair_edges_line_up_and_read_yes_from_reasoning():
    questions = tp.pairs(["make tea", TEA[:3]])
    assert len(questions) == 6 and questions[0] == f"Task: make tea\nStep A: {TEA[0]}\nStep B: {TEA[1]}"
    answers = ["yes", "no", "No.", "So the answer is yes.", "yes, then no", "maybe"]
    # pairs in order: (0,1) (0,2) (1,0) (1,2) (2,0) (2,1)
    assert tp.pair_edges([TEA[:3], answers]) == [[0, 1], [1, 2]]


def test_swaps_are_seeded_permutations_with_two_steps_exchanged():
    first = tp.swaps(["make tea", TEA], {"swaps": 4})
    assert first == tp.swaps(["make tea", TEA], {"swaps": 4}) and len(first) == 5
    assert first[0] == "".join(f"{i}. {s}\n" for i, s in enumerate(TEA, 1))
    for text in first[1:]:
        order = [TEA.index(s) for s in tp.parse_steps(text)]
        assert sorted(order) == [0, 1, 2, 3] and sum(a != b for a, b in zip(order, range(4))) == 2
    assert tp.swaps(["t", ["only"]], {}) == ["1. only\n"]


def test_consensus_keeps_orders_shared_by_all_top_sequences():
    seqs = [tp._numbered_text([TEA[i] for i in order]) for order in ([0, 1, 2, 3], [1, 0, 2, 3], [0, 1, 3, 2])]
    scores = [-1.0, -2.0, -9.0]
    edges = tp.consensus([TEA, seqs, scores], {"top": 2})  # orders 0123 and 1023 agree on all but 0/1
    assert sorted(map(tuple, edges)) == [(0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def test_acyclic_drops_every_edge_on_a_cycle_and_bad_edges():
    graph = tp.acyclic([TEA, [[0, 1], [1, 2], [2, 1], [2, 3], [3, 3], [0, 9], [True, 1], "x", [1, 2]]])
    assert graph == {"steps": TEA, "edges": [[0, 1], [2, 3]]}
    assert tp.chain([TEA]) == [[0, 1], [1, 2], [2, 3]] and tp.chain([[]]) == []


# ---------------------------------------------------------------- the programs, end to end
def _steps_model(prompts_seen=None):
    def answer(request):
        if prompts_seen is not None:
            prompts_seen.append(request.prompt)
        return "1. Boil water.\n2. Put a tea bag in a cup.\n3. Pour the water.\n\nTask: x"
    return FakeModel(default=answer)


def _run(path, main_name, row, model, **inputs):
    session = Session(model=model, python_workers=False)  # the helpers' _similarity is patched in this process
    module = session.load(path)
    module.main = main_name
    result = session.run(module, {**row, **inputs})
    assert result.error is None, result.error
    return result.answer


ROW = {"id": "t1", "task": "make tea", "assumptions": "there is no kettle"}


@pytest.mark.parametrize("main_name", ["icl", "icl_noctx", "multseq", "multseq_noctx"])
def test_step_programs_answer_a_list_of_steps(main_name, exact):
    answer = _run(STEPS, main_name, ROW, _steps_model())
    assert answer == ["Boil water.", "Put a tea bag in a cup.", "Pour the water."]


def test_assumptions_reach_the_prompt_only_in_the_context_variant():
    seen: list[str] = []
    _run(STEPS, "icl", ROW, _steps_model(seen))
    _run(STEPS, "icl_noctx", ROW, _steps_model(seen))
    assert "Task: make tea\nAssumptions: there is no kettle\nSteps:\n" in seen[0]
    assert "Assumptions" not in seen[1] and seen[1].endswith("Task: make tea\nSteps:\n")


def test_sampling_programs_ask_for_samples_at_temperature(exact):
    model = _steps_model()
    _run(STEPS, "samples_for_training", ROW, model)
    request = model.history[-1]
    assert (request.n, request.temperature) == (4, 0.5)


@pytest.mark.parametrize("main_name", ["sf", "multseq_sf", "sf_noctx", "multseq_sf_noctx"])
def test_select_and_filter_programs_use_a_trained_scorer(main_name, tmp_path, monkeypatch):
    sim = _ToySimilarity()
    monkeypatch.setattr(tp, "_similarity", lambda: sim)
    x = np.array([features(sim, "t", s) for s in (["a", "b"], ["c"], ["a"], ["b", "c", "d"])] * 2)
    scorer = train(x, np.array([0.8, 0.1, 0.4, 0.6] * 2), np.array(list("aabbccdd")))
    scorer.save(tmp_path / "s.npz")
    replies = iter(["1. Sell the car.", "1. Boil water.\n2. Pour the water.", "1. Boil water.", "1. Drink."] * 2)
    model = FakeModel(default=lambda request: next(replies))
    answer = _run(STEPS, main_name, ROW, model, scorer=str(tmp_path / "s.npz"))
    assert isinstance(answer, list) and answer and all(isinstance(s, str) for s in answer)


def test_a_missing_scorer_is_the_rows_clear_error(tmp_path):
    session = Session(model=_steps_model())
    module = session.load(STEPS)
    module.main = "sf"
    result = session.run(module, {**ROW, "scorer": str(tmp_path / "none.npz")})
    assert "no trained scorer at" in result.error


def _graph_model():
    def answer(request):
        step_a = request.prompt.rsplit("Step A: ", 1)[-1].split("\n")[0]
        step_b = request.prompt.rsplit("Step B: ", 1)[-1].split("\n")[0]
        return "yes" if TEA.index(step_a) < TEA.index(step_b) else "no"
    return FakeModel(default=answer)


def test_pairwise_builds_the_order_the_model_states():
    graph = _run(GRAPHS, "pairwise", {"id": "g", "task": "make tea", "steps": TEA}, _graph_model())
    assert graph["steps"] == TEA
    assert sorted(map(tuple, graph["edges"])) == [(i, j) for i in range(4) for j in range(4) if i < j]


def test_pairwise_with_a_contradicting_model_drops_the_cycle():
    graph = _run(GRAPHS, "pairwise", {"id": "g", "task": "make tea", "steps": TEA[:2]}, FakeModel(default="yes"))
    assert graph == {"steps": TEA[:2], "edges": []}


def test_pairwise_cot_and_linear_and_llm_scoring_answer_graph_rows():
    row = {"id": "g", "task": "make tea", "steps": TEA}
    cot = _run(GRAPHS, "pairwise_cot", row, FakeModel(default=" the water comes first. So the answer is yes."))
    assert cot == {"steps": TEA, "edges": []}  # every pair said yes both ways: all on cycles
    assert _run(GRAPHS, "linear", row, FakeModel())["edges"] == [[0, 1], [1, 2], [2, 3]]
    scored = FakeModel(scorer=lambda prompt, text: -float(random.Random(text).random()))
    graph = _run(GRAPHS, "llm_scoring", row, scored)
    assert graph["steps"] == TEA and all(i != j for i, j in graph["edges"])
    assert len(scored.history) == 6 and all("Task: make tea\nSteps:\n" in r.prompt for r in scored.history)


def test_run_then_eval_from_the_command_line(tmp_path, exact):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "t1", "task": "make tea", "assumptions": "", "steps": TEA,
                                "edges": [[0, 2], [1, 2], [2, 3]]}) + "\n")
    fake = tmp_path / "fake.json"
    fake.write_text(json.dumps({"default": "1. Boil water.\n2. Pour the water.\n3. Sell the car."}))
    runner = CliRunner()
    result = runner.invoke(main, ["run", "tasklama/steps", "--input", str(gold), "--model", f"fake:{fake}",
                                  "--run-dir", str(tmp_path / "steps")])
    assert result.exit_code == 0, result.output
    scores = json.loads(runner.invoke(main, ["eval", "steps", "--gold", str(gold), "--pred", str(tmp_path / "steps"),
                                             "--encoder", "exact"]).output)
    assert scores["hungarian"]["precision"] == pytest.approx(2 / 3) and scores["hungarian"]["recall"] == 0.5
    result = runner.invoke(main, ["run", "tasklama/graphs", "--main", "linear", "--input", str(gold),
                                  "--run-dir", str(tmp_path / "graph"), "--model", f"fake:{fake}"])
    assert result.exit_code == 0, result.output
    graph = json.loads(runner.invoke(main, ["eval", "graph", "--gold", str(gold), "--pred", str(tmp_path / "graph"),
                                            "--encoder", "exact"]).output)
    assert graph["count"] == 1 and graph["missing"] == 0 and 0 < graph["proximity"] < 1


@pytest.mark.parametrize("main_name", ["linear", "pairwise", "pairwise_cot", "llm_scoring"])
@pytest.mark.parametrize("steps", [[], ["only one"]])
def test_graph_programs_on_empty_and_one_step_tasks(main_name, steps):
    assert _run(GRAPHS, main_name, {"id": "g", "task": "t", "steps": steps}, FakeModel(default="yes")) == \
        {"steps": steps, "edges": []}


def test_a_model_that_writes_no_list_gives_no_steps(exact):
    assert _run(STEPS, "icl", ROW, FakeModel(default="I cannot help with that.")) == []
    assert _run(STEPS, "multseq", ROW, FakeModel(default="")) == []


@pytest.mark.parametrize("main_name, ending", [("pairwise", "Step B: b\nMust A come before B?"),
                                               ("pairwise_cot", "Step B: b\nMust A come before B? Reasoning:")])
def test_pair_prompts_leave_the_answer_on_the_question_line(main_name, ending):
    model = FakeModel(default="yes")
    _run(GRAPHS, main_name, {"id": "g", "task": "t", "steps": ["a", "b"]}, model)
    # a newline here makes a base model start a new step; the two ordered pairs' prompts are
    # rendered at once (templates render in worker threads), so either may reach the model first
    assert sorted(p[-len(ending):] for p in model.prompts) == sorted([ending, ending.replace("B: b", "B: a")])
