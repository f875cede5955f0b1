"""The command line, through click's CliRunner and through a real subprocess."""
import json
import subprocess
import sys

import pytest

from tests.helpers import invoke

LETTER_Q = 'Take the letters at position 3 of the words in "Donna Guan Nascimento" and concatenate them using a space.'


def test_help_lists_the_commands():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("check", "run", "eval", "programs"):
        assert command in result.output


def test_run_one_question_prints_the_answer():
    result = invoke("run", "decomp/letter_cat_symbolic", "--question", LETTER_Q)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "n a s"


def test_run_with_trace_prints_the_tree():
    result = invoke("run", "decomp/letter_cat_symbolic", "-q", LETTER_Q, "--trace")
    tree = json.loads(result.output[: result.output.rindex("}") + 1])
    assert tree["kind"] == "row" and tree["answer"] == "n a s"
    handlers = {n["handler"] for n in _walk(tree) if n["kind"] == "call"}
    assert {"name", "words", "letter", "letter_at", "join"} <= handlers


def _walk(node):
    yield node
    for child in node["children"]:
        yield from _walk(child)


def test_check_reports_every_problem_with_position(tmp_path):
    bad = tmp_path / "bad.decomp"
    bad.write_text('handler a = regex(pattern="x", colour=1)\nprogram p(q) {\n    QS: [nope] #q\n    QS: [a] #4\n}\nmain p\n')
    result = invoke("check", str(bad))
    assert result.exit_code == 1
    assert f"{bad}:1:32: unknown option 'colour'" in result.output
    assert f"{bad}:3:9: unknown handler [nope]" in result.output
    assert f"{bad}:4:13: #4 refers to a step that has not run" in result.output
    assert "Traceback" not in result.output and "Token(" not in result.output
    caret_line = result.output.splitlines()[result.output.splitlines().index("        QS: [nope] #q") + 1]
    assert caret_line == "            ^^^^^^"


def test_check_syntax_error_is_positioned(tmp_path):
    bad = tmp_path / "bad.decomp"
    bad.write_text('handler a = prompt(text="x"\nmain a\n')
    result = invoke("check", str(bad))
    assert result.exit_code == 1
    assert result.output.startswith(f"{bad}:2:1: unexpected 'main'")
    assert "expected ')'" in result.output


def test_check_json_of_a_fewshot_file(fixture_data):
    path = fixture_data / "decomp" / "prompts" / "letter_cat" / "letter_cat_n3_ex3_decomp.txt"
    result = invoke("check", "--json", str(path))
    assert result.exit_code == 0, result.output
    examples = json.loads(result.output)
    assert len(examples) == 3
    first = examples[0]
    assert first["question"].startswith("Take the last letters")
    assert first["steps"][1] == {"operator": "project_values", "handler": "str_position",
                                 "query": 'What is the last letter in "#1"?', "answer": ["a", "a", "g"]}


def test_check_json_of_a_module():
    result = invoke("check", "--json", "decomp/reverse_symbolic")
    module = json.loads(result.output)
    assert module["node"] == "Module" and module["main"]["target"] == "reverse_sequence"
    assert [p["name"] for p in module["programs"]] == ["reverse_sequence", "reverse"]


def test_batch_run_records_bad_rows_and_goes_on(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join([
        json.dumps({"id": "a", "question": LETTER_Q}),
        '{"id": "b", "question": ',                                   # malformed JSON
        json.dumps({"id": "c", "question": "Take the letters of nothing."}),  # program fails
        json.dumps({"id": "d", "question": LETTER_Q.replace("position 3", "position 1")}),
    ]) + "\n")
    out = tmp_path / "out.jsonl"
    result = invoke("run", "decomp/letter_cat_symbolic", "--input", str(data), "--output", str(out))
    assert result.exit_code == 3, result.output  # the run finished; two rows ended in an error
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["failed"], summary["output"]) == (4, 2, str(out))
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert (rows["a"]["answer"], rows["a"]["index"], "error" in rows["a"]) == ("n a s", 0, False)
    assert rows["d"]["answer"] == "D G N"
    assert rows["line-2"]["error"].startswith(f"{data}:2: not valid JSON")
    assert "did not match" in rows["c"]["error"]


def test_eval_em_and_f1(tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "1", "question": "q", "answer": "The Cat"}) + "\n"
                    + json.dumps({"id": "2", "question": "q", "answer": "dog house"}) + "\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"id": "1", "answer": "cat."}) + "\n" + json.dumps({"id": "2", "answer": "dog"}) + "\n")
    em = json.loads(invoke("eval", "--gold", str(gold), "--pred", str(pred)).output)
    f1 = json.loads(invoke("eval", "--gold", str(gold), "--pred", str(pred), "--metric", "f1").output)
    assert em == {"metric": "em", "score": 0.5, "n": 2, "missing": 0}
    assert f1["score"] == (1.0 + 0.67) / 2


def test_unknown_program_is_a_clear_usage_error():
    result = invoke("run", "no/such/program", "-q", "x")
    assert result.exit_code == 2
    assert "no such file or bundled program" in result.output


def test_run_without_question_or_input_says_what_to_give():
    result = invoke("run", "decomp/letter_cat_symbolic")
    assert result.exit_code == 2 and "--question" in result.output


def test_run_reports_a_failing_row_on_stderr():
    result = invoke("run", "decomp/letter_cat_symbolic", "-q", "no quotes here")
    assert result.exit_code == 1
    assert "error:" in result.output and "did not match" in result.output


