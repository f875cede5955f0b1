"""`decomp check` as a library call: what a file is (a module, a few-shot file, a model backend's
own file such as a fake model's answers, or neither), its problems and its warnings (the
source's, and each handler's own: `Handler.warnings`, such as a prompt template whose output can
grow without bound), without running anything.

    checked = check_file(path)       # raises DecompError (often Diagnostics) with every problem
    checked.module, checked.fewshot, checked.model_file, checked.warnings

`decomp check` and `decomp lsp` pass the folders the user trusts (`FolderTrust`): a program's
own Python modules elsewhere are not imported, and each handler that names one says so once.
"""
from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from decomp.dsl import nodes
from decomp.dsl.checker import check_fewshot, fewshot_warnings, module_warnings
from decomp.dsl.errors import CheckError, CheckWarning, DecompError, Diagnostics
from decomp.dsl.limits import MAX_SOURCE_CHARS, normalize_newlines
from decomp.dsl.parser import parse_fewshot, parse_module, read_text
from decomp.handlers.kinds.python import PythonHandler
from decomp.handlers.registry import Registry, default_registry
from decomp.handlers.sandbox.trust import NO_TRUST, FolderTrust, Trust, inside
from decomp.runtime.engine.loader import LoadedModule
from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import Backend, ModelFile


@dataclass
class Checked:
    """A checked file: a loaded module or few-shot examples, and the warnings found."""

    path: Path
    module: LoadedModule | None = None
    fewshot: nodes.FewShot | None = None
    #: A model backend's own file as its backend checked it (`Backend.check_file`: a fake
    #: model's answers, `decomp.runtime.testing.fake_file`).
    model_file: ModelFile | None = None
    warnings: list[CheckWarning] = field(default_factory=list)

    @property
    def python_functions(self) -> list[dict]:
        """Every Python function the module's handlers call (see `python_functions`)."""
        return python_functions(self.module) if self.module is not None else []


def python_functions(loaded: LoadedModule) -> list[dict]:
    """Every Python function a loaded module would call, `program(file=...)` targets included:
    one entry per python handler, {"handler", "function", "allowed" ("registered", "local":
    its module's file is in the program's folder, or "trusted"), "file" (the module's file, or
    null)}, in declaration order."""
    return [_function_entry(h) for h in _all_handlers(loaded) if isinstance(h, PythonHandler)]


def handler_warnings(loaded: LoadedModule) -> list[CheckWarning]:
    """Every handler's own warnings (`Handler.warnings`), `program(file=...)` targets included,
    each handler once, in declaration order; then the loads' own (`LoadedModule.notices`)."""
    handlers = _all_handlers(loaded)
    modules = [loaded, *(m for m in map(_linked_module, handlers) if m is not None)]
    notices = [w for module in {id(m): m for m in modules}.values() for w in module.notices]
    return [w for handler in handlers for w in handler.warnings()] + notices


def _linked_module(handler) -> LoadedModule | None:
    """The module a `program(file=...)` handler runs, else None."""
    other = getattr(getattr(getattr(handler, "target", None), "ctx", None), "module", None)
    return other if isinstance(other, LoadedModule) else None


def _all_handlers(loaded: LoadedModule) -> list:
    """The handlers of a loaded module and of the modules its `program(file=...)` handlers run,
    each once."""
    found: list = []
    seen: set[int] = set()
    modules = [loaded]
    while modules:
        module = modules.pop(0)
        if id(module) in seen:
            continue
        seen.add(id(module))
        for handler in module.handlers.values():
            if id(handler) in seen:
                continue
            seen.add(id(handler))
            found.append(handler)
            other = _linked_module(handler)
            if other is not None:
                modules.append(other)
    return found


def _function_entry(handler: PythonHandler) -> dict:
    name = handler.options.function
    registry = handler.ctx.registry or default_registry
    allowed = registry.function_origin(name, handler._folder, handler._local, handler._trust)
    fn = handler._fn
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    file = code.co_filename if code is not None and not code.co_filename.startswith("<") else None
    return {"handler": handler.name, "function": name, "allowed": allowed, "file": file}


