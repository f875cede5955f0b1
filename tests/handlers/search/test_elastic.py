"""The Elasticsearch backend over real HTTP: the official `elasticsearch` client against
osmem-server (an in-memory OpenSearch 3 REST API server started on a free loopback port by
search_fixtures.opensearch_server), with server="opensearch" (plain JSON media types). Also a
closed port, the server's own errors, and the error mapping of statuses it cannot be made to
send."""
import json
import socket
import time

import pytest

from decomp import Session
from decomp.dsl.errors import ServiceError, TransientServiceError
from decomp.handlers.search.corpus import read_corpus
from decomp.handlers.search.elastic import ElasticService, build_elastic, service_error, split_url
from decomp.handlers.search.tantivy_index import SearchIndexError
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.scheduler import Scheduler
from tests.handlers.search.search_fixtures import PARAGRAPHS, corpus, index_name, opensearch_url, write_corpus  # noqa: F401

pytestmark = pytest.mark.network


def _build(url, name, path, **kw):
    return build_elastic(read_corpus(path), url, name, server="opensearch", **kw)


def _module(tmp_path, options, name="es.decomp"):
    path = tmp_path / name
    path.write_text(f'handler retrieve = retrieve(backend="elasticsearch", {options})\nmain retrieve\n')
    return path


def _run(path, question, cache=None, scheduler=None):
    session = Session(cache=cache, scheduler=scheduler)
    return session.run(session.load(path), {"question": question})


def test_bulk_build_add_and_force(opensearch_url, index_name, corpus, tmp_path):
    summary = _build(opensearch_url, index_name, corpus)
    assert summary["documents"] == summary["added"] == len(PARAGRAPHS) and summary["failed"] == 0
    assert summary["url"] == opensearch_url and summary["index_name"] == index_name
    with pytest.raises(SearchIndexError, match="the index already exists: --add adds to it, --force rebuilds it"):
        _build(opensearch_url, index_name, corpus)
    extra = write_corpus(tmp_path / "extra.jsonl", [{"id": "z", "title": "Zebra", "text": "A zebra crossing."}])
    grown = _build(opensearch_url, index_name, extra, add=True)
    assert grown["documents"] == len(PARAGRAPHS) + 1 and grown["version"] != summary["version"]
    rebuilt = _build(opensearch_url, index_name, extra, force=True)
    assert rebuilt["documents"] == 1
    with pytest.raises(SearchIndexError, match="there is no such index to add to"):
        _build(opensearch_url, index_name + "-none", extra, add=True)


def test_a_bad_line_leaves_no_new_index(opensearch_url, index_name, tmp_path):
    from elasticsearch import Elasticsearch

    from decomp.handlers.search.corpus import CorpusError

    bad = write_corpus(tmp_path / "bad.jsonl", [{"text": "fine"}, {"title": "no text"}])
    with pytest.raises(CorpusError, match=r"bad.jsonl:2: the paragraph has no \"text\""):
        _build(opensearch_url, index_name, bad)
    with Elasticsearch(opensearch_url) as client:
        assert client.transport.perform_request("HEAD", f"/{index_name}").meta.status == 404


def test_search_through_the_kind_best_first(opensearch_url, index_name, corpus, tmp_path):
    _build(opensearch_url, index_name, corpus)
    path = _module(tmp_path, f'url="{opensearch_url}", index_name="{index_name}", server="opensearch", k=2')
    result = _run(path, 'Who founded "Brisk" (the fishing town)?')
    assert result.error is None, result.error
    assert result.answer[0]["id"] == "brisk" and len(result.answer) == 2
    assert set(result.answer[0]) == {"id", "title", "text", "score"}
    assert result.answer[0]["score"] >= result.answer[1]["score"]
    nodes = [n for n in result.trace.walk() if n.kind == "search"]
    assert [n.label for n in nodes] == [f"elasticsearch:{opensearch_url}/{index_name}"] * 2  # version, search
    missing = _run(path, "zebra")
    assert "no paragraph of" in missing.error and "'zebra'" in missing.error


def test_cached_by_the_version_stamped_at_build(opensearch_url, index_name, corpus, tmp_path):
    _build(opensearch_url, index_name, corpus)
    path = _module(tmp_path, f'url="{opensearch_url}", index_name="{index_name}", server="opensearch", k=1')
    cache = tmp_path / "steps.sqlite"
    first = _run(path, "Calder bicycle", StepCache(cache))
    again = _run(path, "Calder bicycle", StepCache(cache))
    assert first.answer == again.answer and (first.usage.cache_hits, again.usage.cache_hits) == (0, 1)
    extra = write_corpus(tmp_path / "extra.jsonl",
                         [{"id": "z", "title": "Calder bicycle museum", "text": "Calder bicycle bicycle museum."}])
    _build(opensearch_url, index_name, extra, add=True)  # a new version: the old entry is not read
    grown = _run(path, "Calder bicycle", StepCache(cache))
    assert grown.usage.cache_hits == 0 and grown.answer[0]["id"] == "z"


