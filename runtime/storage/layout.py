"""What a run directory holds: its files' names, and the error said when one cannot be used.

    RUN/
      run.json        the manifest: format, decomp version, program (path, main, fingerprint,
                      each file's sha256), input (path, sha256), options, the metric rows are
                      scored with, one entry per session
      program/        a copy of every file the program was built from (imports, prompt files)
      results.jsonl   one JSON line per row, appended and flushed as each row ends (so in the
                      order rows end; each line has the row's `index`)
      traces.sqlite   each row's decomposition tree: table `traces(idx, id, ok, tree)`, the tree
                      as zlib-compressed JSON `{"nodes": TraceNode.to_records()}` (flat: a
                      tree of any depth is written and read; runs written before hold the
                      nested `TraceNode.to_dict`, still read), WAL mode
      summary.json    rows done/failed, score and metric (with gold), calls, tokens, cache hits,
                      wall time, per-handler latency; rewritten at the end of every session
      run.lock        empty: held (a `flock`) by the one process writing the run (`locks`)
"""
from __future__ import annotations

from decomp.dsl.errors import DecompError

MANIFEST, RESULTS, TRACES, SUMMARY, PROGRAM = "run.json", "results.jsonl", "traces.sqlite", "summary.json", "program"
#: Held (an exclusive `flock`) by the one process writing the run: a second writer is refused.
LOCK = "run.lock"


class RunDirError(DecompError):
    """A run directory that cannot be used as asked (missing, foreign, corrupt, not empty,
    read-only)."""


#: Every name decomp writes in a run directory (the files, `write_json`'s temporaries, SQLite's
#: companions, the program's copy): `clear` removes these and nothing else.
RUN_NAMES = frozenset({MANIFEST, MANIFEST + ".tmp", RESULTS, TRACES, TRACES + "-wal", TRACES + "-shm",
                       TRACES + "-journal", SUMMARY, SUMMARY + ".tmp", PROGRAM, LOCK})
