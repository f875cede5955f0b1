"""The Elasticsearch backend against servers that misbehave (issue 29): a fake server on
127.0.0.1 (decomp.runtime.testing.misbehaving) that trickles its reply a byte at a time, or
sends headers and hangs. Every search ends within its deadlines, the retrieve handler's
`timeout=` (one request in all) and `deadline=` (a search's attempts together, held by the
scheduler), retried meanwhile, with words that say which deadline and how to raise it. And
credentials in an Elasticsearch URL, user-info or a query value (`?api_key=...`), are shown
nowhere: not in names, errors, traces or a build's summary."""
import asyncio
import json
import socket
import time

import pytest

from decomp import Session
from decomp.dsl.errors import ServiceError
from decomp.handlers.search.corpus import read_corpus
from decomp.handlers.search.elastic import DEFAULT_CALL_DEADLINE, ElasticService, build_elastic, shown_url
from decomp.handlers.search.tantivy_index import SearchIndexError
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.testing.misbehaving import MisbehavingServer
from tests.handlers.search.search_fixtures import corpus  # noqa: F401

pytestmark = pytest.mark.network

MARGIN = 4.0  # seconds a loaded machine may add to a deadline


def _search(service: ElasticService, scheduler: Scheduler):
    async def go():
        try:
            return await scheduler.call(service, service.search, ("brisk", 3))
        except ServiceError as err:
            return err
        finally:
            await service.aclose()

    started = time.monotonic()
    out = asyncio.run(go())
    return out, time.monotonic() - started


@pytest.mark.parametrize("server", ["elasticsearch", "opensearch"])
@pytest.mark.parametrize("behaviour", ["trickle", "hang"])
def test_a_search_ends_within_its_call_deadline(server, behaviour):
    with MisbehavingServer(behaviour, interval=0.2) as fake:
        service = ElasticService(fake.url, "wiki", server=server, timeout=1, api_key="", call_deadline=3.5)
        scheduler = Scheduler(retries=1000, backoff=0.2, max_backoff=0.4, seed=1)
        err, took = _search(service, scheduler)
        requests = fake.requests
    assert took < 3.5 + MARGIN
    assert type(err) is ServiceError, err
    assert str(err).startswith(f"elasticsearch:{fake.url}/wiki: no answer within the call deadline of 3.5s (")
    assert ("attempts; raise it with the retrieve handler's deadline=SECONDS option); last error: "
            f"{fake.url} timed out after 1s, with no complete reply (raise it with the retrieve handler's "
            "timeout=SECONDS option)") in str(err)
    assert requests >= 2 and scheduler.retried >= 1 and scheduler.in_flight[service.endpoint] == 0


def test_one_request_ends_at_its_timeout_however_the_server_trickles():
    with MisbehavingServer("trickle", interval=0.1) as fake:
        service = ElasticService(fake.url, "wiki", server="opensearch", timeout=1.5, api_key="")
        err, took = _search(service, Scheduler(retries=0))
    assert str(err) == (f"elasticsearch:{fake.url}/wiki: gave up after 1 attempts; last error: {fake.url} timed out "
                        "after 1.5s, with no complete reply (raise it with the retrieve handler's timeout=SECONDS "
                        "option)")
    assert 1.4 < took < 1.5 + MARGIN


def test_the_retrieve_handler_sets_both_and_the_row_records_the_error(tmp_path):
    with MisbehavingServer("trickle", interval=0.2) as fake:
        path = tmp_path / "es.decomp"
        path.write_text(f'handler retrieve = retrieve(backend="elasticsearch", url="{fake.url}", index_name="wiki", '
                        f'server="opensearch", timeout=1, deadline=3)\nmain retrieve\n')
        session = Session(cache=None, scheduler=Scheduler(backoff=0.2, max_backoff=0.4))
        started = time.monotonic()
        result = session.run(session.load(path), {"question": "brisk"})
        took = time.monotonic() - started
    assert took < 3 + MARGIN
    assert result.error.startswith(f"[retrieve] retrieve: elasticsearch:{fake.url}/wiki: no answer within the "
                                   "call deadline of 3s (")
    assert result.error.endswith("timed out after 1s, with no complete reply (raise it with the retrieve handler's "
                                 "timeout=SECONDS option)")


def test_the_default_deadline():
    assert ElasticService("http://h:1", "wiki").call_deadline == DEFAULT_CALL_DEADLINE == 60.0


# ---- credentials in the URL ---------------------------------------------------------------------

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_api_key_in_the_query_string_is_masked_in_names_and_a_secret():
    service = ElasticService("https://alice:pw-1234@es.example:9200/?api_key=QKEY-5678&pretty=true", "wiki",
                             api_key="")
    assert service.endpoint == "https://es.example:9200/?api_key=***&pretty=***"
    assert service.name == "elasticsearch:https://es.example:9200/?api_key=***&pretty=***/wiki"
    assert {"QKEY-5678", "pw-1234", "alice:pw-1234"} <= set(service.secrets())
    assert "QKEY" not in repr(service)
    assert shown_url("http://u:p@h:1/x?api_key=k") == "http://h:1/x?api_key=***"


def test_an_api_key_in_the_query_string_is_in_no_error_or_trace(tmp_path):
    port = _closed_port()
    path = tmp_path / "es.decomp"
    path.write_text(f'handler retrieve = retrieve(backend="elasticsearch", url="http://reader:s3cret-pw@127.0.0.1:'
                    f'{port}/?api_key=QUERY-SECRET-77", index_name="wiki", server="opensearch")\nmain retrieve\n')
    session = Session(cache=None)
    result = session.run(session.load(path), {"question": "brisk"})
    assert result.error == (f"[retrieve] retrieve: elasticsearch:http://127.0.0.1:{port}/?api_key=***/"
                            f"wiki: cannot reach http://127.0.0.1:{port}/?api_key=*** (connection refused)")
    trace = json.dumps(result.trace.to_dict())
    assert "QUERY-SECRET" not in trace and "s3cret" not in trace and "api_key=***" in trace


def test_a_build_never_shows_the_query_secret(tmp_path, corpus):  # noqa: F811
    port = _closed_port()
    with pytest.raises(SearchIndexError) as caught:
        build_elastic(read_corpus(corpus), f"http://127.0.0.1:{port}/?api_key=BUILD-SECRET-99", "x")
    assert "BUILD-SECRET" not in str(caught.value)
    assert f"cannot reach http://127.0.0.1:{port}/?api_key=*** (connection refused)" in str(caught.value)
