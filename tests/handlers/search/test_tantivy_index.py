"""The embedded tantivy index: build, search, incremental add, versions, query escaping."""
import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.handlers.search.search_fixtures import PARAGRAPHS, corpus, tantivy_folder, write_corpus  # noqa: F401
from decomp.handlers.search.corpus import CorpusError, Record, read_corpus
from decomp.handlers.search.services import TantivyService
from decomp.handlers.search.tantivy_index import (MANIFEST, SearchIndexError, TantivyIndex, build_index,
                                                  read_manifest, safe_query)


def test_build_writes_a_ready_manifest(tantivy_folder):
    manifest = json.loads((tantivy_folder / MANIFEST).read_text())
    assert manifest["backend"] == "tantivy" and manifest["state"] == "ready" and manifest["format"] == 1
    assert manifest["documents"] == len(PARAGRAPHS) and len(manifest["version"]) == 32
    assert read_manifest(tantivy_folder) == manifest


def test_search_ranks_best_first_with_stored_fields(tantivy_folder):
    index = TantivyIndex(tantivy_folder)
    found = index.search(safe_query("Who founded the fishing town Brisk?"), 3)
    assert found[0] == {"id": "brisk", "title": "Brisk", "text": PARAGRAPHS[1]["text"], "score": found[0]["score"]}
    scores = [hit["score"] for hit in found]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert len(index.search(safe_query("Brisk"), 1)) == 1
    assert index.search(safe_query("zebra"), 5) == [] and index.search("", 5) == []


def test_titles_are_searched_too(tantivy_folder):
    found = TantivyIndex(tantivy_folder).search(safe_query("calder"), 5)
    assert {hit["id"] for hit in found} == {"calder", "marsh"}


HOSTILE = ['title:brisk AND (lake', 'What is "Lake Varn"?', 'NOT brisk OR', 'brisk^2 ~3 *', '[a TO z]',
           'id: IN [brisk]', '\\', '"', ')))', '+-&&||!', 'brisk_town', 'é ü 北京', 'AND', 'x' * 500,
           "Calder's 'bicycle' workshops: (1702)?", "{brisk}", "/re.*gex/", "`brisk`"]


@pytest.mark.parametrize("text", HOSTILE)
def test_query_text_is_never_syntax(tantivy_folder, text):
    terms = safe_query(text)
    assert all(ch.isalnum() or ch == " " for ch in terms) and terms == terms.lower()
    TantivyIndex(tantivy_folder).search(terms, 5)  # no ValueError


@pytest.fixture(scope="module")
def shared_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hyp") / "index"
    build_index([Record(p["id"], p["title"], p["text"]) for p in PARAGRAPHS], folder)
    return TantivyIndex(folder)


@pytest.mark.slow  # a property test with many examples
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
def test_any_text_searches_without_error(shared_index, text):
    assert isinstance(shared_index.search(safe_query(text), 3), list)


def test_safe_query_keeps_only_words():
    assert safe_query('Who founded "Brisk" (the TOWN)? AND: NOT_x') == "who founded brisk the town and not x"
    assert safe_query("?!") == ""


def test_incremental_add_changes_the_version(tantivy_folder, tmp_path):
    before = read_manifest(tantivy_folder)
    extra = write_corpus(tmp_path / "extra.jsonl", [{"id": "zeb", "title": "Zebra crossing", "text": "A zebra."}])
    manifest = build_index(read_corpus(extra), tantivy_folder, add=True)
    assert manifest["added"] == 1 and manifest["documents"] == len(PARAGRAPHS) + 1
    assert manifest["version"] != before["version"]
    assert [h["id"] for h in TantivyIndex(tantivy_folder).search("zebra", 5)] == ["zeb"]
    assert TantivyIndex(tantivy_folder).search("brisk", 1)[0]["id"] == "brisk"


def test_a_new_build_refuses_an_existing_index_unless_forced(tantivy_folder, corpus):
    before = read_manifest(tantivy_folder)["version"]
    with pytest.raises(SearchIndexError, match="already holds an index: --add adds to it, --force rebuilds it"):
        build_index(read_corpus(corpus), tantivy_folder)
    assert read_manifest(tantivy_folder)["version"] == before  # untouched
    manifest = build_index(read_corpus(corpus), tantivy_folder, force=True)
    assert manifest["version"] != before and manifest["documents"] == len(PARAGRAPHS)


def test_a_folder_that_is_not_an_index_is_never_overwritten(tmp_path, corpus):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(SearchIndexError, match="not empty and holds no index"):
        build_index(read_corpus(corpus), folder, force=True)
    assert (folder / "notes.txt").read_text() == "keep me"


def test_a_bad_line_leaves_no_half_built_index(tmp_path, tantivy_folder):
    bad = write_corpus(tmp_path / "bad.jsonl", [{"text": "fine"}, {"title": "no text"}])
    with pytest.raises(CorpusError, match=r"bad.jsonl:2: the paragraph has no \"text\""):
        build_index(read_corpus(bad), tmp_path / "new")
    assert not (tmp_path / "new").exists()
    before = read_manifest(tantivy_folder)
    with pytest.raises(CorpusError):
        build_index(read_corpus(bad), tantivy_folder, add=True)
    after = read_manifest(tantivy_folder)  # ready again, as it was, under a new version
    assert after["documents"] == before["documents"] and after["version"] != before["version"]
    assert TantivyIndex(tantivy_folder).search("fine", 5) == []


def test_manifest_problems(tmp_path, tantivy_folder):
    with pytest.raises(SearchIndexError, match="the folder does not exist .*decomp index build"):
        read_manifest(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SearchIndexError, match=f"it has no {MANIFEST}"):
        read_manifest(tmp_path / "empty")
    manifest = json.loads((tantivy_folder / MANIFEST).read_text())
    (tantivy_folder / MANIFEST).write_text(json.dumps({**manifest, "state": "building"}))
    with pytest.raises(SearchIndexError, match="is being built, or its build was interrupted"):
        TantivyIndex(tantivy_folder)


def test_the_service_reopens_a_rebuilt_index(tmp_path, tantivy_folder):
    service = TantivyService(tantivy_folder)

    async def version_and_hits(query):
        index = await service.current()
        return index.version, await service.search(index, safe_query(query), 5)

    first, hits = asyncio.run(version_and_hits("brisk"))
    assert first == read_manifest(tantivy_folder)["version"] and hits
    again, _ = asyncio.run(version_and_hits("brisk"))
    assert again == first
    other = write_corpus(tmp_path / "other.jsonl", [{"id": "z", "title": "Zebra", "text": "Zebras only."}])
    build_index(read_corpus(other), tantivy_folder, force=True)
    second, hits = asyncio.run(version_and_hits("zebra"))
    assert second != first and [h["id"] for h in hits] == ["z"]
