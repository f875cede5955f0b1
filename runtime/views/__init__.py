"""Views of runs: the terminal rows table and trees (tree), the standalone HTML page (page), the
first divergence of two runs (diff), and plain-JSON descriptions of parsed files (describe)."""
