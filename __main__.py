"""`python -m decomp`: the `decomp` command line."""
from decomp.runtime.cli import main

if __name__ == "__main__":
    main(prog_name="decomp")
