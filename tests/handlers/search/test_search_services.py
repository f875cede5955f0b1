"""Where a tantivy search runs: a worker thread until the index has shown itself fast, then on
the event loop (short queries only); a slow index and long queries always in a thread."""
import asyncio
import threading
import time

from tests.handlers.search.search_fixtures import PARAGRAPHS, corpus, tantivy_folder, write_corpus  # noqa: F401
from decomp.handlers.search import services
from decomp.handlers.search.services import TantivyService
from decomp.handlers.search.tantivy_index import TantivyIndex, safe_query


def _threads_of(service: TantivyService, queries: list[str], delay: float = 0.0) -> list[bool]:
    """For each query in turn: whether its search ran off the event loop's thread."""
    async def go():
        loop_thread = threading.get_ident()
        index = await service.current()
        real = index.search
        seen = []

        def spy(terms, k):
            seen.append(threading.get_ident() != loop_thread)
            if delay:
                time.sleep(delay)
            return real(terms, k)

        index.search = spy
        for query in queries:
            assert await service.search(index, safe_query(query), 3)
        return seen

    return asyncio.run(go())


def test_a_fast_index_is_searched_on_the_loop_after_warming_up(tantivy_folder):
    service = TantivyService(tantivy_folder)
    off_loop = _threads_of(service, ["brisk"] * 10)
    assert off_loop[:services._WARM_UP] == [True] * services._WARM_UP
    assert off_loop[services._WARM_UP:] == [False] * (10 - services._WARM_UP)
    assert service.searches == 10 and service.inline_searches == 10 - services._WARM_UP


def test_a_slow_index_stays_in_a_worker_thread(tantivy_folder):
    service = TantivyService(tantivy_folder)
    assert _threads_of(service, ["brisk"] * 6, delay=services.INLINE_BELOW_S * 2) == [True] * 6
    assert service.inline_searches == 0


def test_an_index_that_turns_slow_goes_back_to_a_thread(tantivy_folder, monkeypatch):
    service = TantivyService(tantivy_folder)
    _threads_of(service, ["brisk"] * 5)
    assert service.inline("brisk")
    # a search that took 50 ms on the loop moves the average well above the threshold
    off_loop = _threads_of(service, ["brisk"] * 3, delay=0.05)
    assert off_loop[0] is False and off_loop[1:] == [True, True]


def test_a_long_query_is_searched_in_a_thread(tantivy_folder):
    service = TantivyService(tantivy_folder)
    _threads_of(service, ["brisk"] * 5)
    long_query = " ".join(["brisk"] + [f"w{i}" for i in range(services.INLINE_WORDS + 1)])
    assert _threads_of(service, [long_query]) == [True]


def test_a_reopened_index_is_measured_again(tantivy_folder, tmp_path):
    from decomp.handlers.search.corpus import read_corpus
    from decomp.handlers.search.tantivy_index import build_index

    service = TantivyService(tantivy_folder)
    _threads_of(service, ["brisk"] * 5)
    build_index(read_corpus(write_corpus(tmp_path / "more.jsonl", [{"id": "m", "title": "Brisk", "text": "Brisk."}])),
                tantivy_folder, add=True)
    assert _threads_of(service, ["brisk"])[0] is True  # a new version: warm-up again
    assert isinstance(asyncio.run(service.current()), TantivyIndex)
