"""`--temperature T` and `--max-output-tokens N` (`RunOptions.default_temperature`,
`max_output_tokens`): the temperature and reply length of model calls whose handler writes
none; a handler's own `temperature=` / `max_tokens=` wins, `--max-tokens` stays the run's token
budget, both reach the request (the fake model's history, the trace, an OpenAI-compatible
server's wire) and both are in the step cache's keys."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import decomp
from decomp import RunOptions
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.session import Session
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.helpers import MODEL_ENV, invoke

PROGRAM = '''handler plain = prompt(text="Q: 1?\\nA: 1\\n")
handler own   = prompt(text="Q: 2?\\nA: 2\\n", temperature=0.2, max_tokens=7)
handler steps = decomposer(examples="QC: 3?\\nQS: [plain] 3\\nA: 3\\nQS: [EOQ]\\n")
program p(question) {
    QS: [plain] #question
    QS: [own] #1
}
main p
'''
RESPONDER = '''def echo(request):
    return f"t={request.temperature} m={request.max_tokens}"
'''


@pytest.fixture
def program(tmp_path) -> Path:
    path = tmp_path / "prog.decomp"
    path.write_text(PROGRAM)
    (tmp_path / "responder.py").write_text(RESPONDER)
    return path


def _sent(session: Session, program: Path, target: str | None = None) -> list[tuple[float, int]]:
    model = session.model_override
    result = session.run(session.load(program), {"question": "x"}, target)
    assert result.error is None, result.error
    return [(r.temperature, r.max_tokens) for r in model.history]


def test_a_handler_that_writes_none_takes_the_runs_and_its_own_option_wins(program):
    options = RunOptions(default_temperature=0.7, max_output_tokens=33, cache_mode="off")
    assert _sent(options.session(FakeModel(default="1")), program) == [(0.7, 33), (0.2, 7)]


def test_without_them_each_kind_keeps_its_default(program):
    assert _sent(RunOptions(cache_mode="off").session(FakeModel(default="1")), program) == [(0.0, 200), (0.2, 7)]


def test_a_decomposer_takes_them_too(program):
    model = FakeModel(default="[EOQ]")
    session = RunOptions(default_temperature=0.4, max_output_tokens=50, cache_mode="off").session(model)
    assert _sent(session, program, "steps") == [(0.4, 50)]


def test_a_sessions_own_temperature_still_wins_over_both(program):
    """`decomp optimize`'s teacher rounds (`RunOptions.temperature`) sample whatever the handlers say."""
    session = Session(model=FakeModel(default="1"), temperature=0.9, default_temperature=0.3, max_output_tokens=20)
    assert _sent(session, program) == [(0.9, 20), (0.9, 7)]


def test_the_trace_says_what_was_sent(program):
    session = Session(model=FakeModel(default="1"), default_temperature=0.7, max_output_tokens=33)
    result = session.run(session.load(program), {"question": "x"})
    facts = [(n.facts["temperature"], n.facts["max_tokens"]) for n in result.trace.walk() if n.kind == "model"]
    assert facts == [(0.7, 33), (0.2, 7)]


@pytest.mark.parametrize("settings, changed", [({}, False), ({"default_temperature": 0.0}, False),
                                               ({"default_temperature": 0.5}, True),
                                               ({"max_output_tokens": 200}, False),
                                               ({"max_output_tokens": 33}, True)])
def test_the_step_cache_key_holds_what_was_sent(program, tmp_path, settings, changed):
    """A call sent at another temperature or length is another answer: a miss. The same values
    as the kind's defaults, given on the command line, are the same request: a hit."""
    cache = tmp_path / "steps.sqlite"
    assert _sent(Session(model=FakeModel(default="1"), cache=StepCache(cache)), program) == [(0.0, 200), (0.2, 7)]
    again = _sent(Session(model=FakeModel(default="1"), cache=StepCache(cache), **settings), program)
    assert len(again) == (1 if changed else 0)  # [own] writes its own: a hit either way