def check_file(path: str | Path, session: Session | None = None, text: str | None = None,
               trusted_folders: FolderTrust | None = None, trust: Trust | None = None) -> Checked:
    """Check a .decomp module, a few-shot prompt file or a file a registered model backend claims
    (`Backend.check_file`: the `fake:` backend's JSON object with one of the keys `answers`,
    `mapping`, `script`, `patterns`, `default`, or a `.json` file that is not JSON). A .decomp
    file that declares nothing and a file that is none of these (Python, other JSON, JSON Lines,
    empty) are refused; text with no example in it passes with a warning (it can only be a plain
    prompt, such as a word list). A backend's file raises its backend's error (`FakeFileError`),
    each problem with its line and column.

    `text`: the file's content as an editor holds it, unsaved (`decomp lsp`); the files it
    imports or names are read from disk. A backend's file is always read from disk.

    `trusted_folders`: the folders whose Python modules the check may import (`decomp check`
    and `decomp lsp` always pass them); a `python(function="helpers:f")` of any other folder is
    not imported, and its handler warns so. None: imported as a run imports them.
    `trust`: the modules and folders allowed beyond the program's (`--trust`, `--allow-root`),
    for the session made here (a `session` given has its own)."""
    path = Path(path)
    session = session or Session(trust=trust)
    found = model_file(path, session.registry) if path.suffix != ".decomp" and text is None else None
    if found is not None:
        return Checked(path, model_file=found)
    fewshot, warnings = (None, []) if path.suffix == ".decomp" else _fewshot_or_module(path, text)
    if fewshot is not None:
        return Checked(path, fewshot=fewshot, warnings=warnings)
    loaded = _checked_module(path, session, text, trusted_folders)
    return Checked(path, module=loaded,
                   warnings=file_warnings(path, text, session.trust) + handler_warnings(loaded))


def model_file(path: Path, registry: Registry) -> ModelFile | None:
    """`path` checked by the first model backend of `registry` that claims it as its own
    (`Backend.check_file`: the `fake:` backend's answer files); None when none does, or when it
    cannot be read (the check that follows says why)."""
    try:
        text = read_text(path)
    except (DecompError, OSError):
        return None
    for backend in registry.model_backends.values():
        found = backend.check_file(path, text) if isinstance(backend, Backend) else None
        if found is not None:
            return found
    return None


def looks_like(path: Path) -> str | None:
    """For a .decomp file that does not parse: what it looks like instead (Python, JSON, JSON
    Lines), or None."""
    try:
        kind = _sniff(path, read_text(path))
    except (DecompError, OSError):
        return None
    return _LOOKS[kind] if kind in ("python", "json", "jsonl") else None


def _checked_fewshot(path: Path, fewshot: nodes.FewShot):
    errors = check_fewshot(fewshot)
    if errors:
        raise Diagnostics(errors) if len(errors) > 1 else errors[0]
    return fewshot


_CHECKABLE = ("a .decomp module (import, model, handler, program, main) or a few-shot file "
              "(examples with QC:/QS:/A: or Q:/A: lines)")


def _fewshot_or_module(path: Path, text: str | None = None) -> tuple[nodes.FewShot | None, list[CheckWarning]]:
    """A file that is not named .decomp: its checked examples when it has any; None when it
    reads as a module that declares something (then checked as one). Python, JSON, JSON Lines
    and empty files are refused; other text without examples passes with a warning (a prompt
    without examples, such as a word list a program reads, is plain text)."""
    text = read_text(path) if text is None else text
    fewshot = parse_fewshot(text, str(path))
    if any(e.question is not None or e.steps or e.answer is not None for e in fewshot.examples):
        return _checked_fewshot(path, fewshot), fewshot_warnings(fewshot)
    try:
        if _declares(parse_module(text, str(path))):
            return None, []
    except DecompError:
        pass
    look = _looks_like(path, text)
    if _sniff(path, text) in ("empty", "python", "json", "jsonl"):
        raise _refusal(path, text, f"not a .decomp program or a few-shot file: {look}")
    span, first = _first_line(path, text)
    return fewshot, [CheckWarning(f"no examples here: {look}", span, expected=_CHECKABLE, line_text=first)]


