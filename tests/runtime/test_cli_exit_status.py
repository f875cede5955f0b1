"""The exit status of `decomp run --input`, `decomp eval` and `decomp trace` (issue 14: "the exit
code is 0 when every row failed"): 0 every row answered (a failed outcome is an answer), 1 the
command could not do its work, 2 a usage error, 3 a dataset run that finished with rows in error."""
import json

import pytest

from tests.helpers import invoke

HELPERS = '''from decomp.dsl.values import Failed


def answer(query):
    if query.startswith("boom"):
        raise ValueError("no answer for " + query)
    if query.startswith("give up"):
        return Failed("gave up")  # an answer whose outcome is failed, as ADaPT programs give
    return query.upper()
'''
PROGRAM = 'handler answer = python(function="helpers_exit:answer")\nprogram p(question) {\n' \
          '  QS: [answer] #question\n}\nmain p\n'


@pytest.fixture
def program(tmp_path):
    (tmp_path / "helpers_exit.py").write_text(HELPERS, encoding="utf-8")
    path = tmp_path / "p.decomp"
    path.write_text(PROGRAM, encoding="utf-8")
    return path


def rows(tmp_path, *questions):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": q}) + "\n" for i, q in enumerate(questions)),
                    encoding="utf-8")
    return data


def run(program, data, run_dir, *more):
    return invoke("run", program, "--input", data, "--run-dir", run_dir, "--cache", "off", *more)


def test_every_row_answered_exits_0(program, tmp_path):
    result = run(program, rows(tmp_path, "a", "b"), tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and json.loads(result.stdout)["failed"] == 0


def test_rows_in_error_exit_3_with_a_count_on_stderr_and_the_summary_on_stdout(program, tmp_path):
    run_dir = tmp_path / "run"
    result = run(program, rows(tmp_path, "a", "boom 1", "b"), run_dir)
    assert result.exit_code == 3, result.output
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["failed"]) == (3, 1)
    assert result.stderr == (f"error: 1 of 3 row(s) ended in an error (in {run_dir / 'results.jsonl'}; "
                             "-v prints each)\n")


def test_every_row_in_error_exits_3_not_0(program, tmp_path):
    result = run(program, rows(tmp_path, "boom 1", "boom 2"), tmp_path / "run")
    assert result.exit_code == 3, result.output
    assert json.loads(result.stdout)["failed"] == 2 and "2 of 2 row(s)" in result.stderr


def test_failed_outcomes_are_answers_exit_0(program, tmp_path):
    result = run(program, rows(tmp_path, "give up now", "a"), tmp_path / "run")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["failed"], summary["failed_outcome"]) == (0, 1)


def test_resuming_a_finished_run_with_rows_in_error_still_exits_3(program, tmp_path):
    data, run_dir = rows(tmp_path, "a", "boom"), tmp_path / "run"
    assert run(program, data, run_dir).exit_code == 3
    again = run(program, data, run_dir, "--resume")
    assert again.exit_code == 3, again.output
    assert json.loads(again.stdout)["sessions"] == 2


def test_a_program_that_does_not_load_exits_1_and_a_usage_error_2(tmp_path):
    broken = tmp_path / "broken.decomp"
    broken.write_text("main nothing_declared\n", encoding="utf-8")
    data = rows(tmp_path, "a")
    assert run(broken, data, tmp_path / "run").exit_code == 1
    assert invoke("run", broken, "--input", data, "-q", "x").exit_code == 2


def test_a_question_keeps_1_for_an_error_and_a_failed_outcome(program):
    assert invoke("run", program, "-q", "a", "--cache", "off").exit_code == 0
    assert invoke("run", program, "-q", "boom", "--cache", "off").exit_code == 1
    assert invoke("run", program, "-q", "give up", "--cache", "off").exit_code == 1


def test_trace_and_eval_exit_0_on_a_run_with_rows_in_error_and_1_when_it_cannot_be_read(program, tmp_path):
    run_dir = tmp_path / "run"
    assert run(program, rows(tmp_path, "a", "boom"), run_dir).exit_code == 3
    assert invoke("trace", "show", run_dir).exit_code == 0
    assert invoke("trace", "show", run_dir, "--row", "r1").exit_code == 0
    assert invoke("eval", "--pred", run_dir).exit_code == 0
    page = invoke("trace", "html", run_dir, "-o", tmp_path / "page.html")
    assert page.exit_code == 0, page.output
    missing = invoke("trace", "show", tmp_path / "nowhere")
    assert missing.exit_code == 1 and "does not exist" in missing.stderr
    assert invoke("trace", "show", run_dir, "--row", "no-such-row").exit_code == 1
    assert invoke("eval", "--pred", run_dir, "--gold", tmp_path / "missing.jsonl").exit_code == 2  # click: no file


def test_trace_html_into_a_folder_that_cannot_be_written_is_a_clear_error(program, tmp_path):
    run_dir = tmp_path / "run"
    run(program, rows(tmp_path, "a"), run_dir)
    (tmp_path / "file").write_text("x")
    result = invoke("trace", "html", run_dir, "-o", tmp_path / "file" / "page.html")
    assert result.exit_code == 1 and "Traceback" not in result.output and result.stderr.startswith("error:")
