"""Search indexes for the `retrieve` handler kind and `decomp index build`.

    corpus.py         reading a corpus of `{id, title, text}` JSON lines, errors naming the line
    tantivy_index.py  the embedded default: an on-disk tantivy (BM25) index with a version manifest
    elastic.py        an Elasticsearch (or OpenSearch-API) index through the official client
    services.py       the embedded index as a `Service` (elastic.py has the Elasticsearch one)
    build.py          `decomp index build` over either backend, and its progress bar
    plugin.py         the `decomp index build` command, registered as a plugin

Nothing here imports tantivy or elasticsearch at import time: each backend is imported when it
is first used.
"""
