"""An API key written into --base-url (user-info or query string) is used for requests but never
stored: run.json, results, traces and the printed summary hold the URL redacted (issue 14, 3)."""
import json

from click.testing import CliRunner

from decomp.runtime.runs.api import run_dataset
from decomp.runtime.cli import main
from decomp.runtime.runs.api import RunOptions

KEY, QUERY_KEY = "sk-user-info-key-123456", "query-key-abcdef"
URL = f"http://me:{KEY}@127.0.0.1:9/v1?api-key={QUERY_KEY}"


def _files(tmp_path):
    program = tmp_path / "ask.decomp"
    program.write_text('handler ask = prompt(text="Q: 1+1?\\nA: 2\\n\\nQ: {{question}}\\nA:")\nmain ask\n',
                       encoding="utf-8")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"default": "2"}), encoding="utf-8")
    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": "a", "question": "1+1?"}\n', encoding="utf-8")
    return program, answers, data


def _every_file(folder):
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_the_recorded_options_hold_the_url_redacted():
    recorded = RunOptions(base_url=URL).to_dict()
    assert recorded["base_url"] == "http://***@127.0.0.1:9/v1?api-key=***"
    assert RunOptions(base_url=URL).base_url == URL  # the session still calls the real URL


def test_no_file_of_the_run_and_no_output_holds_the_key(tmp_path):
    program, answers, data = _files(tmp_path)
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--run-dir", str(run_dir),
                                       "--model", f"fake:{answers}", "--base-url", URL, "--cache", "off"])
    assert result.exit_code == 0, result.output
    stored = _every_file(run_dir)
    assert KEY.encode() not in stored and QUERY_KEY.encode() not in stored
    assert KEY not in result.output and QUERY_KEY not in result.output
    manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert manifest["options"]["base_url"] == "http://***@127.0.0.1:9/v1?api-key=***"


def test_run_dataset_records_it_redacted_too(tmp_path):
    program, answers, data = _files(tmp_path)
    done = run_dataset(program, data, model=f"fake:{answers}", run_dir=tmp_path / "run",
                       options=RunOptions(base_url=URL, cache_mode="off"))
    assert done.failed == 0
    assert KEY.encode() not in _every_file(tmp_path / "run")
