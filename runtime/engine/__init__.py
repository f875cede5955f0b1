"""The engine: runs a loaded program on one row.

session (wires a run: registry, models, scheduler, cache, budgets), loader (parse, build, check
a module), interpreter (steps, operators' fan-out, `if`, dataflow of a program body), call
(`EngineCall`, the engine's side of the handler interface), program (the `program` kind),
scheduler (slots, rate limits, retries for every outbound service), cache (the SQLite step
cache), budgets (usage and limits per row and run), tracing (the decomposition tree), checking
(`decomp check` as a library call: what a file is, its problems and warnings).
"""
