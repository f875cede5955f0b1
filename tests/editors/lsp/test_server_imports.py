"""The language server imports no run storage: it reports decomp's version from
`decomp.runtime.version`, not from the run-directory modules of `decomp.runtime.runs`."""
from __future__ import annotations

import json
import subprocess
import sys

_IMPORTED = ("import json, sys, decomp.editors.lsp.server; "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('decomp.runtime.runs'))))")


def test_importing_the_server_imports_no_run_directory_module():
    done = subprocess.run([sys.executable, "-c", _IMPORTED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
