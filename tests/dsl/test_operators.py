"""Tests of decomp.dsl.operators: DecomP's operators computed against hand-worked answers."""
from __future__ import annotations

import pytest

from decomp.dsl.operators import (
    KNOWN, Operator, OperatorError, combine, flatten, is_true, item_for_query, items_of,
    parse_operator, unique,
)


def run(name, items, answers):
    """What the interpreter does for a fan-out step, minus the handler calls."""
    op = parse_operator(name)
    return combine(op, items, answers)


# --- parse_operator ------------------------------------------------------------------------

@pytest.mark.parametrize("name, base, subops", [
    (None, "select", ()),
    ("select", "select", ()),
    ("project", "project", ()),
    ("project_values", "project", ("values",)),
    ("project_values_flat", "project", ("values", "flat")),
    ("project_values_flat_unique", "project", ("values", "flat", "unique")),
    ("project_keys", "project", ("keys",)),
    ("filter", "filter", ()),
    ("filter_keys", "filter", ("keys",)),
    ("projectValues", "projectValues", ()),
    ("projectValues_values", "projectValues", ("values",)),
    ("projectKeys", "projectKeys", ()),
    ("filterValues", "filterValues", ()),
    ("filterKeys", "filterKeys", ()),
])
def test_parse_operator_bases_and_subops(name, base, subops):
    op = parse_operator(name)
    assert op.base == base
    assert op.subops == subops
    assert op.name == (name or "select")


@pytest.mark.parametrize("short, full", [
    ("foreach", "project_values"),
    ("foreach_merge", "project_values_flat_unique"),
    ("foreach_flat", "project_values_flat"),
])
def test_synonyms_mean_the_same_operator(short, full):
    a, b = parse_operator(short), parse_operator(full)
    assert (a.base, a.subops) == (b.base, b.subops)
    assert a.name == short  # the name as written is kept for messages and traces


@pytest.mark.parametrize("name", [
    "bogus", "foreach_bogus", "project_sorted", "Project", "FOREACH", "project_", "_values", "map",
])
def test_unknown_operator_names_are_rejected(name):
    with pytest.raises(OperatorError) as err:
        parse_operator(name)
    assert f"({name})" in str(err.value)
    assert "unknown operator" in str(err.value)


def test_operator_error_is_a_value_error():
    assert issubclass(OperatorError, ValueError)


def test_fans_out_only_for_non_select():
    assert parse_operator(None).fans_out is False
    assert parse_operator("select").fans_out is False
    for name in ("project", "foreach", "foreach_merge", "filter", "projectValues", "projectKeys"):
        assert parse_operator(name).fans_out is True, name


def test_every_known_name_parses():
    for name in KNOWN:
        assert isinstance(parse_operator(name), Operator)


# --- items_of / item_for_query ---------------------------------------------------------------

FOREACH = parse_operator("foreach")


def test_items_of_list_is_itself():
    value = ["a", 1, ["x"]]
    assert items_of(FOREACH, value) == ["a", 1, ["x"]]


def test_items_of_string_is_one_item_for_project_operators():
    assert items_of(FOREACH, "Augusta Ada King") == ["Augusta Ada King"]
    assert items_of(parse_operator("project"), "") == [""]


def test_filter_needs_a_real_list_as_in_the_official_code():
    with pytest.raises(OperatorError, match="not a list"):
        items_of(parse_operator("filter"), "Augusta Ada King")


@pytest.mark.parametrize("value", [3, 2.5, None, True, {"a": 1}])
def test_items_of_non_list_is_an_error(value):
    with pytest.raises(OperatorError, match="not a list"):
        items_of(FOREACH, value)


def test_item_for_query_plain_operators_use_the_item():
    for name in ("project", "foreach", "filter"):
        assert item_for_query(parse_operator(name), ["k", "v"]) == ["k", "v"]
        assert item_for_query(parse_operator(name), "x") == "x"


def test_item_for_query_pairs():
    assert item_for_query(parse_operator("projectValues"), ["k", "v"]) == "v"
    assert item_for_query(parse_operator("filterValues"), ["k", "v"]) == "v"
    assert item_for_query(parse_operator("projectKeys"), ["k", "v"]) == "k"
    assert item_for_query(parse_operator("filterKeys"), ["k", "v"]) == "k"


@pytest.mark.parametrize("item", ["kv", ["only one"], ["a", "b", "c"], 5, {"k": "v"}])
def test_item_for_query_pair_operators_need_pairs(item):
    with pytest.raises(OperatorError, match=r"needs \[key, value\] pairs"):
        item_for_query(parse_operator("projectValues"), item)


# --- combine: the project family -------------------------------------------------------------

def test_select_takes_the_single_answer():
    assert run(None, [], [["a", "b"]]) == ["a", "b"]
    assert run("select", [], ["x"]) == "x"


def test_project_gives_item_answer_pairs():
    assert run("project", ["Augusta", "Ada", "King"], ["a", "a", "g"]) == [
        ["Augusta", "a"], ["Ada", "a"], ["King", "g"]]


def test_project_values_keeps_answers_in_item_order():
    assert run("project_values", ["Augusta", "Ada", "King"], ["a", "a", "g"]) == ["a", "a", "g"]
    assert run("foreach", ["x", "y"], [[1, 2], {"k": 3}]) == [[1, 2], {"k": 3}]


def test_project_keys_gives_the_items():
    assert run("project_keys", ["x", "y"], [1, 2]) == ["x", "y"]


def test_project_on_no_items_is_empty():
    for name in ("project", "foreach", "foreach_merge", "foreach_flat", "filter"):
        assert run(name, [], []) == []


