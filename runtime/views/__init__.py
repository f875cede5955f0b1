"""Views of runs.

    compare.py           `decomp compare` shown: an 80-column table, an HTML page of charts
    describe.py          plain-JSON descriptions of parsed files (`decomp check --json`)
    diff.py              the first divergence of two runs (`decomp trace diff`)
    export.py            a run directory as JSON (`decomp trace show --json`, `trace export`)
    notebook_compare.py  `decomp.compare`: `decomp compare` from Python
    page.py              a run as one standalone HTML page (`decomp trace html`)
    tree.py              the terminal rows table and trees (`decomp trace show`)
"""
