"""Everything that runs programs, in layers that import downwards only: engine (one row),
models and testing (outbound model services and their test doubles), runs (datasets, run
directories, scoring), views (terminal, HTML, diff), and the command line on top (cli)."""