def test_the_python_api_takes_them_as_settings(program, tmp_path):
    (tmp_path / "answers.json").write_text('{"default": "1"}')
    loaded = decomp.load(program, model=f"fake:{tmp_path / 'answers.json'}", default_temperature=0.7,
                         max_output_tokens=33, cache_mode="off")
    done = loaded.run("x")
    assert [(n.facts["temperature"], n.facts["max_tokens"]) for n in done.trace.walk() if n.kind == "model"] == \
        [(0.7, 33), (0.2, 7)]


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="default_temperature must be >= 0"):
        Session(default_temperature=-0.1)
    with pytest.raises(ValueError, match="max_output_tokens must be >= 1"):
        Session(max_output_tokens=0)


# ---- the command line
def test_the_flags_reach_a_fake_models_request_and_max_tokens_stays_the_budget(program, monkeypatch):
    monkeypatch.chdir(program.parent)  # where a --model fake:module:function responder is looked for
    done = invoke("run", program, "-q", "x", "--model", "fake:responder:echo", "--cache", "off",
                  "--temperature", "0.7", "--max-output-tokens", "33", "--max-tokens", "100000")
    assert done.exit_code == 0, done.output
    assert done.output.strip() == "t=0.2 m=7"  # the second step, [own], answers: its own options
    done = invoke("run", program, "-q", "x", "--model", "fake:responder:echo", "--cache", "off",
                  "--temperature", "0.7", "--max-output-tokens", "33", "--main", "plain")
    assert done.output.strip() == "t=0.7 m=33"
    done = invoke("run", program, "-q", "x", "--model", "fake:responder:echo", "--cache", "off",
                  "--max-tokens", "100000", "--main", "plain")
    assert done.output.strip() == "t=0.0 m=200", "--max-tokens is the run's budget, not a reply's length"


@pytest.mark.parametrize("flag, value", [("--temperature", "-1"), ("--temperature", "nan"),
                                         ("--max-output-tokens", "0"), ("--max-output-tokens", "many")])
def test_bad_flag_values_are_usage_errors(program, flag, value):
    done = invoke("run", program, "-q", "x", "--model", "fake:", flag, value)
    assert done.exit_code == 2 and flag in done.output and "Traceback" not in done.output


@pytest.mark.network
def test_the_flags_reach_an_openai_endpoints_wire(program):
    with MockOpenAIServer() as server:
        done = invoke("run", program, "-q", "x", "--model", "openai:m", "--base-url", server.base_url,
                      "--cache", "off", "--temperature", "0.7", "--max-output-tokens", "33", env=MODEL_ENV)
        assert done.exit_code == 0, done.output
        sent = [(body["temperature"], body["max_tokens"]) for body in server.requests]
    assert sent == [(0.7, 33), (0.2, 7)]


def test_optimize_takes_them_too():
    done = invoke("optimize", "--help")
    assert "--temperature" in done.output and "--max-output-tokens" in done.output


def test_a_dataset_run_records_them_and_a_resume_takes_them(program, tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": "x"}) + "\n" for i in range(2)))
    assert "default_temperature" not in RunOptions().to_dict() and "max_output_tokens" not in RunOptions().to_dict()
    (tmp_path / "answers.json").write_text('{"default": "1"}')
    options = RunOptions(model=f"fake:{tmp_path / 'answers.json'}", default_temperature=0.7, max_output_tokens=33,
                         cache_mode="off")
    done = run_dataset(program, data, options=options, run_dir=tmp_path / "run", main="plain")
    recorded = json.loads((done.run_dir / "run.json").read_text())["options"]
    assert (recorded["default_temperature"], recorded["max_output_tokens"]) == (0.7, 33)
    lines = (done.run_dir / "results.jsonl").read_text().splitlines()
    (done.run_dir / "results.jsonl").write_text(lines[0] + "\n")
    (done.run_dir / "summary.json").unlink()
    resumed = invoke("run", program, "--input", data, "--run-dir", tmp_path / "run", "--resume")
    assert resumed.exit_code == 0 and '"failed": 0' in resumed.output, resumed.output
    rerun = dict(RunDir.open(done.run_dir).traces())[1]  # the row the resume ran
    assert [(n.facts["temperature"], n.facts["max_tokens"]) for n in rerun.walk() if n.kind == "model"] == [(0.7, 33)]
