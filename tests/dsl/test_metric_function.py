"""`metric module:function` in a .decomp file: parsed as written (dotted modules too), checked by
the loader's resolver (a refused import or a function of neither form is an error at the name)."""
from __future__ import annotations

import pytest

from decomp.dsl import nodes
from decomp.dsl.checker import check_metric
from decomp.dsl.errors import DecompError
from decomp.dsl.parser import parse_module

PROGRAM = 'handler up = python(function="capwords")\n{metric}main up\n'


@pytest.mark.parametrize("name", ["my_metrics:close", "pkg.sub.mod:score_2"])
def test_a_module_function_parses_with_its_span(name):
    module = parse_module(PROGRAM.format(metric=f"metric {name}  # mine\n"), "p.decomp")
    assert module.metric.name == name
    assert module.metric.name_span == nodes.Span("p.decomp", 2, 8, 2, 8 + len(name))
    assert check_metric(module) == []  # without a resolver: the form is accepted as written


@pytest.mark.parametrize("text, column, message", [
    ("metric mine : close\n", 8, "a metric function is written without spaces: mine:close"),
    ("metric a:b:c\n", 11, "unexpected ':c'"),
    ("metric :close\n", 8, "unexpected ':close'"),
])
def test_a_malformed_module_function_is_a_positioned_syntax_error(text, column, message):
    with pytest.raises(DecompError) as err:
        parse_module(text, "m.decomp")
    assert (err.value.span.line, err.value.span.column) == (1, column)
    assert err.value.message == message


def test_the_resolvers_answer_is_checked_at_the_name():
    module = parse_module(PROGRAM.format(metric="metric mine:close\n"), "p.decomp")
    (refused,) = check_metric(module, resolve=lambda name: "the module 'mine' is not trusted")
    assert refused.message == "metric 'mine:close': the module 'mine' is not trusted"
    assert (refused.span.line, refused.span.column) == (2, 8) and refused.expected is None

    def one(prediction):
        return 1.0

    (wrong,) = check_metric(module, resolve=lambda name: one)
    assert wrong.message.startswith("metric 'mine:close': ")
    assert "function(row, answer, trace)" in wrong.expected and "function(prediction, gold)" in wrong.expected
    assert check_metric(module, resolve=lambda name: lambda row, answer, trace: 1.0) == []
    assert check_metric(module, resolve=lambda name: None) == []  # not imported: a notice said elsewhere


def test_a_dotted_name_without_a_function_is_an_unknown_metric():
    module = parse_module(PROGRAM.format(metric="metric my.metrics\n"), "p.decomp")
    (error,) = check_metric(module)
    assert error.message == "unknown metric 'my.metrics'"