def _checked_module(path: Path, session: Session, text: str | None = None,
                    trusted_folders: FolderTrust | None = None) -> LoadedModule:
    loaded = session.load(path, text, trusted_folders=trusted_folders)
    if not _declares(loaded.module):
        text = read_text(path) if text is None else text
        kind = _sniff(path, text)
        raise _refusal(path, text, "this .decomp file declares nothing" + (f": {_LOOKS[kind]}" if kind else ""))
    return loaded


def _declares(module: nodes.Module) -> bool:
    return bool(module.imports or module.models or module.handlers or module.programs or module.main)


def _refusal(path: Path, text: str, message: str) -> CheckError:
    span, first = _first_line(path, text)
    return CheckError(message, span, expected=_CHECKABLE, line_text=first)


def _first_line(path: Path, text: str) -> tuple[nodes.Span, str]:
    """The span of the whole first line (at least one column) and its text."""
    first = normalize_newlines(text[:MAX_SOURCE_CHARS]).split("\n", 1)[0]
    return nodes.Span(str(path), 1, 1, 1, max(2, len(first) + 1)), first


_LOOKS = {
    "empty": "the file is empty",
    "python": "this looks like Python source",
    "json": "this looks like JSON data",
    "jsonl": "this looks like JSON Lines data (a dataset for `decomp run --input`?)",
    "jinja": "this looks like a Jinja prompt template (it is checked with the module whose prompt handler uses it)",
}
_PYTHON_LINE = re.compile(r"^(?:#!.*python|def \w+\(.*|class \w+.*:[ \t]*$|import [\w.]+(?: as \w+)?[ \t]*$"
                          r"|from [\w.]+ import )", re.M)


def _looks_like(path: Path, text: str) -> str:
    """What a file that is no program looks like, in a few words (cheap guesses only)."""
    return _LOOKS.get(_sniff(path, text),
                      "plain text, with no declaration (handler, program, ...) and no line starting with QC:, QS:, "
                      "Q: or A:")


def _sniff(path: Path, text: str) -> str | None:
    stripped = text.strip()
    if not stripped:
        return "empty"
    if path.suffix in (".py", ".pyw") or _PYTHON_LINE.search(text):
        return "python"
    if stripped[0] in "[{":  # (nested past Python's stack: RecursionError, not JSON here)
        try:
            json.loads(stripped)
            return "json"
        except (ValueError, RecursionError):
            pass
        try:
            for line in stripped.splitlines():
                if line.strip():
                    json.loads(line)
            return "jsonl"
        except (ValueError, RecursionError):
            pass
    if path.suffix in (".j2", ".jinja", ".jinja2") or "{{" in text or "{%" in text:
        return "jinja"
    return None


def file_warnings(path: str | Path, text: str | None = None, trust: Trust = NO_TRUST) -> list[CheckWarning]:
    """The warnings of a .decomp file (`text`: its unsaved content) and of the files it imports,
    each file once. A file that does not parse has none here, nor one outside the program's
    allowed folders (by `trust`): their errors are the loader's to report."""
    warnings: list[CheckWarning] = []
    seen: set[Path] = set()
    queue = [Path(path)]
    roots = trust.program_roots(path)
    while queue:
        file = queue.pop(0)
        if file.resolve() in seen:
            continue
        seen.add(file.resolve())
        if not inside(file, roots):  # an import the loader refuses: never read here either
            continue
        try:
            source = text if text is not None and file == Path(path) else read_text(file)
            module = parse_module(source, str(file))
        except (DecompError, OSError):
            continue
        warnings += module_warnings(module)
        queue += [(file.parent / imp.path).resolve() for imp in module.imports]
    return warnings
