"""A resume takes its settings from run.json (`decomp.runtime.runs.resumed`): from Python, what
is left at its default (options, model, fields, row window, main); from both the CLI and Python,
the trusted modules and allowed folders, when the command gives none of its own."""
import json
import os

import pytest

from decomp import RunOptions
from decomp.runtime.runs.api import run_dataset
from tests.runtime.runs.run_helpers import files, manifest, results  # noqa: F401 (files: the fixture)
from tests.helpers import invoke


def cut(run_dir, keep=1):
    """The run as a kill leaves it: `keep` complete results lines, no summary."""
    lines = (run_dir / "results.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "results.jsonl").write_text("".join(lines[:keep]))
    (run_dir / "summary.json").unlink()


def test_a_python_resume_takes_the_options_model_fields_and_window_run_json_records(tmp_path, files, monkeypatch):
    program, answers, data = files
    run_dir = tmp_path / "run"
    options = RunOptions(cache_mode="off", concurrency=2, max_row_handler_calls=77)
    run_dataset(program, data, model=f"fake:{answers}", options=options, run_dir=run_dir,
                fields={"unit": "apples"}, offset=1)
    whole = results(run_dir)
    cut(run_dir)
    built = []
    session = RunOptions.session
    monkeypatch.setattr(RunOptions, "session", lambda self, *a: built.append(self) or session(self, *a))
    resumed = run_dataset(program, data, run_dir=run_dir, resume=True)  # nothing repeated
    assert built == [RunOptions(**{**options.__dict__, "model": f"fake:{answers}"})]
    assert results(run_dir) == whole and resumed.rows == len(whole) == 4  # rows 1.. of 5
    assert manifest(run_dir)["options"]["fields"] == {"unit": "apples"}
    assert manifest(run_dir)["sessions"][-1]["rows"] == 3


def test_a_python_resume_keeps_what_is_given_and_refuses_a_binding_one_that_differs(tmp_path, files):
    program, answers, data = files
    run_dir = tmp_path / "run"
    run_dataset(program, data, model=f"fake:{answers}", options=RunOptions(cache_mode="off"), run_dir=run_dir,
                fields={"unit": "apples"})
    cut(run_dir)
    with pytest.raises(Exception, match="fields"):
        run_dataset(program, data, run_dir=run_dir, resume=True, fields={"unit": "pears"})
    with pytest.raises(Exception, match="--model"):
        run_dataset(program, data, run_dir=run_dir, resume=True, model="fake:other.json")


@pytest.fixture
def confined(tmp_path):
    """A program that needs `--trust string` (its handler is string:capwords) and
    `--allow-root lib` (it imports ../lib/more.decomp), and three rows."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "more.decomp").write_text('handler unused = prompt(text="Q: a\\nA: b\\n")\n')
    (tmp_path / "p").mkdir()
    program = tmp_path / "p" / "m.decomp"
    program.write_text('import "../lib/more.decomp"\nhandler cap = python(function="string:capwords")\n'
                       'program p(question) {\n    QS: [cap] #question\n}\nmain p\n')
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "question": f"row {w} here"}) + "\n"
                            for i, w in enumerate(["one", "two", "three"])))
    return program, data, tmp_path / "lib"


def test_a_cli_resume_takes_the_trust_and_allowed_folders_run_json_records(tmp_path, confined):
    program, data, lib = confined
    run_dir = tmp_path / "run"
    assert invoke("run", program, "--input", data, "--run-dir", run_dir).exit_code == 1  # refused: confined
    first = invoke("run", program, "--input", data, "--run-dir", run_dir, "--force", "--trust", "string",
                   "--allow-root", lib, "--cache", "off")
    assert first.exit_code == 0, first.output
    recorded = manifest(run_dir)["options"]
    assert (recorded["trust"], recorded["allow_roots"]) == (["string"], [str(lib.resolve())])
    whole = results(run_dir)
    assert [whole[i]["answer"] for i in range(3)] == ["Row One Here", "Row Two Here", "Row Three Here"]
    cut(run_dir)
    resumed = invoke("run", program, "--input", data, "--run-dir", run_dir, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert (f"note: resuming with the trust run.json records: --trust string --allow-root {lib.resolve()}"
            in resumed.stderr)
    assert results(run_dir) == whole and manifest(run_dir)["sessions"][-1]["rows"] == 2


def test_trust_given_again_is_the_users_and_the_recorded_is_not_added(tmp_path, confined):
    program, data, lib = confined
    run_dir = tmp_path / "run"
    assert invoke("run", program, "--input", data, "--run-dir", run_dir, "--trust", "string",
                  "--allow-root", lib).exit_code == 0
    cut(run_dir)
    mine = invoke("run", program, "--input", data, "--run-dir", run_dir, "--resume", "--trust", "json")
    assert mine.exit_code == 1 and "'string:capwords' is not allowed" in mine.output, mine.output
    # the recorded folders were taken (none given), the recorded modules were not (--trust given)
    assert f"note: resuming with the trust run.json records: --allow-root {lib.resolve()}\n" in mine.stderr
    notes = []  # Python: the folders given, the modules taken from run.json
    run_dataset(program, data, options=RunOptions(allow_roots=[lib]), run_dir=run_dir, resume=True,
                on_note=notes.append)
    assert notes == ["resuming with the trust run.json records: --trust string"]
    assert len(results(run_dir)) == 3


def test_a_run_given_no_trust_records_none(tmp_path, files):
    program, answers, data = files
    run_dataset(program, data, model=f"fake:{answers}", run_dir=tmp_path / "run")
    assert not {"trust", "allow_roots"} & set(manifest(tmp_path / "run")["options"])
    assert os.environ.get("DECOMP_TRUST") is None
