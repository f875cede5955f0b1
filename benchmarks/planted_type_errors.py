"""Benchmark: `decomp check` finds planted type errors, each at its position, and reports nothing
on the bundled programs and the official DecomP prompt files (issue 42).

1. Planted. `programs/decomp/letter_cat_llm.decomp` and its prompt files are copied into a
   temporary folder; its `merge` handler gets `returns=str` where the bundled file does not
   type it already; two handlers (`is_name`, answering one_of("yes", "no"), and a calculator)
   and two fixed programs (`letter_cat_fixed`, the decomposition written out; `initials`, whose
   parameter is list[str]) are added, with exactly one error of each of the checker's six
   classes: a fan-out over a string, a (filter) whose handler answers a list, len() of a
   number, a list compared with a string, a one_of compared with a value not among its
   choices, a program passed a string where it takes a list. `decomp check` runs on it as a
   user runs it (the CLI, in a subprocess); each `file:line:col:` it prints is matched with the
   planted errors' positions: `found_at_position` of `planted`, and `extra_reports`, those
   matching none.
2. False reports. `check_file` (what `decomp check` calls) on every bundled program
   (programs/**/*.decomp except programs/adapt/methods.decomp, a library whose handlers come
   from the file that imports it), on every official DecomP prompt file
   (tests/fixtures/decomp/prompts/), and, for each official file written as Q:/A: pairs, on a
   module that makes it a prompt handler twice: untyped (its type inferred from its answers),
   and declared with that inferred type (`returns=`), which its own examples must fit. Every
   error is a false report; warnings are counted apart (they never fail a check).

    python benchmarks/planted_type_errors.py        # ~10 s

One JSON line: planted, found_at_position, missed, extra_reports, then bundled_programs,
official_files, wrapped_files, false_reports (with each report in `false`), warnings,
inferred (each wrapped official file's inferred type) and wall_s.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402

SOURCE = REPO / "programs" / "decomp" / "letter_cat_llm.decomp"
OFFICIAL = REPO / "tests" / "fixtures" / "decomp" / "prompts"
LIBRARIES = {"adapt/methods.decomp"}

ADDED = '''
# ---- added by benchmarks/planted_type_errors.py: the decomposition written out, six type errors
handler is_name = prompt(text="Q: Is {{ query }} a name?\\nA:", max_tokens=2, returns=one_of("yes", "no"))
handler count   = calculator()

program letter_cat_fixed(question: str) -> str {
    QS: [split] What are the words in "#question"?
    QS: (foreach) [str_position] What is the last letter of "#1"?
    QS: [merge] Concatenate #2 using a space.
    QS: (filter) [split] #1
    QS: [count] 2 + 2
    QS: [is_name] #3
    QS: (foreach) [str_position] What is the first letter of "#5"?
    if len(#5) > 0 {
        QS: [EOQ]
    }
    if #1 == "Ada" {
        QS: [EOQ]
    }
    if #6 == "maybe" {
        QS: [EOQ]
    }
    QS: [initials] #3
}

program initials(words: list[str]) -> str {
    QS: [merge] Concatenate #words using a space.
}
'''

#: (class, a text only its line holds, where on that line the report must point)
PLANTED = (
    ("fan-out over a non-list", 'first letter of "#5"', "#5"),
    ("filter handler not yes/no", "(filter) [split] #1", "[split]"),
    ("len() of a scalar", "len(#5)", "#5"),
    ("comparison that can never hold", '#1 == "Ada"', '#1 == "Ada"'),
    ("one_of compared with a non-choice", '#6 == "maybe"', '#6 == "maybe"'),
    ("program called with the wrong shape", "[initials] #3", "#3"),
)


def planted_copy(folder: Path) -> Path:
    """The bundled program and its prompt files in `folder`, typed where needed, the planted
    section added before its `main`; the path of the copy."""
    shutil.copytree(SOURCE.parent / "prompts", folder / "prompts")
    text = with_returns(SOURCE.read_text(encoding="utf-8"), "merge", "str")
    body, main = re.split(r"(?m)^(?=main )", text, maxsplit=1)
    path = folder / SOURCE.name
    path.write_text(body.rstrip("\n") + "\n" + ADDED + "\n" + main, encoding="utf-8")
    return path


def with_returns(text: str, handler: str, type_text: str) -> str:
    """`text` with `returns=TYPE` added to the declaration of `handler` when it has none (the
    declaration runs to the blank line, comment or next statement after it)."""
    decl = re.search(rf"(?ms)^handler {handler}\s*=.*?(?=^\s*$|^#|^handler |^program |^main )", text)
    if decl is None or "returns=" in decl.group():
        return text
    inner = decl.group().rstrip()
    typed = inner[:-1] + f", returns={type_text})"
    return text[:decl.start()] + typed + text[decl.start() + len(inner):]


def expected_positions(path: Path) -> dict[tuple[int, int], str]:
    """(line, column) -> class, for each planted error, read off the written file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = {}
    for name, needle, anchor in PLANTED:
        numbers = [i for i, line in enumerate(lines, 1) if needle in line]
        assert len(numbers) == 1, f"{needle!r} is on {len(numbers)} lines"
        found[(numbers[0], lines[numbers[0] - 1].index(anchor) + 1)] = name
    return found


