"""`--api chat|completions|auto` (`RunOptions.api`), against a chat-only OpenAI-compatible
server (the mock's `apis=("chat",)`): auto finds the chat API once per model and endpoint, says
so on one line, records it in run.json as soon as it is found, and a resume (even of a killed
run) starts on it: no second note, no completions request."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from decomp import RunOptions
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.runs.resumed import Recorded
from tests.runtime.runs.run_helpers import MODEL_ENV, invoke

HERE = Path(__file__).parent
PROGRAM = ('handler ask = prompt(text="Q: What is 1+1?\\nA: 2\\n\\nQ: What is 2+2?\\nA: 4\\n", max_tokens=8)\n'
           'program p(question) {\n    QS: [ask] #question\n}\nmain p\n')
ROWS = 5
FOUND = "refused the completions API"  # the words of the one note line (runtime/models/openai_backend.py)

# A chat-only server (the `server` fixture, tests/conftest.py): a completions request gets OpenAI's
# 404 for a chat model.
MOCK_SERVER = {"apis": ("chat",), "responder": lambda prompt, request: "42"}


@pytest.fixture
def files(tmp_path):
    program = tmp_path / "prog.decomp"
    program.write_text(PROGRAM)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": f"What is {i}+40?", "answer": "42"}) + "\n"
                            for i in range(ROWS)))
    return program, data


def model(server, *more: str) -> list[str]:
    return ["--model", "openai:gpt-4o-mini", "--base-url", server.base_url, "--cache", "off", *more]


def sent(server) -> tuple[int, int]:
    """How many chat requests (they carry `messages`) and completions requests (`prompt`) the
    server received since its last reset."""
    bodies = server.requests
    return sum("messages" in b for b in bodies), sum("prompt" in b for b in bodies)


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if FOUND in line]


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def cut(run_dir: Path, keep: int = 1) -> None:
    """The run as a kill leaves it: `keep` complete results lines, no summary."""
    lines = (run_dir / "results.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "results.jsonl").write_text("".join(lines[:keep]))
    (run_dir / "summary.json").unlink()


def where(server) -> str:
    return f"openai:gpt-4o-mini@{server.base_url}"


def test_a_question_finds_the_chat_api_and_says_so_on_one_line(files, server):
    program, _ = files
    server.reset_stats()
    done = subprocess.run([sys.executable, "-m", "decomp", "run", str(program), "-q", "What is 3+3?",
                           *model(server)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **MODEL_ENV})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"
    found = notes(done.stderr)
    assert len(found) == 1 and found[0].startswith("note: openai:gpt-4o-mini: ") and "--api chat" in found[0]
    assert sent(server) == (1, 1)  # one completions request refused, then chat from there on


def test_api_chat_answers_with_no_note_and_no_completions_request(files, server):
    program, _ = files
    server.reset_stats()
    done = invoke(["run", program, "-q", "What is 3+3?", *model(server, "--api", "chat")])
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "42" and notes(done.stderr) == []
    assert sent(server) == (1, 0)


def test_api_completions_on_a_chat_only_server_fails_naming_api_chat(files, server):
    program, _ = files
    done = invoke(["run", program, "-q", "What is 3+3?", *model(server, "--api", "completions")])
    assert done.exit_code == 1
    assert "pass --api chat" in done.stderr and "Traceback" not in done.output
    assert notes(done.stderr) == []


def test_a_dataset_run_records_the_found_api_and_a_killed_runs_resume_starts_on_it(files, server, tmp_path):
    program, data = files
    run_dir = tmp_path / "run"
    server.reset_stats()
    killed = subprocess.run([sys.executable, str(HERE / "resume_helpers.py"), "trace-only", "3", "run", str(program),
                             "--input", str(data), "--run-dir", str(run_dir), "--concurrency", "1", *model(server)],
                            capture_output=True, text=True, timeout=120, env={**os.environ, **MODEL_ENV})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(notes(killed.stderr)) == 1
    options = manifest(run_dir)["options"]
    assert options["apis"] == {where(server): "chat"} and "api" not in options  # found, and --api left at auto
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 2

    server.reset_stats()
    resumed = invoke(["run", program, "--input", data, "--run-dir", run_dir, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["rows"] == ROWS and json.loads(resumed.stdout)["score"] == 1.0
    assert notes(resumed.stderr) == []
    assert sent(server) == (ROWS - 2, 0)  # the rows left, each on chat from the start
    assert manifest(run_dir)["options"]["apis"] == {where(server): "chat"}


def test_a_python_run_says_the_note_through_on_note_and_its_resume_takes_the_apis(files, server, tmp_path):
    program, data = files
    run_dir = tmp_path / "run"
    said = []
    options = RunOptions(model="openai:gpt-4o-mini", base_url=server.base_url, cache_mode="off", concurrency=4)
    run_dataset(program, data, options=options, run_dir=run_dir, on_note=said.append)
    assert len(said) == 1 and FOUND in said[0]  # four rows in flight at once: still one line
    assert manifest(run_dir)["options"]["apis"] == {where(server): "chat"}
    cut(run_dir)

    server.reset_stats()
    said.clear()
    resumed = run_dataset(program, data, run_dir=run_dir, resume=True, on_note=said.append)
    assert resumed.rows == ROWS and said == [] and sent(server) == (ROWS - 1, 0)

    cut(run_dir)  # options of one's own, api given again: nothing recorded is taken
    server.reset_stats()
    run_dataset(program, data, options=options, run_dir=run_dir, resume=True, on_note=said.append)
    assert len(said) == 1 and sent(server)[1] >= 1


def test_a_resume_given_api_again_does_not_take_the_found_apis(files, server, tmp_path):
    program, data = files
    run_dir = tmp_path / "run"
    assert invoke(["run", program, "--input", data, "--run-dir", run_dir, *model(server)]).exit_code == 0
    cut(run_dir)
    server.reset_stats()
    again = invoke(["run", program, "--input", data, "--run-dir", run_dir, "--resume", "--api", "auto"])
    assert again.exit_code == 0, again.output
    assert len(notes(again.stderr)) == 1 and sent(server)[1] >= 1


def test_a_session_keeps_what_auto_found_for_models_built_again(files, server):
    program, _ = files
    said = []
    session = RunOptions(model="openai:gpt-4o-mini", base_url=server.base_url, cache_mode="off").session(
        on_note=said.append)
    loaded = session.load(program)
    server.reset_stats()
    assert session.run(loaded, {"question": "What is 3+3?"}).answer == 42
    assert session.apis == {where(server): "chat"} and len(said) == 1
    assert session.run(loaded, {"question": "What is 4+4?"}).answer == 42  # its models built again after aclose
    assert len(said) == 1 and sent(server) == (2, 1)


def test_a_declared_api_wins_over_what_was_found(tmp_path, server):
    program = tmp_path / "p.decomp"
    program.write_text('model m = "openai:gpt-4o-mini" (api="completions")\n' + PROGRAM.replace(
        "max_tokens=8)", "max_tokens=8, model=\"m\")"))
    session = RunOptions(base_url=server.base_url, apis={where(server): "chat"}).session()
    session.load(program)
    assert not session.model("m").chat and session.model("openai:gpt-4o-mini").chat


def test_run_json_records_api_only_when_given_and_apis_only_when_found():
    assert "api" not in RunOptions().to_dict() and "apis" not in RunOptions().to_dict()
    recorded = RunOptions(api="chat", apis={"openai:x@h": "chat"}).to_dict()
    assert recorded["api"] == "chat" and recorded["apis"] == {"openai:x@h": "chat"}


def test_a_resume_takes_only_well_formed_found_apis():
    edited = Recorded({"apis": {"openai:a@h": "chat", "openai:b@h": "bogus", "openai:c@h": 3}}, None)
    assert edited.apis == {"openai:a@h": "chat"} == edited.session_options(["apis"])["apis"]
    assert Recorded({"apis": ["chat"]}, None).apis == {} and Recorded({}, None).session_options(["apis"]) == {}


@pytest.mark.parametrize("command", [["run"], ["optimize"]])
def test_every_command_taking_model_lists_api(command):
    shown = invoke([*command, "--help"]).output
    assert "--model" in shown and "--api [auto|chat|completions]" in shown


def test_eval_runs_no_model_so_takes_no_api():
    shown = invoke(["eval", "--help"]).output
    assert "--model" not in shown and "--api" not in shown
