"""What the run tests share (tests/runtime/runs/): the `decomp run` of the bundled letter_cat
program against the mock OpenAI server and the checks of its run directory (test_resume.py, the
shard and Ray tests), the small arithmetic program with its fake model (test_api.py,
test_resumed.py), a folder made truly read-only, a Jupyter kernelspec. Imported as
`from tests.runtime.runs.run_helpers import ...`."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decomp.runtime.storage.rundir import RunDir
from tests.helpers import invoke as invoke_cli
from tests.helpers import MODEL_ENV, untimed

HERE = Path(__file__).resolve().parent
HOOKED = HERE / "resume_helpers.py"
TIMEOUT = 120       # seconds any one `decomp run` may take before the test gives up on it (a hang guard)


# ------------------------------------------------------------------------------ letter_cat on the mock server
def model_args(dataset: Path, run_dir: Path, server, *more: str) -> list[str]:
    return ["run", "decomp/letter_cat_llm", "--input", str(dataset), "--run-dir", str(run_dir),
            "--model", "openai:mock", "--base-url", server.base_url, "--concurrency", "8", "--cache", "off", *more]


def invoke(args: list[str], **env: str):
    """`decomp ARGS...` in-process with `MODEL_ENV` (and `env`) set: the mock server's runs."""
    return invoke_cli(*args, env={**MODEL_ENV, **env})


def complete_records(run_dir: Path) -> dict[int, dict]:
    """The complete lines of results.jsonl by row index (a half-written last line left out),
    after checking that no row has two lines."""
    file = run_dir / "results.jsonl"
    if not file.exists():
        return {}
    lines = file.read_bytes().split(b"\n")[:-1]
    records = [json.loads(line) for line in lines]
    indices = [r["index"] for r in records]
    assert len(indices) == len(set(indices)), f"a row written twice: {sorted(indices)}"
    return {r["index"]: r for r in records}


def sessions(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "run.json").read_text())["sessions"]


def assert_same_as(run_dir: Path, baseline: Path, n: int, n_sessions: int) -> None:
    """`run_dir` is finished: each of the `n` rows once, in a valid file, with the same record
    and trace as in `baseline` (a run never interrupted), and a summary that counts them all."""
    data = (run_dir / "results.jsonl").read_bytes()
    assert data.endswith(b"\n")
    records = complete_records(run_dir)
    assert sorted(records) == list(range(n)) and data.count(b"\n") == n
    expected = complete_records(baseline)
    assert {i: untimed(r) for i, r in records.items()} == {i: untimed(r) for i, r in expected.items()}

    summary, base_summary = (json.loads((d / "summary.json").read_text()) for d in (run_dir, baseline))
    assert summary["rows"] == n and summary["sessions"] == n_sessions == len(sessions(run_dir))
    assert {k: v for k, v in untimed(summary).items() if k != "sessions"} == \
           {k: v for k, v in untimed(base_summary).items() if k != "sessions"}

    run, base = RunDir.open(run_dir), RunDir.open(baseline)
    try:
        for i in range(n):
            tree = run.trace(i)
            assert tree is not None, f"row {i} has no trace"
            assert untimed(tree.to_dict()) == untimed(base.trace(i).to_dict()), f"row {i}: another trace"
    finally:
        run.close()
        base.close()


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------ a small program on a fake model
PROGRAM = ('handler ask = prompt(text="Q: What is 1+1?\\nA: 2\\n")\n'
           'program p(question) {\n    QS: [ask] #question\n}\nmain p\n')
QUESTIONS = {"What is 2+2?": "4", "What is 3+3?": "6", "What is 4+4?": "8", "What is 5+5?": "10"}


def results(run_dir):
    """results.jsonl by row index, wall times left out."""
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(lines) == len({r["index"] for r in lines}), "a row written twice"
    return {r["index"]: untimed(r) for r in lines}


def manifest(run_dir):
    return json.loads((run_dir / "run.json").read_text())


@pytest.fixture
def files(tmp_path):
    """A program with one prompt, a fake model's answers file, and rows: three right, one
    answered wrong, one malformed line."""
    program = tmp_path / "prog" / "arith.decomp"
    program.parent.mkdir()
    program.write_text(PROGRAM)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"mapping": {q: " " + a for q, a in QUESTIONS.items()}}))
    rows = [{"id": f"q{i}", "question": q, "answer": a if i != 3 else "wrong"}
            for i, (q, a) in enumerate(QUESTIONS.items())]
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, '{"id": "broken", "question": ')
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(lines) + "\n")
    return program, answers, data


# ------------------------------------------------------------------------------ folders
@contextlib.contextmanager
def read_only(folder):
    """Make `folder` truly unwritable for this process, by the first way the system allows: its
    mode (a user other than root), else the immutable attribute (root: chmod does not stop it;
    needs CAP_LINUX_IMMUTABLE), else a stand-in where neither works: `os.access` answering no
    for the folder (what the check asks first)."""
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield "mode"
        finally:
            folder.chmod(mode)
        return
    if _chattr("+i", folder):
        try:
            yield "immutable"
        finally:
            assert _chattr("-i", folder)
        return
    real = os.access
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "access", lambda path, mode, **kw: False if os.fspath(path) == os.fspath(folder)
                      else real(path, mode, **kw))
        yield "access"


def _chattr(flag, folder) -> bool:
    try:
        return subprocess.run(["chattr", flag, str(folder)], capture_output=True, timeout=30).returncode == 0
    except OSError:
        return False


def kernel_spec(folder: Path) -> Path:
    """A kernelspec naming this interpreter (so the kernel imports the decomp under test)."""
    spec = folder / "kernels" / "decomp-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "decomp test", "language": "python"}))
    return folder
