"""`python -m decomp`: the `decomp` command line. The package's `__init__` has already taken
the working folder Python put first on `sys.path` for `-m` out of it
(`decomp.runtime.module_entry`): a folder's own `pygls.py` is never imported in place of pygls."""
from decomp.runtime.cli import main

if __name__ == "__main__":
    main(prog_name="decomp")
