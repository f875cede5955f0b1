"""Runs over datasets: reading rows (JSONL, DROP-style JSON), batch runs, run directories
(manifest, results, traces, summary, resume), scoring (exact match, F1, set match), progress."""
