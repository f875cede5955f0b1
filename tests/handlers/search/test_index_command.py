"""`decomp index build`, through click's CliRunner."""
import json

import pytest

from decomp.handlers.search.tantivy_index import TantivyIndex, read_manifest
from tests.handlers.search.search_fixtures import PARAGRAPHS, corpus, index_name, opensearch_url, write_corpus  # noqa: F401
from tests.helpers import invoke


def test_build_prints_one_summary_line(tmp_path, corpus):
    result = invoke("index", "build", corpus, "--out", tmp_path / "idx")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["backend"] == "tantivy" and summary["index"] == str(tmp_path / "idx")
    assert summary["documents"] == summary["added"] == len(PARAGRAPHS) and summary["skipped"] == 0
    assert summary["version"] == read_manifest(tmp_path / "idx")["version"] and summary["seconds"] >= 0
    assert TantivyIndex(tmp_path / "idx").search("brisk", 1)[0]["id"] == "brisk"


def test_existing_index_add_and_force(tmp_path, corpus):
    out = tmp_path / "idx"
    first = json.loads(invoke("index", "build", corpus, "--out", out).stdout)
    refused = invoke("index", "build", corpus, "--out", out)
    assert refused.exit_code == 1
    assert f"error: {out} already holds an index: --add adds to it, --force rebuilds it" in refused.output
    added = json.loads(invoke("index", "build", corpus, "--out", out, "--add").stdout)
    assert added["documents"] == 2 * len(PARAGRAPHS) and added["added"] == len(PARAGRAPHS)
    forced = json.loads(invoke("index", "build", corpus, "--out", out, "--force").stdout)
    assert forced["documents"] == len(PARAGRAPHS)
    assert len({first["version"], added["version"], forced["version"]}) == 3


def test_bad_lines_stop_the_build_or_are_skipped(tmp_path):
    bad = write_corpus(tmp_path / "bad.jsonl", [{"text": "one"}, {"title": "no text"}, {"text": "three"}])
    stopped = invoke("index", "build", bad, "--out", tmp_path / "idx")
    assert stopped.exit_code == 1
    assert f'error: {bad}:2: the paragraph has no "text"' in stopped.output
    assert not (tmp_path / "idx").exists()
    skipped = invoke("index", "build", bad, "--out", tmp_path / "idx", "--skip-bad")
    assert skipped.exit_code == 0
    assert json.loads(skipped.stdout)["skipped"] == 1 and json.loads(skipped.stdout)["documents"] == 2
    assert f'skipped: {bad}:2: the paragraph has no "text"' in skipped.stderr


@pytest.mark.parametrize("args, message", [
    ([], "a tantivy index needs --out DIR"),
    (["--out", "x", "--url", "http://h:1"], "--url and --index-name are for --backend elasticsearch"),
    (["--backend", "elasticsearch"], "an Elasticsearch index needs --url"),
    (["--backend", "elasticsearch", "--url", "http://h:1", "--out", "x"], "--out is the folder of a tantivy index"),
])
def test_usage_errors(corpus, args, message):
    result = invoke("index", "build", corpus, *args)
    assert result.exit_code == 1 and message in result.output


@pytest.mark.network
def test_elasticsearch_backend(opensearch_url, index_name, corpus):
    result = invoke("index", "build", corpus, "--backend", "elasticsearch", "--url", opensearch_url,
                    "--index-name", index_name, "--server", "opensearch")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["backend"] == "elasticsearch" and summary["documents"] == len(PARAGRAPHS)
    refused = invoke("index", "build", corpus, "--backend", "elasticsearch", "--url", opensearch_url,
                     "--index-name", index_name, "--server", "opensearch")
    assert refused.exit_code == 1 and "the index already exists" in refused.output


def test_help_lists_index():
    assert "index" in invoke("--help").output
    assert "build" in invoke("index", "--help").output


def test_progress_bar_ticks_over_bytes(capsys):
    from decomp.handlers.search.build import bytes_progress
    from decomp.handlers.search.corpus import ReadStats

    with bytes_progress(100, enabled=False) as tick:
        assert tick is None
    with bytes_progress(100, enabled=True) as tick:
        tick(ReadStats(records=3, bytes_read=50))
        tick(ReadStats(records=6, skipped=1, bytes_read=100))
    assert "6 paragraphs · skipped 1" in capsys.readouterr().err


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("line, message", [
    ('{"id": "deep", "text": "x", "extra": ' + DEEP + '}',
     "not a corpus line: lists or objects nested too deeply to read (about a thousand levels)"),
    (DEEP, "not a corpus line: lists or objects nested too deeply to read"),
    ('{"id": "s", "title": "T", "text": "bad \\ud800 text"}',
     '"text" holds text no encoding can write (the lone surrogate \\ud800 at character 5); an index stores UTF-8'),
    ('{"id": "s\\udfff", "text": "fine"}', '"id" holds text no encoding can write (the lone surrogate \\udfff at'),
    ('{"title": "\\udc00", "text": "fine"}', '"title" holds text no encoding can write'),
])
def test_hostile_lines_stop_the_build_in_words_or_are_skipped(tmp_path, line, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "a", "text": "alpha"}) + "\n" + line + "\n"
                   + json.dumps({"id": "b", "text": "beta"}) + "\n", encoding="utf-8")
    stopped = invoke("index", "build", bad, "--out", tmp_path / "idx")
    assert stopped.exit_code == 1 and isinstance(stopped.exception, SystemExit), stopped.output
    assert f"error: {bad}:2: {message}" in stopped.output and "Traceback" not in stopped.output
    assert not (tmp_path / "idx").exists()
    skipped = invoke("index", "build", bad, "--out", tmp_path / "idx", "--skip-bad")
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout)["skipped"] == 1 and json.loads(skipped.stdout)["documents"] == 2
    assert f"skipped: {bad}:2: {message}" in skipped.stderr
