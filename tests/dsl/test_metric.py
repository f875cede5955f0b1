"""The `metric NAME` statement: parsed into `Module.metric`, checked against the known metrics
(an unknown or repeated one is an error at its position), kept apart from handler names."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from decomp import Session
from decomp.dsl import nodes
from decomp.dsl.checker import METRIC_NAMES, check_metric
from decomp.dsl.errors import DecompError
from decomp.dsl.parser import parse_module
from decomp.runtime.cli import main
from decomp.runtime.scoring.metrics import METRICS

PROGRAM = 'handler up = python(function="capwords")\n{metric}main up\n'


def test_metric_statement_parses_with_positions():
    module = parse_module(PROGRAM.format(metric="metric set_em\n"), "p.decomp")
    assert module.metric == nodes.Metric(nodes.Span("p.decomp", 2, 1, 2, 14), "set_em",
                                         name_span=nodes.Span("p.decomp", 2, 8, 2, 14))
    assert module.metrics == (module.metric,)
    assert module.main.target == "up"


def test_no_metric_statement_is_none():
    module = parse_module(PROGRAM.format(metric=""))
    assert module.metric is None and module.metrics == ()


def test_metric_may_come_anywhere_and_takes_a_comment():
    module = parse_module('metric f1   # token overlap\nhandler up = python(function="capwords")\nmain up\n')
    assert module.metric.name == "f1"


@pytest.mark.parametrize("text", ["metric\n", "metric set_em f1\n", 'metric "em"\n', "metric = em\n"])
def test_malformed_metric_statement_is_a_syntax_error(text):
    with pytest.raises(DecompError) as err:
        parse_module(text, "m.decomp")
    assert err.value.span.line == 1


def test_metric_is_a_keyword_only_where_a_statement_starts():
    """A handler, program or input may still be called `metric`."""
    module = parse_module('handler metric = python(function="capwords")\n'
                          'program p(metric) {\n    QS: [metric] #metric\n}\nmetric em\nmain p\n')
    assert module.handlers[0].name == "metric" and module.metric.name == "em"


def test_known_metrics_are_the_scorers():
    assert set(METRIC_NAMES) == set(METRICS)


def test_unknown_metric_is_an_error_at_its_name():
    module = parse_module(PROGRAM.format(metric="metric accuracy\n"), "p.decomp")
    (error,) = check_metric(module)
    assert error.message == "unknown metric 'accuracy'"
    assert (error.span.line, error.span.column, error.span.end_column) == (2, 8, 16)
    assert error.expected == "one of: em, set_em, f1, exact, or a function as module:function"


def test_repeated_metric_is_an_error_at_the_first():
    module = parse_module(PROGRAM.format(metric="metric em\nmetric f1\n"), "p.decomp")
    (error,) = check_metric(module)
    assert error.message == "metric is declared more than once" and error.span.line == 2
    assert module.metric.name == "f1"  # the last one, as with main


def test_loading_reports_the_unknown_metric_with_every_other_problem(tmp_path):
    path = tmp_path / "p.decomp"
    path.write_text('handler up = python(function="capwords")\nmetric exactly\nmain nope\n')
    with pytest.raises(DecompError) as err:
        Session().load(path)
    text = err.value.format()
    assert f"{path}:2:8: unknown metric 'exactly'" in text
    assert "main names an unknown program or handler 'nope'" in text


def test_loaded_module_carries_the_root_metric_and_checks_imported_ones(tmp_path):
    (tmp_path / "lib.decomp").write_text('metric f1\nhandler up = python(function="capwords")\n')
    root = tmp_path / "p.decomp"
    root.write_text('import "lib.decomp"\nmetric set_em\nmain up\n')
    assert Session().load(root).metric == "set_em"
    root.write_text('import "lib.decomp"\nmain up\n')
    assert Session().load(root).metric is None  # an imported file's metric is not the program's
    (tmp_path / "lib.decomp").write_text('metric sets\nhandler up = python(function="capwords")\n')
    with pytest.raises(DecompError, match="unknown metric 'sets'"):
        Session().load(root)


def test_decomp_check_shows_the_error_with_a_caret(tmp_path):
    path = tmp_path / "p.decomp"
    path.write_text(PROGRAM.format(metric="metric accuracy\n"))
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == f"{path}:2:8: unknown metric 'accuracy'"
    assert lines[1:3] == ["    metric accuracy", "           ^^^^^^^^"]
    assert "expected one of: em, set_em, f1, exact, or a function as module:function" in result.output


def test_decomp_check_json_lists_the_metric(tmp_path):
    import json

    path = tmp_path / "p.decomp"
    path.write_text(PROGRAM.format(metric="metric set_em\n"))
    result = CliRunner().invoke(main, ["check", "--json", str(path)])
    assert result.exit_code == 0, result.output
    described = json.loads(result.output)
    assert described["metric"]["name"] == "set_em" and "metrics" not in described
