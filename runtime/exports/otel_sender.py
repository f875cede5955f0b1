"""The process that sends a dataset run's traces (`decomp run --otlp`, see `otel.RunExport`).

    python -m decomp.runtime.exports.otel_sender RUN_DIR      (the endpoint: $OTEL_EXPORTER_OTLP_*)

reads one JSON object per line on stdin ({"index", "id", "score"} of a row whose tree is stored),
sends that row's tree from RUN_DIR as one trace, and at the end of its input flushes and prints
one JSON line: {"rows": sent, "problem": what failed or null}. Texts are masked for the secrets
this process's environment holds (`otel.environment_mask`), as `decomp trace export` does.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from decomp.dsl.errors import DecompError
from decomp.dsl.values import storable_json
from decomp.runtime.exports import otel
from decomp.runtime.storage.rundir import RunDir
def main(argv: list[str]) -> int:
    run_dir, url = Path(argv[0]), None
    sent, problem = 0, None
    try:
        run = RunDir.open(run_dir)
        export = otel.TraceExport.start(url, mask=otel.environment_mask(),
                                        resource={"decomp.program": run.program_path or ""})
    except (DecompError, OSError) as err:
        print(storable_json({"rows": 0, "problem": str(err)}))
        return 1
    try:
        for line in sys.stdin:
            record = json.loads(line)
            tree = run.trace(record["index"])
            if tree is not None:
                export.row(tree, otel.row_attributes(record, run.path.name))
                sent += 1
    except Exception as err:  # a tree that cannot be read: said, and what was queued still goes
        problem = f"OTLP export stopped at a row: {type(err).__name__}: {err}"
    problem = export.close() or problem
    print(storable_json({"rows": sent, "problem": problem}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
