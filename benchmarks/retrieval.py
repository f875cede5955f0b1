"""Benchmark: building a tantivy index and searching it, raw and through the `retrieve` kind.

Generates PARAGRAPHS deterministic pseudo-text paragraphs (a made-up vocabulary of 30,000 words
drawn with Zipf-like frequencies, 30-70 words each, a 2-3 word title), indexes them with
`build_index` (what `decomp index build` runs) into a temporary folder, then times QUERIES
top-10 queries of 4-8 words (one or two frequent words, the rest from the middle of the
vocabulary), each run two ways, alternately, REPEAT times after a warm-up; a query's figure
for a way is its fastest run (on a shared machine other processes' time slices otherwise
dominate a thread hand-off; load_avg_1m says how busy the machine was):

    raw      TantivyIndex.search(safe_query(q), 10) in this thread: parse, BM25 search, fetch the
             10 stored paragraphs (the work the kind hands to its worker thread)
    handler  Session.arun_handler on a `retrieve(index=..., k=10)` handler, no step cache: the
             Call, the Service request (scheduler slot, budgets, trace node), and the search, on
             the event loop once the index has shown itself fast, else in a worker thread

Prints one JSON line: generate_s, build_s, documents, index_mb, raw_search_median_ms (parse and
search only, no fetch), raw_median_ms, raw_p95_ms, raw_in_thread_median_ms (the raw search
handed to a worker thread with asyncio.to_thread, as the kind does for a slow index: what the
hand-off would cost), handler_inline_share (the handler's searches that ran on the loop), handler_median_ms, handler_p95_ms, handler_overhead (handler median / raw median - 1),
targets (median <= 5 ms; overhead <= 0.20).

    python benchmarks/retrieval.py [--paragraphs 300000] [--queries 1000] [--repeat 3] [--seed 0]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import emit  # noqa: E402

VOCABULARY = 30_000
_ONSETS = ["b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "pl", "r", "s", "st",
           "t", "tr", "v", "w", "z"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
_CODAS = ["", "n", "r", "s", "l", "m", "th", "nd", "rk", "x"]


def vocabulary(size: int = VOCABULARY) -> list[str]:
    """`size` distinct made-up words, the same every time (built from syllables in order)."""
    syllables = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]
    words: dict[str, None] = {}
    for first in syllables:
        for second in syllables:
            words.setdefault(first + second)
            if len(words) == size:
                return list(words)
    raise ValueError("vocabulary too large")


def paragraphs(n: int, seed: int = 0):
    """`n` records (id, title, text) of pseudo-text, deterministic for a seed."""
    import numpy as np

    from decomp.handlers.search.corpus import Record

    words = vocabulary()
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, len(words) + 1, dtype=np.float64)
    weights = 1.0 / ranks ** 1.05
    weights /= weights.sum()
    lengths = rng.integers(30, 71, size=n)
    draws = rng.choice(len(words), size=int(lengths.sum()), p=weights)
    title_draws = rng.integers(200, len(words), size=(n, 3))
    title_lengths = rng.integers(2, 4, size=n)
    start = 0
    for i in range(n):
        end = start + int(lengths[i])
        text = " ".join(words[j] for j in draws[start:end])
        title = " ".join(words[j] for j in title_draws[i, : title_lengths[i]]).title()
        start = end
        yield Record(f"p{i}", title, text + ".")


def queries(count: int, seed: int = 1) -> list[str]:
    import numpy as np

    words = vocabulary()
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(count):
        common = [words[j] for j in rng.integers(0, 50, size=int(rng.integers(1, 3)))]
        middle = [words[j] for j in rng.integers(50, 5000, size=int(rng.integers(3, 7)))]
        found.append(" ".join(common + middle).capitalize() + "?")
    return found


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paragraphs", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3,
                        help="times each query runs each way; its figure is the fastest (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from decomp.handlers.base import LoadContext
    from decomp.handlers.kinds.retrieve import RetrieveHandler, RetrieveOptions
    from decomp.handlers.search.tantivy_index import TantivyIndex, build_index, safe_query
    from decomp.runtime.engine.session import Session

    with tempfile.TemporaryDirectory(prefix="decomp-bench-retrieval-") as tmp:
        folder = Path(tmp) / "index"
        started = time.perf_counter()
        records = list(paragraphs(args.paragraphs, args.seed))
        generate_s = time.perf_counter() - started
        started = time.perf_counter()
        manifest = build_index(records, folder)
        build_s = time.perf_counter() - started
        del records
        index_mb = sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) / 2 ** 20

        index = TantivyIndex(folder)
        handler = RetrieveHandler("retrieve", RetrieveOptions(index=str(folder), k=10), None, LoadContext(Path(tmp)))
        session = Session(cache=None)
        texts = queries(args.queries + args.warmup, args.seed + 1)

        async def timed() -> tuple[list[float], list[float], list[float], list[float], float]:
            raw, through, search_only, threaded = [], [], [], []
            for i, text in enumerate(texts):
                terms = safe_query(text)
                best = [float("inf")] * 4
                for attempt in range(args.repeat):
                    order = (0, 1, 2, 3) if (i + attempt) % 2 == 0 else (1, 0, 3, 2)
                    for which in order:
                        t0 = time.perf_counter()
                        if which == 0:
                            found = index.search(terms, 10)
                        elif which == 1:
                            found = await session.arun_handler(handler, text)
                        elif which == 2:
                            found = index._searcher.search(index._index.parse_query(terms, ["title", "text"]), 10,
                                                           count=False).hits
                        else:
                            found = await asyncio.to_thread(index.search, terms, 10)
                        best[which] = min(best[which], time.perf_counter() - t0)
                        assert len(found) == 10, (text, len(found))
                if i >= args.warmup:
                    raw.append(best[0])
                    through.append(best[1])
                    search_only.append(best[2])
                    threaded.append(best[3])
            service = next(iter(handler._services.values()))
            inline_share = service.inline_searches / max(1, service.searches)
            await session.aclose()
            return raw, through, search_only, threaded, inline_share

        raw, through, search_only, threaded, inline_share = asyncio.run(timed())

    raw_median, handler_median = statistics.median(raw), statistics.median(through)
    record = {
        "benchmark": "retrieval",
        "paragraphs": args.paragraphs,
        "documents": manifest["documents"],
        "queries": len(raw),
        "generate_s": round(generate_s, 2),
        "build_s": round(build_s, 2),
        "index_mb": round(index_mb, 1),
        "raw_search_median_ms": round(statistics.median(search_only) * 1000, 3),
        "raw_median_ms": round(raw_median * 1000, 3),
        "raw_p95_ms": round(_percentile(raw, 0.95) * 1000, 3),
        "raw_in_thread_median_ms": round(statistics.median(threaded) * 1000, 3),
        "handler_inline_share": round(inline_share, 3),
        "handler_median_ms": round(handler_median * 1000, 3),
        "handler_p95_ms": round(_percentile(through, 0.95) * 1000, 3),
        "handler_overhead": round(handler_median / raw_median - 1, 3),
        "repeat": args.repeat,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "target_median_ms": 5.0,
        "target_overhead": 0.20,
    }
    emit(record)
    return record


if __name__ == "__main__":
    main()
