"""The first hour with `decomp run`: options that would be ignored are refused or applied, a dry
run names the rows that would fail, a user's mistake (a wrong model file, an endpoint that cannot
be reached) reads as one plain message, `decomp eval --pred` takes a run directory, and stdout
holds only the answer."""
from __future__ import annotations

import json
import socket

import pytest

from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import ModelSettings
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.helpers import invoke

# `#question #suffix`, echoed back: the answer shows which suffix the row was given
ECHO = '''handler echo = regex(pattern="(.*)", group=1)
program main(question, suffix) {
    QS: [echo] #question #suffix
}
main main
'''
# one few-shot prompt: one model call per row
ASK = '''handler ask = prompt(text="Q: one?\\nA: 1\\n\\nQ: two?\\nA: 2")
main ask
'''


@pytest.fixture
def echo(tmp_path):
    path = tmp_path / "echo.decomp"
    path.write_text(ECHO)
    return path


@pytest.fixture
def ask(tmp_path):
    path = tmp_path / "ask.decomp"
    path.write_text(ASK)
    return path


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.jsonl"
    rows = [{"id": "a", "question": "one", "answer": "one S"},
            {"id": "b", "question": "two", "suffix": "own", "answer": "two own"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def results(run_dir):
    """The run's results lines in input order (the file holds them in the order rows ended)."""
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return sorted(lines, key=lambda line: line["index"])


# ---------------------------------------------------------------- 1. -q with --input, --field with --input
def test_question_with_input_is_a_usage_error(echo, data, tmp_path):
    result = invoke("run", echo, "-q", "hi", "--input", data, "--run-dir", tmp_path / "run")
    assert result.exit_code == 2
    assert "--question" in result.output and "--input" in result.output
    assert not (tmp_path / "run").exists()


def test_field_with_input_is_set_in_every_row_overriding_the_rows_own(echo, data, tmp_path):
    run_dir = tmp_path / "run"
    result = invoke("run", echo, "--input", data, "--field", "suffix=S", "--run-dir", run_dir)
    assert result.exit_code == 0, result.output
    assert {r["id"]: r["answer"] for r in results(run_dir)} == {"a": "one S", "b": "two S"}
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["options"]["fields"] == {"suffix": "S"}

    # resuming with other fields would mix two runs: refused; with none given, run.json's; with the same, too
    before = (run_dir / "run.json").read_text()
    other = invoke("run", echo, "--input", data, "--field", "suffix=T", "--run-dir", run_dir, "--resume")
    assert (run_dir / "run.json").read_text() == before  # refused before anything there is touched
    assert other.exit_code == 1
    assert "--field suffix=S" in other.output and "--field suffix=T" in other.output
    none = invoke("run", echo, "--input", data, "--run-dir", run_dir, "--resume")  # the fields of run.json
    assert none.exit_code == 0, none.output
    assert json.loads(none.stdout)["sessions"] == 2 and (run_dir / "run.json").read_text() != before
    same = invoke("run", echo, "--input", data, "--field", "suffix=S", "--run-dir", run_dir, "--resume")
    assert same.exit_code == 0, same.output


def test_run_dataset_fields(echo, data, tmp_path):
    done = run_dataset(echo, data, fields={"suffix": "S"}, run_dir=tmp_path / "run")
    assert done.failed == 0 and done.score == 0.5  # row b's gold expects its own suffix
    assert [r["answer"] for r in done.records()] == ["one S", "two S"]
    with pytest.raises(RunDirError, match="--field suffix=S"):  # other fields given: refused
        run_dataset(echo, data, run_dir=tmp_path / "run", resume=True, fields={})
    again = run_dataset(echo, data, run_dir=tmp_path / "run", resume=True)  # none given: run.json's
    assert again.failed == 0 and [r["answer"] for r in again.records()] == ["one S", "two S"]
    plain = run_dataset(echo, data, run_dir=tmp_path / "plain")
    assert "fields" not in json.loads((tmp_path / "plain" / "run.json").read_text())["options"]
    assert plain.failed == 1  # row a lacks the suffix


# ---------------------------------------------------------------- 2. a dry run names the rows that fail
def test_dry_run_reports_failing_rows_and_exits_non_zero(echo, data):
    result = invoke("run", echo, "--dry-run", "--input", data)
    assert result.exit_code == 3  # as a dataset run with rows in error
    assert json.loads(result.stdout) == {"rows": 2, "calls_per_row": 0.0, "max_calls_per_row": 0,
                                         "estimated_calls": 0, "estimated_prompt_tokens": 0,
                                         "estimated_completion_tokens": 0, "max_completion_tokens": 0, "failed": 1}
    assert "row a (index 0) would fail: " in result.stderr and "needs 'suffix'" in result.stderr
    assert "1 of 2 row(s) would fail" in result.stderr


def test_dry_run_of_one_question_missing_an_input_fails(echo):
    result = invoke("run", echo, "--dry-run", "-q", "hi")
    assert result.exit_code == 1
    assert "the question would fail" in result.stderr and "needs 'suffix'" in result.stderr
    assert invoke("run", echo, "--dry-run", "-q", "hi", "--field", "suffix=S").exit_code == 0


def test_dry_run_counts_an_unreadable_row_as_failing(ask, tmp_path):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"id": "a", "question": "one?"}\nnot json\n')
    result = invoke("run", ask, "--dry-run", "--input", data)
    assert result.exit_code == 3
    estimate = json.loads(result.stdout)
    assert estimate["rows"] == 2 and estimate["failed"] == 1 and estimate["estimated_calls"] == 1
    assert "(index 1) would fail" in result.stderr


def test_dry_run_applies_fields_to_every_row(echo, data):
    result = invoke("run", echo, "--dry-run", "--input", data, "--field", "suffix=S")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == 2 and "failed" not in json.loads(result.stdout)


# ---------------------------------------------------------------- 3. a wrong local model file
def test_local_model_file_that_is_not_gguf(ask, tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notamodel.py").write_text("print('hello')\n")
    result = invoke("run", ask, "-q", "three?", "--model", "local:notamodel.py", "--cache", "off")
    assert result.exit_code == 1
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert result.stderr.strip() == ("error: [ask] prompt: local model file notamodel.py is not a GGUF file "
                                     "(give a GGUF model, or local:gemma-3-270m)")


def test_local_model_file_not_found(ask, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("run", ask, "-q", "three?", "--model", "local:nothere.gguf", "--cache", "off")
    assert result.exit_code == 1
    assert result.stderr.strip() == ("error: [ask] prompt: local model file not found: nothere.gguf "
                                     "(a GGUF file, or local:gemma-3-270m)")


# ---------------------------------------------------------------- 4. endpoints that cannot be reached
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_ask(ask, base_url, model="m"):
    """The row error of one question through `openai:MODEL` at `base_url`, and the retries made."""
    session = Session(model=f"openai:{model}", settings=ModelSettings(base_url=base_url, timeout=10),
                      scheduler=Scheduler(backoff=0))
    result = session.run(session.load(ask), {"question": "three?"})
    return result.error, session.scheduler.retried


def test_connection_refused_is_final_and_named_once(ask):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    error, retried = run_ask(ask, url)
    assert error == f"[ask] prompt: openai:m: cannot reach {url} (connection refused)"
    assert retried == 0


def test_unknown_host_name_is_final(ask):
    try:
        socket.getaddrinfo("nohost.invalid", 80)
    except socket.gaierror as err:
        if err.errno == socket.EAI_AGAIN:
            pytest.skip("this machine's resolver cannot answer at all (temporary failure)")
    else:  # pragma: no cover - RFC 2606: .invalid never resolves
        pytest.skip("nohost.invalid resolves here")
    error, retried = run_ask(ask, "http://nohost.invalid:8000/v1")
    assert error == ("[ask] prompt: openai:m: cannot reach http://nohost.invalid:8000/v1 "
                     "(no such host name: nohost.invalid)")
    assert retried == 0


@pytest.mark.network
def test_tls_to_a_plain_http_server_is_final(ask):
    with MockOpenAIServer() as server:
        url = server.base_url.replace("http://", "https://")
        error, retried = run_ask(ask, url)
        assert server.stats()["requests"] == 0
    assert error.startswith(f"[ask] prompt: openai:m: cannot reach {url} (TLS handshake failed: ")
    assert retried == 0


@pytest.mark.network
def test_a_server_that_always_fails_names_the_model_once(ask):
    with MockOpenAIServer() as server:
        url = server.base_url
        error, retried = run_ask(ask, url, model="fault-500")
        assert server.stats()["requests"] == 7
    assert error == (f"[ask] prompt: openai:fault-500: gave up after 7 attempts; last error: {url} "
                     "failed (500: The server had an error while processing your request.)")
    assert retried == 6 and error.count("fault-500") == 1


def test_cli_unreachable_endpoint_message(ask):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = invoke("run", ask, "-q", "three?", "--model", "openai:m", "--base-url", url, "--cache", "off")
    assert result.exit_code == 1
    assert result.stderr == f"error: [ask] prompt: openai:m: cannot reach {url} (connection refused)\n"


# ---------------------------------------------------------------- 5. eval --pred RUN_DIR
def test_eval_pred_takes_a_run_directory(echo, data, tmp_path):
    run_dir = tmp_path / "run"
    assert invoke("run", echo, "--input", data, "--field", "suffix=S", "--run-dir", run_dir).exit_code == 0
    from_dir = invoke("eval", "--gold", data, "--pred", run_dir)
    assert from_dir.exit_code == 0, from_dir.output
    from_file = invoke("eval", "--gold", data, "--pred", run_dir / "results.jsonl")
    assert json.loads(from_dir.stdout) == json.loads(from_file.stdout)
    assert json.loads(from_dir.stdout) == {"metric": "em", "score": 0.5, "n": 2, "missing": 0}


def test_eval_pred_refuses_a_folder_without_a_run(data, tmp_path):
    result = invoke("eval", "--gold", data, "--pred", tmp_path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert str(tmp_path) in result.stderr


# ---------------------------------------------------------------- 6. stdout is the answer
def test_trace_goes_to_stderr_and_stdout_is_the_answer(echo):
    result = invoke("run", echo, "-q", "hi", "--field", "suffix=there", "--trace")
    assert result.exit_code == 0, result.output
    assert result.stdout == "hi there\n"
    tree = json.loads(result.stderr)
    assert tree["kind"] == "row" and tree["answer"] == "hi there"


def test_trace_out_writes_a_file(echo, tmp_path):
    out = tmp_path / "trees" / "tree.json"
    result = invoke("run", echo, "-q", "hi", "--field", "suffix=there", "--trace-out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == "hi there\n" and result.stderr == ""
    assert json.loads(out.read_text())["answer"] == "hi there"


def test_trace_with_input_is_a_usage_error(echo, data):
    result = invoke("run", echo, "--input", data, "--trace")
    assert result.exit_code == 2 and "--trace" in result.output and "run directory" in result.output


def test_verbose_dataset_run_prints_failed_rows_on_stderr(echo, data, tmp_path):
    result = invoke("run", echo, "--input", data, "--run-dir", tmp_path / "run", "-v")
    assert result.exit_code == 3, result.output  # finished, with a row in error
    summary = json.loads(result.stdout)  # one JSON line, nothing else
    assert summary["failed"] == 1
    assert result.stderr.startswith("row a (index 0) failed: [main] program")
    assert "needs 'suffix'" in result.stderr
    quiet = invoke("run", echo, "--input", data, "--run-dir", tmp_path / "quiet")
    assert quiet.exit_code == 3  # the rows' errors are not listed, only counted
    assert quiet.stderr == (f"error: 1 of 2 row(s) ended in an error (in {tmp_path / 'quiet' / 'results.jsonl'}; "
                            "-v prints each)\n")


def test_run_directory_options_with_a_question_are_a_usage_error(echo, tmp_path):
    result = invoke("run", echo, "-q", "hi", "--field", "suffix=S", "--output", tmp_path / "out.jsonl")
    assert result.exit_code == 2 and "--output" in result.output and "--input" in result.output
    assert not (tmp_path / "out.jsonl").exists()


# ---------------------------------------------------------------- --field values on --resume, by JSON text
def test_resume_compares_fields_by_their_json_text(echo, data, tmp_path):
    run_dir = tmp_path / "run"
    first = invoke("run", echo, "--input", data, "--field", 'suffix="4"', "--run-dir", run_dir)
    assert first.exit_code == 0, first.output
    assert json.loads((run_dir / "run.json").read_text())["options"]["fields"] == {"suffix": "4"}
    number = invoke("run", echo, "--input", data, "--field", "suffix=4", "--run-dir", run_dir, "--resume")
    assert number.exit_code == 1
    assert 'was run with --field suffix="4"; resuming with --field suffix=4 would mix two runs' in \
        " ".join(number.output.split())
    same = invoke("run", echo, "--input", data, "--field", 'suffix="4"', "--run-dir", run_dir, "--resume")
    assert same.exit_code == 0, same.output


def test_resume_tells_one_from_true(echo, data, tmp_path):
    run_dir = tmp_path / "run"
    assert invoke("run", echo, "--input", data, "--field", "suffix=1", "--run-dir", run_dir).exit_code == 0
    other = invoke("run", echo, "--input", data, "--field", "suffix=true", "--run-dir", run_dir, "--resume")
    assert other.exit_code == 1
    assert "--field suffix=1" in other.output and "--field suffix=true" in other.output


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_a_field_that_only_python_reads_as_a_number_stays_text(echo, data, tmp_path, word):
    run_dir = tmp_path / "run"
    result = invoke("run", echo, "--input", data, "--field", f"suffix={word}", "--run-dir", run_dir)
    assert result.exit_code == 0, result.output
    assert json.loads((run_dir / "run.json").read_text())["options"]["fields"] == {"suffix": word}
    assert [r["answer"] for r in results(run_dir)] == [f"one {word}", f"two {word}"]
    again = invoke("run", echo, "--input", data, "--field", f"suffix={word}", "--run-dir", run_dir, "--resume")
    assert again.exit_code == 0, again.output
