"""`decomp run --shard I/N` and `decomp merge`: four shards run as four processes against one mock
server merge into a run directory equal to a single run's (results, traces, summary); a missing
shard is finished by `--resume` on the merged run; shards of different runs are refused."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.letter_cat_oracle import make_rows, respond
from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.runs.shards import Shard, merge_runs
from tests.runtime.runs.run_helpers import MODEL_ENV, assert_same_as, invoke

REPO = Path(__file__).resolve().parents[3]
ROWS = 18  # not a multiple of 4: the shards differ in size

MOCK_SERVER = {"responder": respond}  # the `server` fixture (tests/conftest.py) answers every prompt right


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "letters.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in make_rows(ROWS, seed=11)))
    return path


def run_args(dataset: Path, run_dir: Path, server, *more: str) -> list[str]:
    return ["run", "decomp/letter_cat_llm", "--input", str(dataset), "--run-dir", str(run_dir),
            "--model", "openai:mock", "--base-url", server.base_url, "--concurrency", "4", "--cache", "off", *more]


@pytest.fixture(scope="module")
def whole(server, dataset, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    result = invoke(run_args(dataset, run_dir, server))
    assert result.exit_code == 0, result.output
    return run_dir


@pytest.fixture(scope="module")
def shards(server, dataset, tmp_path_factory) -> list[Path]:
    """The four shards, each run by its own `decomp` process, all at once."""
    root = tmp_path_factory.mktemp("shards")
    env = {**os.environ, **MODEL_ENV}
    procs = [subprocess.Popen([sys.executable, "-m", "decomp.runtime.cli", *run_args(dataset, root / f"part{i}", server,
                                                                          "--shard", f"{i}/4")],
                              env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        assert json.loads(out)["rows"] in (4, 5)
    return [root / f"part{i}" for i in range(4)]


def test_each_shard_runs_every_fourth_row(shards):
    for i, part in enumerate(shards):
        run = RunDir.open(part)
        assert sorted(run.done) == [k for k in range(ROWS) if k % 4 == i]
        assert run.manifest["options"]["shard"] == f"{i}/4"


def test_merged_shards_equal_a_single_run(shards, whole, tmp_path):
    out = tmp_path / "merged"
    result = invoke(["merge", *map(str, reversed(shards)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["rows"] == ROWS and printed["failed"] == 0 and printed["score"] == 1.0
    assert_same_as(out, whole, ROWS, n_sessions=4)
    lines = [json.loads(line)["index"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert lines == list(range(ROWS))  # in input order
    manifest = json.loads((out / "run.json").read_text())
    assert "shard" not in manifest["options"] and manifest["merged"]["missing"] == []
    assert sorted(s["shard"] for s in manifest["sessions"]) == ["0/4", "1/4", "2/4", "3/4"]
    assert sorted((out / "program").rglob("*.decomp")) and (out / "traces.sqlite").is_file()


def test_a_missing_shard_is_run_by_resuming_the_merged_run(shards, whole, server, dataset, tmp_path):
    out = tmp_path / "merged"
    assert invoke(["merge", str(shards[0]), str(shards[2]), str(shards[3]), "--out", str(out)]).exit_code == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["merged"]["missing"] == ["1/4"]
    assert len(RunDir.open(out).done) == ROWS - len(range(1, ROWS, 4))
    result = invoke(run_args(dataset, out, server, "--resume"))
    assert result.exit_code == 0, result.output
    assert_same_as(out, whole, ROWS, n_sessions=4)


def test_a_shard_resumes_as_itself_only(shards, server, dataset):
    result = invoke(run_args(dataset, shards[1], server, "--resume", "--shard", "2/4"))
    assert result.exit_code == 1 and "--shard 1/4" in result.stderr, result.output
    again = invoke(run_args(dataset, shards[1], server, "--resume", "--shard", "1/4"))
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["rows"] == len(range(1, ROWS, 4))


def test_merge_refuses_what_is_not_one_split(shards, whole, tmp_path, server, dataset):
    with pytest.raises(RunDirError, match="whole run, not a shard"):
        merge_runs([shards[0], whole], tmp_path / "a")
    with pytest.raises(RunDirError, match="given twice"):
        merge_runs([shards[0], shards[0]], tmp_path / "b")
    copy = tmp_path / "copy"
    shutil.copytree(shards[0], copy)
    with pytest.raises(RunDirError, match="both shard 0/4"):
        merge_runs([shards[0], copy], tmp_path / "b")
    other = tmp_path / "other"
    assert invoke(run_args(dataset, other, server, "--shard", "1/3")).exit_code == 0
    with pytest.raises(RunDirError, match="different splits"):
        merge_runs([shards[0], other], tmp_path / "c")
    with pytest.raises(RunDirError, match="one of the shards"):
        merge_runs(shards, shards[0])
    foreign = tmp_path / "foreign"
    assert invoke(run_args(dataset, foreign, server, "--shard", "1/4", "--field", "x=1")).exit_code == 0
    with pytest.raises(RunDirError, match="--fields differs"):
        merge_runs([shards[0], foreign], tmp_path / "d")
    result = invoke(["merge", str(shards[0]), str(whole), "--out", str(tmp_path / "e")])
    assert result.exit_code == 1 and "not a shard" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("text, index, count", [("0/1", 0, 1), ("3/4", 3, 4), (" 1 / 2 ", 1, 2)])
def test_shard_parses(text, index, count):
    assert Shard.parse(text) == Shard(index, count)


@pytest.mark.parametrize("text", ["4/4", "1", "-1/4", "a/b", "0/0", "1/4/2", ""])
def test_a_bad_shard_says_what_is_expected(text):
    with pytest.raises(ValueError, match="--shard"):
        Shard.parse(text)


def test_shards_cover_every_row_once():
    split = [Shard(i, 3) for i in range(3)]
    assert all(sum(s.takes(k) for s in split) == 1 for k in range(100))


def test_a_shard_being_written_is_not_merged(shards, tmp_path):
    from decomp.runtime.storage.locks import release, writer_lock

    lock = writer_lock(shards[2])
    try:
        with pytest.raises(RunDirError, match="being written"):
            merge_runs(shards, tmp_path / "m")
    finally:
        release(lock)
    assert not (tmp_path / "m").exists()


def _copy(part: Path, to: Path) -> Path:
    shutil.copytree(part, to)
    return to


def _snapshot(folder: Path) -> dict:
    """Every file's bytes but run.lock's (an empty file a writer's lock leaves)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "run.lock"}


def test_a_merge_that_fails_leaves_out_as_it_was(shards, tmp_path):
    """A shard with a results line but no trace: the merge fails before anything reaches --out,
    with --force too, and leaves no folder of its own behind."""
    out = tmp_path / "out"
    assert invoke(["merge", *map(str, shards), "--out", str(out)]).exit_code == 0
    before = _snapshot(out)
    damaged = _copy(shards[1], tmp_path / "damaged")
    import sqlite3
    with sqlite3.connect(damaged / "traces.sqlite") as db:
        db.execute("DELETE FROM traces WHERE idx = 5")
    result = invoke(["merge", str(shards[0]), str(damaged), str(shards[2]), str(shards[3]), "--out", str(out), "--force"])
    assert result.exit_code == 1 and "row 5 has a results line but no trace" in result.stderr, result.output
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged", "out"]


def test_an_unfinished_shard_is_listed_and_named(shards, tmp_path):
    cut = _copy(shards[1], tmp_path / "cut")
    lines = (cut / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (cut / "results.jsonl").write_text(lines[0], encoding="utf-8")
    out = tmp_path / "out"
    result = invoke(["merge", str(shards[0]), str(cut), str(shards[2]), str(shards[3]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    merged = json.loads((out / "run.json").read_text())["merged"]
    assert merged["missing"] == [] and merged["unfinished"] == ["1/4"]
    assert "shard 1/4 did not finish" in result.stderr
    whole = invoke(["merge", *map(str, shards), "--out", str(tmp_path / "whole")])
    assert json.loads((tmp_path / "whole" / "run.json").read_text())["merged"]["unfinished"] == []
    assert "did not finish" not in whole.stderr


def test_read_only_shards_are_merged(shards, tmp_path):
    from tests.runtime.runs.run_helpers import read_only

    frozen = _copy(shards[0], tmp_path / "frozen")
    with read_only(frozen):
        result = invoke(["merge", str(frozen), *map(str, shards[1:]), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert len(RunDir.open(tmp_path / "out").done) == ROWS


def test_shards_run_with_other_row_budgets_are_refused(shards, tmp_path, server, dataset):
    other = tmp_path / "other"
    assert invoke(run_args(dataset, other, server, "--shard", "1/4", "--max-row-calls", "50")).exit_code == 0
    with pytest.raises(RunDirError, match="--max-row-calls differs"):
        merge_runs([shards[0], other], tmp_path / "m")


@pytest.mark.parametrize("flag, value", [("--max-answer-size", "1"), ("--handler-memory", "300"),
                                         ("--call-deadline", "30")])
def test_shards_run_with_other_limits_that_decide_answers_are_refused(shards, tmp_path, server, dataset, flag, value):
    other = tmp_path / "other"
    assert invoke(run_args(dataset, other, server, "--shard", "1/4", flag, value)).exit_code == 0
    with pytest.raises(RunDirError, match=f"{flag} differs"):
        merge_runs([shards[0], other], tmp_path / "m")


def test_a_damaged_shard_record_is_a_run_dir_error(shards, tmp_path):
    bad = _copy(shards[1], tmp_path / "bad")
    manifest = json.loads((bad / "run.json").read_text())
    manifest["options"]["shard"] = "one of four"
    (bad / "run.json").write_text(json.dumps(manifest))
    result = invoke(["merge", str(shards[0]), str(bad), "--out", str(tmp_path / "m")])
    assert result.exit_code == 1 and "not I/N: a damaged run.json" in result.stderr and "Traceback" not in result.output
