"""Rows rendered into training examples by a prompt or score handler, and the bad inputs that
stop `decomp tune` before any model loads (through the command line: nothing is written)."""
import pytest

pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from decomp.runtime.cli import main  # noqa: E402
from decomp.learning.tuning.examples import (  # noqa: E402
    TuneError,
    find_handler,
    read_examples,
    split_examples,
    template_sha256,
)
from tests.learning.tuning.tuning_helpers import ROWS, setup_files, write_rows  # noqa: E402


def test_a_prompt_handler_renders_each_row_and_ends_the_target_at_its_stop(tmp_path):
    program, data = setup_files(tmp_path)
    _, handler = find_handler(program, "capital")
    examples = read_examples(data, handler, query="question")
    assert len(examples) == 4
    assert examples[0].prompt == "Q: What is the capital of France?\nA: Paris\n\nQ: What is the capital of Italy?\nA:"
    assert examples[0].target == " Rome\n"
    assert examples[1].where == f"{data}:2"


def test_a_score_handler_raises_the_target_after_its_rendered_prefix(tmp_path):
    program, data = setup_files(tmp_path)
    _, handler = find_handler(program, "fluency")
    example = read_examples(data, handler)[2]
    assert (example.prompt, example.target) == ("Country: Peru\nCapital:", " Lima")
    assert len(template_sha256(handler)) == 64


def test_a_scalar_target_is_its_json_text_and_a_list_is_the_rows_error(tmp_path):
    program, _ = setup_files(tmp_path)
    _, handler = find_handler(program, "fluency")
    rows = [{"completion": 3, "country": "a"}, {"completion": True, "country": "b"}, {"completion": [1], "country": "c"}]
    data = write_rows(tmp_path / "labels.jsonl", rows)
    with pytest.raises(TuneError) as err:
        read_examples(data, handler)
    assert f"{data}:3: the 'completion' field is a list" in str(err.value)
    ok = write_rows(tmp_path / "ok.jsonl", rows[:2])
    assert [e.target for e in read_examples(ok, handler)] == ["3", "true"]


def test_the_split_is_seeded_and_keeps_a_training_row(tmp_path):
    program, data = setup_files(tmp_path)
    _, handler = find_handler(program, "capital")
    examples = read_examples(data, handler, query="question")
    training, held = split_examples(examples, 0.25, seed=1)
    assert (len(training), len(held)) == (3, 1)
    assert split_examples(examples, 0.25, seed=1) == (training, held)
    assert split_examples(examples, 0, seed=1) == (examples, [])
    with pytest.raises(TuneError, match="leaves no training rows"):
        split_examples(examples[:1], 0.5, seed=1)


def tune(tmp_path, *extra, rows=ROWS, handler="capital"):
    """`decomp tune` on the test program; its result and the output file (never written here)."""
    program, data = setup_files(tmp_path, rows)
    out = tmp_path / "out.safetensors"
    result = CliRunner().invoke(main, ["tune", str(program), "--handler", handler, "--input", str(data),
                                       "--out", str(out), "-q", *extra])
    return result, out


def test_an_empty_training_set_is_refused(tmp_path):
    result, out = tune(tmp_path, rows=[])
    assert result.exit_code == 1 and "has no rows to train on" in result.output and not out.exists()


def test_rows_missing_the_target_are_named_by_line(tmp_path):
    rows = [{"question": "a"}, ROWS[0], {"question": "b"}, *[{"question": "c"}] * 6]
    result, out = tune(tmp_path, rows=rows)
    assert result.exit_code == 1 and not out.exists()
    assert "8 bad rows" in result.output
    assert "train.jsonl:1: no 'completion' field" in result.output
    assert "train.jsonl:3: no 'completion' field" in result.output and "(and 3 more)" in result.output


def test_a_handler_the_program_lacks_is_refused_with_the_ones_it_has(tmp_path):
    result, out = tune(tmp_path, handler="nope")
    assert result.exit_code == 1 and not out.exists()
    assert "has no handler named 'nope' (it has: capital, fluency, upper)" in result.output


def test_a_handler_of_another_kind_is_refused(tmp_path):
    result, out = tune(tmp_path, handler="upper")
    assert result.exit_code == 1 and not out.exists()
    assert "[upper] is a python handler: only prompt and score handlers can be tuned" in result.output


def test_a_model_file_that_is_missing_or_not_gguf_is_refused(tmp_path):
    result, out = tune(tmp_path, "--model", f"local:{tmp_path / 'missing.gguf'}")
    assert result.exit_code == 1 and "local model file not found" in result.output and not out.exists()
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    result, out = tune(tmp_path, "--model", f"local:{text}")
    assert result.exit_code == 1 and "is not a GGUF file" in result.output and not out.exists()
    result, out = tune(tmp_path, "--model", "openai:gpt-4o")
    assert result.exit_code == 1 and "only a local model can be tuned" in result.output


def test_a_split_that_leaves_no_training_rows_is_refused(tmp_path):
    result, out = tune(tmp_path, "--validation-split", "0.5", rows=ROWS[:1])
    assert result.exit_code == 1 and "leaves no training rows" in result.output and not out.exists()


def test_bad_sizes_are_usage_errors(tmp_path):
    result, _ = tune(tmp_path, "--tokens", "8,x")
    assert result.exit_code == 2 and "comma list" in result.output
    result, _ = tune(tmp_path, "--tokens", "0")
    assert result.exit_code == 2