def test_project_values_flat_flattens_recursively():
    answers = [["a", ["b", ["c"]]], "d", [], [["e"]]]
    assert run("project_values_flat", ["1", "2", "3", "4"], answers) == ["a", "b", "c", "d", "e"]
    assert run("foreach_flat", ["1", "2", "3", "4"], answers) == ["a", "b", "c", "d", "e"]


def test_project_values_flat_keeps_duplicates():
    assert run("foreach_flat", ["p", "q"], [["a", "b"], ["b", "a"]]) == ["a", "b", "b", "a"]


def test_project_values_flat_unique_keeps_first_occurrence():
    answers = [["Paris", "Lyon"], ["Lyon", "Nice"], "Paris", [["Nice", "Metz"]]]
    expected = ["Paris", "Lyon", "Nice", "Metz"]
    assert run("project_values_flat_unique", ["a", "b", "c", "d"], answers) == expected
    assert run("foreach_merge", ["a", "b", "c", "d"], answers) == expected


def test_unique_compares_json_text():
    # 1, 1.0, "1" and true are four different JSON texts
    value = [1, "1", 1.0, True, 1, {"a": 1, "b": 2}, {"a": 1, "b": 2}, None, None, [1], [1]]
    assert unique(value) == [1, "1", 1.0, True, {"a": 1, "b": 2}, None, [1]]
    out = unique(value)
    assert isinstance(out[2], float) and isinstance(out[3], bool)


def test_unique_keeps_the_first_object_itself():
    first, second = {"a": 1, "b": 2}, {"a": 1, "b": 2}
    out = unique([first, second])
    assert len(out) == 1 and out[0] is first


def test_unique_compares_json_text_so_key_order_matters_as_in_the_official_code():
    assert len(unique([{"a": 1, "b": 2}, {"b": 2, "a": 1}])) == 2


def test_unique_needs_a_list():
    with pytest.raises(OperatorError, match="unique needs a list"):
        unique("abc")


def test_flatten_helper():
    assert flatten("x") == ["x"]
    assert flatten([]) == []
    assert flatten([[[]]]) == []
    assert flatten([1, [2, [3, [4]]], 5]) == [1, 2, 3, 4, 5]
    assert flatten([{"a": [1]}]) == [{"a": [1]}]  # objects are leaves


def test_project_values_on_pairs():
    items = [["Paris", "France"], ["Rome", "Italy"]]
    # the query sees the value, the pair keeps its key and gets the answer as value
    assert run("projectValues", items, ["EU", "EU?"]) == [["Paris", "EU"], ["Rome", "EU?"]]
    assert run("projectValues_values", items, ["EU", "EU?"]) == ["EU", "EU?"]
    assert run("projectValues_keys", items, ["EU", "EU?"]) == ["Paris", "Rome"]


def test_project_keys_on_pairs():
    items = [["Paris", "France"], ["Rome", "Italy"]]
    assert run("projectKeys", items, ["P", "R"]) == [["P", "France"], ["R", "Italy"]]
    assert run("projectKeys_keys", items, ["P", "R"]) == ["P", "R"]
    assert run("projectKeys_values", items, ["P", "R"]) == ["France", "Italy"]


def test_project_pairs_then_values_then_flat_unique():
    items = ["a", "b", "c"]
    answers = [["x", "y"], ["y"], ["z", "x"]]
    assert run("project_values_flat_unique", items, answers) == ["x", "y", "z"]
    # order of sub-operations matters: unique before flat keeps the repeats inside lists
    assert run("project_values_unique_flat", items, answers) == ["x", "y", "y", "z", "x"]


def test_sub_operations_apply_in_order_on_project_pairs():
    assert run("project_values", ["a", "b"], [1, 2]) == [1, 2]
    assert run("project_keys", ["a", "b"], [1, 2]) == ["a", "b"]
    assert run("project_flat", ["a", "b"], [1, 2]) == ["a", 1, "b", 2]


# --- filter ------------------------------------------------------------------------------------

def test_filter_keeps_items_with_true_verdicts():
    items = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    answers = ["yes", "no", True, False, "1", "true", "TRUE", " Yes ", "0", "maybe"]
    assert run("filter", items, answers) == ["a", "c", "e", "f", "g", "h"]


def test_filter_keeps_items_not_answers():
    assert run("filter", [{"n": 1}, [2], "x"], ["yes", "yes", "no"]) == [{"n": 1}, [2]]


def test_filter_all_false_is_empty():
    assert run("filter", ["a", "b"], ["no", False]) == []


def test_filter_then_unique():
    assert run("filter_unique", ["a", "b", "a"], ["yes", "yes", "yes"]) == ["a", "b"]


def test_filter_values_and_keys_keep_pairs():
    items = [["Paris", "France"], ["Berlin", "Germany"]]
    assert run("filterValues", items, ["yes", "no"]) == [["Paris", "France"]]
    assert run("filterValues_keys", items, ["no", "yes"]) == ["Berlin"]
    assert run("filterKeys_values", items, ["yes", "yes"]) == ["France", "Germany"]


@pytest.mark.parametrize("answer, expected", [
    (True, True), (False, False), ("yes", True), ("YES", True), ("true", True), ("True", True),
    ("1", True), (" yes\n", True), ("no", False), ("false", False), ("0", False), ("", False),
    ("yes please", False),
])
def test_is_true(answer, expected):
    assert is_true(answer) is expected


@pytest.mark.parametrize("answer", [None, ["yes"], {"verdict": "yes"}, 1, 0])
def test_filter_with_a_bad_verdict_is_an_error(answer):
    with pytest.raises(OperatorError, match="as yes or no"):
        run("filter", ["a", "b"], ["yes", answer])


def test_bad_verdict_message_shows_the_json():
    with pytest.raises(OperatorError) as err:
        is_true({"v": "yes"})
    assert '{"v": "yes"}' in str(err.value)
