"""`decomp.handlers.sandbox.imports`: a program's own module imported by two threads at once."""
from __future__ import annotations

import threading

from decomp.handlers.sandbox.imports import import_function

#: A helper whose import takes a while: a thread arriving meanwhile must wait for the whole module.
SLOW_IMPORT = "import time\n\ntime.sleep(0.2)\n\n\ndef slow(query):\n    return query.upper()\n"


def test_two_threads_importing_one_module_both_get_its_function(tmp_path):
    failures = []
    for round_ in range(4):  # without the import lock about half the rounds fail (measured: 10 of 20)
        folder = tmp_path / f"r{round_}"
        folder.mkdir()
        name = f"threaded_import_helpers_{round_}"
        (folder / f"{name}.py").write_text(SLOW_IMPORT)
        barrier, found = threading.Barrier(2), []

        def load():
            barrier.wait()
            found.append(import_function(f"{name}:slow", folder))

        threads = [threading.Thread(target=load) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        failures += [f for f in found if not callable(f)]
        assert len(found) == 2
    assert not failures, failures[0]
