"""The soft prompts' training rows: gold steps in graph order, one pair row per ordered pair,
and the splits that keep the same test tasks whatever the train and validation sizes."""
import json

from decomp.programs.tasklama.handlers import pairs, parse_steps
from decomp.programs.tasklama.taskgraph.splits import split
from decomp.programs.tasklama.taskgraph.tuning_rows import gold_order, main, pair_rows, step_rows

ROW = {"id": 7, "task": "make tea", "assumptions": "", "steps": ["pour", "boil", "drink"],
       "edges": [[1, 0], [0, 2]]}


def test_gold_order_follows_the_edges_and_falls_back_to_file_order_on_a_cycle():
    assert gold_order(ROW) == ["boil", "pour", "drink"]
    assert gold_order({**ROW, "edges": [[0, 1], [1, 0]]}) == ["pour", "boil", "drink"]


def test_a_step_row_is_the_numbered_list_the_program_reads_back_ended_by_a_blank_line():
    (row,) = step_rows([ROW])
    assert row == {"id": 7, "task": "make tea", "assumptions": "",
                   "completion": "1. boil\n2. pour\n3. drink\n\n"}
    assert parse_steps(row["completion"]) == ["boil", "pour", "drink"]


def test_pair_rows_ask_what_the_pairs_handler_asks_in_its_order_with_the_gold_label():
    rows = pair_rows([ROW])
    assert [r["query"] for r in rows] == pairs(["make tea", ["pour", "boil", "drink"]])
    labels = {r["id"]: r["completion"] for r in rows}
    assert labels["7:1:0"] == labels["7:0:2"] == " yes"
    assert labels["7:0:1"] == labels["7:1:2"] == labels["7:2:0"] == " no"
    assert len(rows) == 6


def test_the_command_writes_both_files(tmp_path, capsys):
    source = tmp_path / "train.jsonl"
    source.write_text(json.dumps(ROW) + "\n")
    counts = main([str(source), "--out", str(tmp_path / "out")])
    assert counts["steps_rows"] == 1 and counts["pairs_rows"] == 6 and counts["yes"] == 2
    assert json.loads(capsys.readouterr().out)["pairs_rows"] == 6
    assert len((tmp_path / "out" / "pairs.jsonl").read_text().splitlines()) == 6


def test_splits_keep_the_test_tasks_and_draw_validation_after_train():
    rows = [{"id": i, "steps": ["a", "b", "c"][: 2 + i % 2]} for i in range(200)]
    small, large = split(rows, train=10), split(rows, train=40, validation=12)
    assert small["test"] == large["test"] and large["train"][:10] == small["train"]
    assert len(large["validation"]) == 12 and small["validation"] == []
    ids = [{r["id"] for r in large[part]} for part in ("test", "train", "validation")]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