def test_an_index_made_by_other_means_is_never_cached(opensearch_url, index_name, tmp_path):
    from tests.handlers.search.search_fixtures import opensearch_server

    server = opensearch_server()
    server.request("PUT", f"/{index_name}", {"mappings": {"properties": {"title": {"type": "text"},
                                                                          "text": {"type": "text"}}}})
    server.request("POST", f"/{index_name}/_doc?refresh=true", {"title": "Brisk", "text": "A fishing town."})
    path = _module(tmp_path, f'url="{opensearch_url}", index_name="{index_name}", server="opensearch"')
    cache = tmp_path / "steps.sqlite"
    runs = [_run(path, "fishing town", StepCache(cache)) for _ in range(2)]
    assert [r.usage.cache_hits for r in runs] == [0, 0]
    assert runs[1].answer[0]["title"] == "Brisk" and runs[1].answer[0]["id"]  # the document's _id


def test_missing_index_is_a_plain_error(opensearch_url, tmp_path):
    path = _module(tmp_path, f'url="{opensearch_url}", index_name="nothing-here", server="opensearch"')
    result = _run(path, "brisk")
    assert result.error == (f"[retrieve] retrieve: elasticsearch:{opensearch_url}/nothing-here: not found at "
                            f"{opensearch_url} (404: index_not_found_exception: no such index [nothing-here])")


def test_default_compatibility_headers_are_refused_with_a_hint(opensearch_url, index_name, corpus, tmp_path):
    _build(opensearch_url, index_name, corpus)
    path = _module(tmp_path, f'url="{opensearch_url}", index_name="{index_name}"')
    result = _run(path, "brisk")
    assert "rejected the request (406:" in result.error
    assert 'is it an OpenSearch-API server? then set server="opensearch"' in result.error


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_fails_at_once_without_the_password(tmp_path):
    port = _closed_port()
    path = _module(tmp_path, f'url="http://reader:s3cret-pw@127.0.0.1:{port}", index_name="wiki", '
                             f'server="opensearch"')
    scheduler = Scheduler(backoff=5.0)  # a retry would take seconds
    started = time.perf_counter()
    result = _run(path, "brisk", scheduler=scheduler)
    assert time.perf_counter() - started < 5 and scheduler.retried == 0
    assert result.error == (f"[retrieve] retrieve: elasticsearch:http://127.0.0.1:{port}/wiki: "
                            f"cannot reach http://127.0.0.1:{port} (connection refused)")
    assert "s3cret" not in json.dumps(result.trace.to_dict())


def test_url_from_the_environment(tmp_path, monkeypatch):
    port = _closed_port()
    path = _module(tmp_path, 'url="$TEST_ES_URL", index_name="wiki", server="opensearch"')
    result = _run(path, "brisk")
    assert "url='$TEST_ES_URL': the environment variable TEST_ES_URL is not set" in result.error
    monkeypatch.setenv("TEST_ES_URL", f"http://reader:env-secret@127.0.0.1:{port}")
    result = _run(path, "brisk")
    assert f"cannot reach http://127.0.0.1:{port} (connection refused)" in result.error
    assert "env-secret" not in result.error and "env-secret" not in json.dumps(result.trace.to_dict())


def test_build_errors_name_the_server(tmp_path, corpus):
    port = _closed_port()
    with pytest.raises(SearchIndexError, match=rf"cannot reach http://127.0.0.1:{port} \(connection refused\)") as err:
        build_elastic(read_corpus(corpus), f"http://u:topsecret@127.0.0.1:{port}", "x")
    assert "topsecret" not in str(err.value)


def test_credentials_are_secrets_never_names():
    service = ElasticService("https://alice:pa%40ss@es.example:9200/", "wiki", api_key="KEY123")
    assert service.name == "elasticsearch:https://es.example:9200/wiki" and service.endpoint == "https://es.example:9200"
    assert set(service.secrets()) == {"KEY123", "alice:pa%40ss", "pa@ss"}
    assert split_url("http://h:1") == ("http://h:1", None)
    assert split_url("http://a:b%2Fc@h:1") == ("http://h:1", ("a", "b/c"))


def _api_error(status, body):
    from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
    from elasticsearch import ApiError

    meta = ApiResponseMeta(status=status, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                           node=NodeConfig("http", "h", 1))
    return ApiError(message="x", meta=meta, body=body)


@pytest.mark.parametrize("status, transient, text", [
    (503, True, "failed (503: unavailable_shards_exception: busy)"),
    (429, True, "rate limited by http://h:1 (429: "),
    (400, False, "rejected the request (400: unavailable_shards_exception: busy)"),
    (401, False, "refused the credentials (401: "),
])
def test_status_mapping(status, transient, text):
    err = service_error(_api_error(status, {"error": {"type": "unavailable_shards_exception", "reason": "busy"}}),
                        "es", "http://h:1", "opensearch")
    assert isinstance(err, TransientServiceError) is transient and isinstance(err, ServiceError)
    assert text in str(err)