def test_fake_model_from_a_file(tmp_path):
    program = tmp_path / "p.decomp"
    program.write_text('handler ask = prompt(text="Q: a?\\nA: 1\\n")\nprogram p(question) {\n'
                       '    QS: [ask] #question\n}\nmain p\n')
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"mapping": {"What is 2+2?": " 4"}}))
    result = invoke("run", str(program), "--model", f"fake:{answers}", "-q", "What is 2+2?")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "4"


@pytest.mark.slow
def test_real_subprocess_runs_a_bundled_program():
    proc = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "run", "decomp/reverse_symbolic", "-q",
                           'Reverse the sequence "a, b, c, d, e".'], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "e, d, c, b, a"


@pytest.mark.slow
def test_real_subprocess_check_exit_status(tmp_path):
    bad = tmp_path / "bad.decomp"
    bad.write_text("main nothing\n")
    proc = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "check", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"{bad}:1:1: main names an unknown program or handler 'nothing'" in proc.stderr


def test_check_passes_on_every_official_prompt_file(fixture_data):
    files = sorted((fixture_data / "decomp" / "prompts").glob("*/*.txt"))
    assert len(files) == 20
    for path in files:
        result = invoke("check", str(path))
        assert result.exit_code == 0, f"{path}: {result.output}"


def test_main_picks_another_program_and_an_unknown_one_is_a_clear_error(tmp_path):
    src = tmp_path / "two.decomp"
    src.write_text('handler up = python(function="capwords")\n'
                   'program first(question) {\n    QS: [up] #question\n}\n'
                   'program second(question) {\n    QS: [up] #question\n    QS: [up] #1 again\n}\nmain first\n')
    assert invoke("run", str(src), "-q", "a b").output.strip() == "A B"
    assert invoke("run", str(src), "--main", "second", "-q", "a b").output.strip() == '"a B" Again'  # capwords of '"A B" again'
    result = invoke("run", str(src), "--main", "third", "-q", "a b")
    assert result.exit_code == 1 and "has no program or handler named 'third' (it has: first, second, up)" in result.output


def test_textcraft_generate_skips_crafting_commands_that_are_not_text(tmp_path, fixture_data):
    dev = (fixture_data / "textcraft" / "tasks_dev.jsonl").read_text(encoding="utf-8")
    bad_rows = [{"goal": "x", "crafting_commands": [5, None, {"craft": 1}, ["craft 1 a using 1 b"], True]},
                {"goal": "y", "crafting_commands": "craft 1 y using 1 z"},
                {"goal": "z", "crafting_commands": {"a": "craft 1 a using 1 b"}}]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(dev + "".join(json.dumps(r) + "\n" for r in bad_rows), encoding="utf-8")
    clean = tmp_path / "clean.jsonl"
    clean.write_text(dev, encoding="utf-8")
    args = ["--depth", "2", "-n", "3", "--seed", "1"]
    result = invoke("textcraft", "generate", "--from", str(mixed), *args)
    assert result.exit_code == 0, result.output
    expected = invoke("textcraft", "generate", "--from", str(clean), *args)
    assert result.output == expected.output
    assert len(result.output.splitlines()) == 3


TOGETHER_PLUGIN = '''
import asyncio

from decomp import Handler, Options, handler_kind
from decomp.dsl.errors import HandlerError


class TogetherOptions(Options):
    role: str


GO = {}


@handler_kind("cli_together")
class Together(Handler):
    """[calc] and [most] wait for [gate]; they then fail in the same turn of the event loop."""
    Options = TogetherOptions
    contained = False  # its calls share an event: they run on the run's loop

    async def run(self, call):
        go = GO.setdefault(id(asyncio.get_running_loop()), asyncio.Event())
        if self.options.role == "gate":
            for _ in range(5):
                await asyncio.sleep(0)
            go.set()
            return "open"
        await go.wait()
        if self.options.role == "calc":
            raise HandlerError("division by zero")
        raise HandlerError("function most raised ValueError: no most",
                           details="Traceback (most recent call last):\\nValueError: no most")
'''

TOGETHER = '''handler calc = cli_together(role="calc")
handler most = cli_together(role="most")
handler gate = cli_together(role="gate")
program p(question) {
    QS: [calc] #question
    QS: [most] #question
    QS: [gate] #question
    QS: [gate] #1 #2 #3
}
main p
'''


def test_steps_failing_together_print_each_error_with_its_own_traceback(tmp_path):
    (tmp_path / "together.py").write_text(TOGETHER_PLUGIN)
    (tmp_path / "two.decomp").write_text(TOGETHER)
    (tmp_path / "rows.jsonl").write_text('{"id": "r1", "question": "q"}\n')
    result = invoke("run", tmp_path / "two.decomp", "--plugin", tmp_path / "together.py", "-q", "q", "--cache", "off")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: [calc] cli_together, {tmp_path / 'two.decomp'}:5:5: division by zero"
    assert lines[1] == (f"error (at the same time): [most] cli_together, {tmp_path / 'two.decomp'}:6:5: "
                        "function most raised ValueError: no most")
    assert lines[2:] == ["Traceback (most recent call last):", "ValueError: no most"]  # under [most] only
    # a dataset run keeps both in the row's line, and -v prints both, each under its step
    result = invoke("run", tmp_path / "two.decomp", "--plugin", tmp_path / "together.py", "--input",
                    tmp_path / "rows.jsonl", "--run-dir", tmp_path / "run", "--cache", "off", "-v")
    assert result.exit_code == 3
    record = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    assert record["error"].startswith("[calc] cli_together") and record["also_failed"][0].startswith("[most]")
    assert "row r1 (index 0) failed: [calc] cli_together" in result.stderr
    assert "row r1 (index 0) also failed, at the same time: [most] cli_together" in result.stderr
