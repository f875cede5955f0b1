"""Metrics beyond em, set_em and f1: registered by plugins (`register_metrics`, the table the
built-ins go through too) or named `module:function`, imported under the trust rules of Python
handlers; used by `decomp eval` and by `decomp compare`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.handlers import plugins
from decomp.handlers.registry import Registry
from decomp.handlers.sandbox.trust import Trust
from decomp.plugins import builtin_plugins
from decomp.runtime.cli import main
from decomp.runtime.scoring import metrics as scoring
from decomp.runtime.scoring.evaluation import evaluate_files
from decomp.runtime.scoring.metrics import METRICS, best_score, known_metrics, metric_function, score_predictions

LEN_RATIO = '''
from decomp import hookimpl

def len_ratio(prediction, gold):
    """Length of the prediction over the gold's, capped at 1."""
    return min(1.0, len(str(prediction)) / max(1, len(" ".join(gold))))

@hookimpl
def register_metrics(register):
    register("len_ratio", len_ratio)
'''


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(textwrap.dedent(source), module.__dict__)
    return module


@pytest.fixture
def fresh_plugins(monkeypatch):
    """The process's plugins and default registry as new, given back as they were after the test."""
    monkeypatch.setattr(plugins, "_loaded", None)
    registry = Registry()
    monkeypatch.setattr(plugins, "default_registry", registry)
    monkeypatch.setattr(plugins.load, "__defaults__", (registry,))
    return registry


def test_the_builtin_metrics_are_registered_through_the_plugin_table():
    registry = plugins.builtin_registry()
    assert {name: registry.metrics[name] for name in METRICS} == METRICS
    assert {registry.owners[("metrics", name)] for name in METRICS} == {"decomp.runtime.scoring.metrics"}
    assert scoring in builtin_plugins()
    assert set(METRICS) <= set(known_metrics())


def test_a_plugins_metric_scores_like_a_builtin(fresh_plugins):
    assert plugins.add_plugin_module(_module("lenplug", LEN_RATIO)) == []
    plugins.load()
    assert "len_ratio" in known_metrics()
    assert metric_function("len_ratio")("ab", ["abcd"]) == 0.5
    result = score_predictions({"1": [["abcd"]], "2": [["xy"]]}, {"1": "ab", "2": "xyz"}, "len_ratio")
    assert result == {"metric": "len_ratio", "score": 0.75, "n": 2, "missing": 0}


def test_a_plugin_may_not_take_a_builtin_metrics_name(fresh_plugins):
    usurper = _module("usurper", '''
        from decomp import hookimpl
        @hookimpl
        def register_metrics(register):
            register("em", lambda prediction, gold: 1.0)
    ''')
    problems = plugins.add_plugin_module(usurper)
    plugins.load()
    assert metric_function("em") is METRICS["em"]
    assert any("plugin 'usurper'" in p and "the metric 'em' is already registered by 'decomp.runtime.scoring.metrics'"
               in p for p in plugins.problems() + problems)


def test_an_unknown_metric_lists_the_known_ones_and_module_function():
    with pytest.raises(ValueError) as err:
        metric_function("accuracy")
    assert str(err.value).startswith("unknown metric 'accuracy'; known metrics are: em, exact, f1, set_em")
    assert "'module:function'" in str(err.value)


def test_module_function_of_the_working_folder_is_imported(tmp_path, monkeypatch):
    (tmp_path / "my_metrics.py").write_text("def first_word(prediction, gold):\n"
                                            "    return float(str(prediction).split()[:1] == gold[0].split()[:1])\n")
    monkeypatch.chdir(tmp_path)
    assert best_score("red apple", [("red pear",)], "my_metrics:first_word") == 1.0
    assert best_score("green apple", [("red pear",), ("green",)], "my_metrics:first_word") == 1.0
    assert best_score("blue", [("red pear",)], "my_metrics:first_word") == 0.0


def test_a_module_elsewhere_must_be_trusted(tmp_path, monkeypatch):
    elsewhere = tmp_path / "site"
    elsewhere.mkdir()
    (elsewhere / "shared_metrics.py").write_text("def always(prediction, gold):\n    return 1.0\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")  # the module is not in the working folder
    with pytest.raises(ValueError, match=r"metric 'shared_metrics:always' is not allowed: .*--trust shared_metrics"):
        metric_function("shared_metrics:always")
    assert metric_function("shared_metrics:always", trust=Trust.of(["shared_metrics"]))("x", ["y"]) == 1.0
    with pytest.raises(ValueError, match="is not allowed"):  # trusted by that call only, not imported for good
        metric_function("shared_metrics:always")
    with pytest.raises(ValueError, match="may not be called"):
        metric_function("os:getcwd")
    with pytest.raises(ValueError, match="no module named 'no_such_metrics'"):
        metric_function("no_such_metrics:f")


def test_a_metric_that_raises_or_returns_no_number_is_named(tmp_path, monkeypatch):
    (tmp_path / "bad_metrics.py").write_text("def boom(prediction, gold):\n    raise KeyError('x')\n"
                                             "def words(prediction, gold):\n    return 'yes'\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"metric 'bad_metrics:boom' failed on the prediction \"a\".*KeyError"):
        best_score("a", [("b",)], "bad_metrics:boom")
    with pytest.raises(ValueError, match="metric 'bad_metrics:words' returned 'yes', not a number"):
        best_score("a", [("b",)], "bad_metrics:words")


def test_decomp_eval_takes_a_module_function_metric(tmp_path, monkeypatch):
    (tmp_path / "gold.jsonl").write_text('{"id": "1", "answer": "abc"}\n{"id": "2", "answer": "xy"}\n')
    (tmp_path / "pred.jsonl").write_text('{"id": "1", "answer": "ab"}\n{"id": "2", "answer": "q"}\n')
    (tmp_path / "prefix.py").write_text("def is_prefix(prediction, gold):\n"
                                        "    return float(gold[0].startswith(str(prediction)))\n")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    done = runner.invoke(main, ["eval", "--gold", "gold.jsonl", "--pred", "pred.jsonl", "--metric", "prefix:is_prefix"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {"metric": "prefix:is_prefix", "score": 0.5, "n": 2, "missing": 0}
    assert evaluate_files(tmp_path / "gold.jsonl", tmp_path / "pred.jsonl", "prefix:is_prefix")[0]["score"] == 0.5
    unknown = runner.invoke(main, ["eval", "--gold", "gold.jsonl", "--pred", "pred.jsonl", "--metric", "acc"])
    assert unknown.exit_code == 1
    assert "unknown metric 'acc'; known metrics are: em, exact, f1, set_em" in unknown.output
    assert "module:function" in unknown.output


def test_a_programs_metric_statement_may_name_a_plugins_metric(tmp_path):
    """`metric len_ratio` with the plugin loaded (`--plugin`): the rows are scored with it, the
    summary's score is its mean and `decomp eval --pred RUN` uses it; without the plugin the
    statement is an error at its name, listing the known metrics."""
    (tmp_path / "lenplug.py").write_text(LEN_RATIO)
    (tmp_path / "helpers.py").write_text("def same(query):\n    return query\n")
    (tmp_path / "p.decomp").write_text('handler up = python(function="helpers:same")\nmetric len_ratio\nmain up\n')
    (tmp_path / "data.jsonl").write_text('{"id": "1", "question": "ab", "answer": "abcd"}\n'
                                         '{"id": "2", "question": "xyz", "answer": "xy"}\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}

    def decomp(*args):
        return subprocess.run([str(Path(sys.executable).parent / "decomp"), *args], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=120)

    run = decomp("run", "p.decomp", "--plugin", "lenplug", "--input", "data.jsonl", "--run-dir", "run")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert (summary["metric"], summary["score"]) == ("len_ratio", 0.75)
    evaluated = decomp("eval", "--plugin", "lenplug", "--gold", "data.jsonl", "--pred", "run")
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["score"] == 0.75
    refused = decomp("check", "p.decomp")
    assert refused.returncode == 1
    assert "p.decomp:2:8: unknown metric 'len_ratio'" in refused.stdout + refused.stderr