def cli_reports(path: Path) -> list[tuple[int, int, str]]:
    """`decomp check PATH` in a subprocess: each error it prints, as (line, column, message)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECOMP_")}
    done = subprocess.run([sys.executable, "-m", "decomp", "check", str(path)], capture_output=True, text=True,
                          cwd=path.parent, env=env, timeout=300, stdin=subprocess.DEVNULL)
    head = re.compile(rf"^{re.escape(str(path))}:(\d+):(\d+): (.*)$")
    found = []
    for line in (done.stdout + done.stderr).splitlines():
        match = head.match(line)
        if match and not match.group(3).startswith("warning:"):
            found.append((int(match.group(1)), int(match.group(2)), match.group(3)))
    return found


def planted(folder: Path) -> dict:
    """Part 1: the planted copy checked by the CLI, its reports matched with the planted positions."""
    path = planted_copy(folder)
    want = expected_positions(path)
    reports = cli_reports(path)
    hit = {(line, col) for line, col, _ in reports} & set(want)
    extra = [f"{line}:{col}: {message}" for line, col, message in reports if (line, col) not in want]
    return {"planted": len(want), "found_at_position": len(hit),
            "missed": sorted(f"{line}:{col} {want[(line, col)]}" for line, col in set(want) - hit),
            "extra_reports": len(extra), "extra": extra}


# ------------------------------------------------------------------ false reports
def problems(path: Path) -> tuple[list[str], int]:
    """`check_file` on `path`, as `decomp check` calls it: its errors as `file:line:col:
    message`, and how many warnings."""
    from decomp.dsl.errors import DecompError, Diagnostics
    from decomp.handlers.sandbox.trust import FolderTrust
    from decomp.runtime.engine.checking import check_file

    try:
        checked = check_file(path, trusted_folders=FolderTrust())
    except DecompError as err:
        errors = err.errors if isinstance(err, Diagnostics) else [err]
        return [f"{e.span or path}: {e.message}" for e in errors], 0
    return [], len(checked.warnings)


def is_qa(path: Path) -> bool:
    """An official file written as Q:/A: pairs (no QC:/QS: lines): a prompt handler's file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return any(line.startswith("Q:") for line in lines) and not any(line.startswith(("QC:", "QS:")) for line in lines)


def wrapped(path: Path, folder: Path) -> tuple[list[str], int, str]:
    """A module making `path` a prompt handler, untyped and then declared with the type its
    answers show: its errors, warnings, and that type."""
    from decomp import Session

    local = folder / path.parent.name / path.name
    local.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, local)
    module = local.with_suffix(".decomp")
    module.write_text(f'handler h = prompt(file="{local.name}")\nmain h\n', encoding="utf-8")
    errors, warnings = problems(module)
    inferred = Session().load(module).handlers["h"].answer_type()
    if not inferred.is_any:
        typed = f'handler h = prompt(file="{local.name}", returns={inferred.text})\nmain h\n'
        module.write_text(typed, encoding="utf-8")
        more, more_warnings = problems(module)
        errors, warnings = errors + more, warnings + more_warnings
    return errors, warnings, inferred.text


def sweep(folder: Path) -> dict:
    """Part 2: every report on the bundled programs and the official files (wrapped in `folder`)."""
    bundled = [p for p in sorted((REPO / "programs").rglob("*.decomp"))
               if p.relative_to(REPO / "programs").as_posix() not in LIBRARIES]
    official = sorted(OFFICIAL.rglob("*.txt"))
    false, warnings, inferred = [], 0, {}
    for path in [*bundled, *official]:
        errors, count = problems(path)
        false += errors
        warnings += count
    qa = [p for p in official if is_qa(p)]
    for path in qa:
        errors, count, type_text = wrapped(path, folder)
        false += errors
        warnings += count
        inferred[path.relative_to(OFFICIAL).as_posix()] = type_text
    return {"bundled_programs": len(bundled), "official_files": len(official), "wrapped_files": len(qa),
            "false_reports": len(false), "false": false, "warnings": warnings, "inferred": inferred}


def main(argv: list[str] | None = None) -> dict:
    parser(__doc__).parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        record = {"benchmark": "planted_type_errors", "source": SOURCE.relative_to(REPO).as_posix(),
                  **planted(Path(folder) / "planted"), **sweep(Path(folder) / "wrapped")}
    record["wall_s"] = round(time.perf_counter() - started, 2)
    return emit(record)


if __name__ == "__main__":
    main()
