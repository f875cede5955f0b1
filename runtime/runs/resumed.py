"""What a resumed run takes from its run.json: the settings it was started with, unless given again.

    recorded = recorded_run(program, data, run_dir, shard)    # None: no run to read
    options = with_recorded_trust(options, recorded, on_note)  # its --trust / --allow-root

`decomp run --resume` and `run_dataset(resume=True)` take from the run being finished what the
user does not give again: the model and base URL, the session's options (concurrency,
deadlines, budgets, prices, `--api`, ...) with the APIs its `api="auto"` models found (`apis`,
unless `--api` is given again), the fields, the row window, `--main` (only for the same
program file) and the trust (the modules trusted with `--trust`, the folders allowed with
`--allow-root`). What is given again is the user's, and a binding setting that then differs is
refused when the run opens (`RunDir.resume`). A base URL recorded with hidden credentials (***)
is never taken: it must be given again. Trust is taken only when the command gives none of its
own, and a note says what was taken, so that a resumed run never reaches more than the user
can see it does.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from decomp.runtime.storage.layout import RunDirError
from decomp.runtime.storage.manifest import latest_run, read_manifest, runs_root
from decomp.runtime.runs.shards import Shard

#: The APIs a found one may be (`RunOptions.apis`).
_APIS = ("chat", "completions")


@dataclass(frozen=True)
class Recorded:
    """The settings run.json records for the run a resume finishes."""

    options: dict[str, Any]
    main: str | None  # the program run, when the resume is of the same program file (else None)

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.options.get("fields") or {})

    @property
    def offset(self) -> int:
        return self.options.get("offset") or 0

    @property
    def limit(self) -> int | None:
        return self.options.get("limit")

    @property
    def trust(self) -> list[str]:
        return [str(m) for m in self.options.get("trust") or ()]

    @property
    def allow_roots(self) -> list[str]:
        return [str(r) for r in self.options.get("allow_roots") or ()]

    @property
    def apis(self) -> dict[str, str]:
        """What the run's `api="auto"` models found (`RunOptions.apis`), each a known API."""
        found = self.options.get("apis")
        return {where: api for where, api in found.items() if isinstance(where, str) and api in _APIS} \
            if isinstance(found, dict) else {}

    def session_options(self, names: Any) -> dict[str, Any]:
        """The recorded value of each option in `names` that run.json holds and may be taken (a
        base URL whose credentials were hidden may not; `apis`, only what `apis` keeps)."""
        return {name: self.apis if name == "apis" else self.options[name] for name in names
                if name in self.options and not (name == "base_url" and "***" in str(self.options[name] or ""))}


def recorded_run(program: Path, data: Path, run_dir: Path | None, shard: Shard | None) -> Recorded | None:
    """The settings of the run a resume of `program` on `data` would finish (`run_dir`, else the
    latest such run), or None when there is none to read (opening the run then says why)."""
    probe = {"program": {"path": str(program.resolve())}, "input": {"path": str(data.resolve())},
             "options": {"shard": str(shard) if shard else None}}
    try:
        manifest = read_manifest(run_dir if run_dir is not None else latest_run(runs_root(), probe))
    except (RunDirError, OSError):
        return None
    same_program = manifest["program"].get("path") == probe["program"]["path"]  # else refused as another
    return Recorded(dict(manifest["options"]), manifest["program"].get("main") if same_program else None)


def with_recorded_trust(options: Any, recorded: Recorded | None,
                        on_note: Callable[[str], None] | None = None) -> Any:
    """`options` (a `RunOptions`) with the recorded run's trusted modules and allowed folders,
    each when `options` gives none of its own (a note names what was taken)."""
    if recorded is None:
        return options
    take_modules = [] if options.trust else recorded.trust
    take_roots = [] if options.allow_roots else recorded.allow_roots
    taken = [*(f"--trust {m}" for m in take_modules), *(f"--allow-root {r}" for r in take_roots)]
    if not taken:
        return options
    if on_note is not None:
        on_note(f"resuming with the trust run.json records: {' '.join(taken)}")
    return dataclasses.replace(options, trust=(*options.trust, *take_modules),
                               allow_roots=(*options.allow_roots, *take_roots))
