"""Fixtures for the search backends: a small corpus, a tantivy index built from it, and a real
OpenSearch-API server (osmem-server, the PyPI package: an in-memory server of the OpenSearch 3
REST API, one Go binary) started on a free port of 127.0.0.1 for the Elasticsearch tests.

A plain module, not a conftest.py (other test modules import the root conftest as `conftest`):
test modules import the fixtures they use from it."""
import atexit
import json
import uuid
from pathlib import Path

import pytest

PARAGRAPHS = [
    {"id": "varn", "title": "Lake Varn", "text": "Lake Varn is a deep lake in the north. The town of Brisk lies near it."},
    {"id": "brisk", "title": "Brisk", "text": "Brisk is a fishing town on the river Corran, founded in 1702 by Ottilie Marsh."},
    {"id": "marsh", "title": "Ottilie Marsh", "text": "Ottilie Marsh was a cartographer born in Calder."},
    {"id": "calder", "title": "Calder", "text": "Calder is a city famous for its bicycle workshops."},
    {"id": "corran", "title": "Corran", "text": "The Corran is a slow river that flows through Tamsford and Brisk."},
]


def write_corpus(path: Path, rows=PARAGRAPHS) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture
def tantivy_folder(tmp_path, corpus) -> Path:
    from decomp.handlers.search.corpus import read_corpus
    from decomp.handlers.search.tantivy_index import build_index

    folder = tmp_path / "index"
    build_index(read_corpus(corpus), folder)
    return folder


_SERVER: list = []


def opensearch_server():
    """osmem-server on a free port (port 0: the server picks one and prints its URL), started
    once per test process; it exits with the process (and is closed at exit)."""
    osmem = pytest.importorskip("osmem_server", reason="the test extra's osmem-server is not installed")
    if not _SERVER:
        try:
            server = osmem.OsmemServer.start(japanese=False, addr="127.0.0.1:0", startup_timeout=30)
        except osmem.OsmemError as err:  # no binary for this platform, or it could not start
            pytest.skip(f"osmem-server did not start: {err}")
        atexit.register(server.close)
        _SERVER.append(server)
    return _SERVER[0]


@pytest.fixture
def opensearch_url() -> str:
    return opensearch_server().url


@pytest.fixture
def index_name() -> str:
    """A fresh index name per test (the server is shared by the session)."""
    return f"t-{uuid.uuid4().hex[:12]}"
