"""Writing a candidate as an ordinary program folder: the program's files copied as they are,
each target handler's examples and demonstrations in a new file `optimized/HANDLER.txt` beside
the .decomp file declaring it, and that declaration's `file=` pointing at it (the only change
to any .decomp file). The folder needs nothing of the optimiser to run.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from decomp.dsl.errors import DecompError
from decomp.handlers.files import write_whole
from decomp.handlers.imports import local_module_file
from decomp.runtime.engine.loader import LoadedModule
from decomp.runtime.optimize.candidates import Candidate
from decomp.runtime.optimize.targets import Target
from decomp.runtime.runs.rundir import program_files

#: The folder (beside each .decomp file declaring a target) that holds the new examples files.
OPTIMIZED = "optimized"


def source_files(loaded: LoadedModule, main: Path) -> dict[str, Path]:
    """The files a copy of the program needs, by their path inside its folder: the .decomp
    files, the files they name, and the modules of the folder its python handlers call. A
    `DecompError` when the program reads files outside its folder (a copy could not reach them)."""
    named = program_files(main, loaded.files)
    folder = main.resolve().parent
    for handler in loaded.handlers.values():
        function = getattr(handler.options, "function", None) if handler.kind == "python" else None
        module = function.partition(":")[0] if isinstance(function, str) else ""
        found = local_module_file(module, folder) if module else None
        if found is not None:
            named.setdefault(found.resolve().relative_to(folder).as_posix(), found.resolve())
    outside = sorted(name for name in named if name.startswith("_outside/"))
    if outside:
        raise DecompError(f"{main} reads files outside its folder ({', '.join(outside)}): decomp optimize writes the "
                          "program as a folder of its own, so move them into the program's folder")
    return named


def write_candidate(files: dict[str, Path], main: Path, targets: dict[str, Target], candidate: Candidate,
                    folder: Path, keep_examples: bool = True) -> Path:
    """Write `candidate` as a program folder at `folder` (replacing what is there); the path
    of its main .decomp file."""
    base = main.resolve().parent
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    texts = {name: path.read_bytes() for name, path in files.items()}
    edits: dict[str, list[tuple[Target, str]]] = {}
    for name, demos in candidate.demos.items():
        if not demos:
            continue
        target = targets[name]
        declared = target.declared_in.relative_to(base).as_posix()
        written = f"{OPTIMIZED}/{name}.txt"
        inside = (Path(declared).parent / written).as_posix()
        texts[inside] = examples_file(target, [d.text for d in demos], keep_examples).encode()
        edits.setdefault(declared, []).append((target, written))
    for declared, changes in edits.items():
        texts[declared] = _rewritten(texts[declared].decode("utf-8"), changes).encode()
    for name, data in sorted(texts.items()):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        write_whole(folder / name, data)
    return folder / main.resolve().relative_to(base)


def examples_file(target: Target, demos: list[str], keep_examples: bool = True) -> str:
    """The text of a target's new examples file: its own examples (unless not kept), then the
    demonstrations, blank-line separated."""
    blocks = [target.original_text.strip("\n")] if keep_examples and target.original_text.strip() else []
    return "\n\n".join(blocks + [d.strip("\n") for d in demos]) + "\n"


def _rewritten(source: str, changes: list[tuple[Target, str]]) -> str:
    """`source` with each target's file= value replaced by the new path (last first, so the
    positions of the others stay right)."""
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    for target, written in sorted(changes, key=lambda c: (c[0].option.line, c[0].option.column), reverse=True):
        span = target.option
        begin = starts[span.line - 1] + span.column - 1
        end = starts[span.end_line - 1] + span.end_column - 1
        source = source[:begin] + json.dumps(written) + source[end:]
    return source
