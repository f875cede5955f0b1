"""A Python handler's failure shows the user's own traceback: under `decomp run -q` and in the
`decomp trace show` tree, under the error."""

from tests.helpers import invoke

HELPER = "def f(query):\n    parts = query.split()\n    return parts[5]\n"


def test_a_question_that_fails_in_user_code_prints_its_traceback(tmp_path):
    (tmp_path / "helpers_tbq.py").write_text(HELPER)
    program = tmp_path / "p.decomp"
    program.write_text('handler h = python(function="helpers_tbq:f")\nmain h\n')
    result = invoke("run", program, "-q", "a b", "--cache", "off")
    assert result.exit_code == 1
    assert "raised IndexError" in result.output
    assert 'helpers_tbq.py", line 3, in f' in result.output and "return parts[5]" in result.output


def test_trace_show_puts_the_traceback_under_the_error(tmp_path):
    (tmp_path / "helpers_tbs.py").write_text(HELPER)
    program = tmp_path / "q.decomp"
    program.write_text('handler h = python(function="helpers_tbs:f")\nprogram m(question) {\n'
                       '    QS: [h] #question\n}\nmain m\n')
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "r1", "question": "a b"}\n')
    assert invoke("run", program, "--input", data, "--run-dir", tmp_path / "run").exit_code == 3  # its row fails
    shown = invoke("trace", "show", tmp_path / "run", "--row", "r1")
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert text.index("✗ [h] python") < text.index('helpers_tbs.py", line 3, in f') < text.index("IndexError: list")
