"""A fake model for tests, shipped in the package: queued answers, prompt->answer maps,
scripted decomposers, regular-expression patterns, a Python responder, and the history of
every request it received.

    model = FakeModel(
        answers=["first reply", "second reply"],          # consumed in order
        mapping={"What are the words in": '["a", "b"]'},  # matched against the last question
        script={"Take the last letters ...": ["[split] ...", "[EOQ]"]},  # decomposer lines
        patterns=[{"match": r'words in "(?P<w>[^"]*)"', "answer": r"\\g<w>"},     # any question
                  {"match": r"^Take (.*)", "steps": [r"[split] \\1", "[EOQ]"]}],  # any decomposition
    )

The last question of a prompt is its last `Q:` or `QC:` line (`last_question`). Lookup order
for a request: `script` (when the prompt asks for the next `QS:` line: the question of its last
`QC:` line, its step counted by the `QS:` lines after it), `mapping` by the whole prompt then by
the last question, `patterns` in order (each `re.search`ed over the last question; an `answer`
template is expanded with `re.Match.expand`, `\\1` or `\\g<name>`; `steps` serve prompts asking
for a `QS:` line, step k for the k-th, like a script), `mapping` keys found inside the last
question (longest first), the queue, `default`. A reply to a `QS:` prompt from a script or a
pattern's steps starts with a space, as a model continues `QS:`. When nothing matches,
`ModelError` names the question it could not answer.

A Python responder answers everything: `fake:module:function` (`responder_model`) calls
`function(request)` with the `Request` (`request.prompt` is the rendered prompt) and sends back
the string it returns; an exception it raises is that call's `ModelError`. Its calls overlap as
a real model's do, as many at once as the run's scheduler lets in (`--concurrency`): an `async
def` responder is awaited, a plain one runs in a thread of its own for each call. The module is
imported as a python handler's is (`decomp.handlers.sandbox.imports`): one of the program's folder (the
working folder for `--model`) or one the user trusts (`--trust MODULE`); others are refused.

In the step cache a fake model stands for its answers, not only its name (`cache_identity`):
a `fake:answers.json` model by the sha256 of the file's content, a responder by its function's
code and its module's source, an in-memory one by a hash of its answers, mapping, script,
patterns, default and scorer as they are at its first request. A callable
answer counts by its code (`code_fingerprint`), not by the values its closure holds: two
closures of one function over different data look alike, so give them different names.

Where a `fake:PATH` file may be: `--model fake:PATH` (and `run_dataset(model="fake:PATH")`) is
the user's own argument, read wherever it points, as any file named on the command line is. A
`.decomp` file's `model NAME = "fake:PATH"` is the program's: the scheme's backend
(`FakeBackend.check`, which the loader asks as it asks every backend) resolves PATH from the
program's folder and confines it like `file=` (inside the program's folder, the bundled programs
or a folder allowed with --allow-root). The file is checked as it is read
(`decomp.runtime.testing.fake_file`, also `decomp check FILE.json`): every problem is named with
its line and column; the text of a file that is not a fake model's is never echoed.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import os
import re
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from decomp.handlers.sandbox.imports import import_function, module_file, untrusted_folder
from decomp.handlers.sandbox.trust import NO_TRUST, Trust, inside, not_imported, refusal
from decomp.handlers.kinds.python import code_fingerprint
from decomp.handlers.plugins import hookimpl
from decomp.runtime.models.base import Backend, Completion, Model, ModelError, ModelFile, Request, Score, SpecCheck
from decomp.runtime.models.replay import decomposition_state, estimated_tokens
from decomp.runtime.testing.fake_file import Pattern, is_fake_file, read_fake_file

if TYPE_CHECKING:  # pragma: no cover
    from decomp.handlers.base import LoadContext
    from decomp.handlers.soft_prompts import SoftPrompt

Answer = str | Callable[[Request], str]
_LAST_QUESTION = re.compile(r"(?:^|\n)(?:QC|Q):[ \t]*([^\n]*)", re.S)
#: A `fake:` spec naming a Python responder (`module.sub:function`), not a file.
RESPONDER = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


class FakeModel(Model):
    """Deterministic stand-in for a language model."""

    def __init__(self, answers: Iterable[Answer] = (), mapping: Mapping[str, Answer] | None = None,
                 script: Mapping[str, list[str]] | None = None, default: Answer | None = None,
                 name: str = "fake", scorer: Callable[[str, str], float] | None = None,
                 patterns: Iterable[Pattern | Mapping[str, Any]] = ()):
        self.queue: deque[Answer] = deque(answers)
        self.mapping = dict(mapping or {})
        self.script = {k.strip(): list(v) for k, v in (script or {}).items()}
        #: `Pattern`s, or dicts {"match": REGEX, "answer": TEMPLATE} / {"match": ..., "steps": [...]}
        self.patterns = [p if isinstance(p, Pattern) else Pattern.make(**p) for p in patterns]
        self.default = default
        self.name = name
        self.endpoint = name
        self.history: list[Request] = []
        self.replies: list[tuple[str, ...]] = []  # what each completion request got, in order
        self.scorer = scorer or (lambda prompt, continuation: -0.5 * len(continuation.split()))
        self._identity: str | None = None

    def cache_identity(self) -> str:
        """The name and a sha256 of what decides the answers (see the module's docstring),
        fixed at the first request."""
        if self._identity is None:
            what = {"answers": list(self.queue), "mapping": self.mapping, "script": self.script,
                    "default": self.default, "scorer": self.scorer}
            if self.patterns:  # (absent when none: identities of models without patterns unchanged)
                what["patterns"] = [p.identity() for p in self.patterns]
            text = json.dumps(what, sort_keys=True, ensure_ascii=False, default=_callable_identity)
            self._identity = f"{self.name}#sha256:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"
        return self._identity

    @property
    def prompts(self) -> list[str]:
        """Every rendered prompt this model was sent, in order."""
        return [r.prompt for r in self.history]

    async def complete(self, request: Request) -> Completion:
        self.history.append(request)
        texts = tuple(self._answer(request) for _ in range(request.n)) if request.n > 1 else (self._answer(request),)
        self.replies.append(texts)
        return Completion(texts, fake_tokens(request.prompt), sum(map(fake_tokens, texts)))

    async def score(self, prompt: str, continuation: str, soft_prompt: SoftPrompt | None = None) -> Score:
        """`scorer(prompt, continuation)`; by default -0.5 per whitespace-separated word."""
        self.history.append(Request(prompt + continuation, max_tokens=0))
        return Score(float(self.scorer(prompt, continuation)), max(1, len(continuation.split())))

    def _answer(self, request: Request) -> str:
        found = self._scripted(request) if self.script else None
        if found is None and self.mapping:
            found = self._mapped(request)
        if found is None and self.patterns:
            found = self._matched(request)
        if found is None and self.mapping:
            found = self._mapped_inside(request)
        if found is None and self.queue:
            found = self.queue.popleft()
        if found is not None:
            return _apply(found, request)
        if self.default is not None:
            return _apply(self.default, request)
        raise ModelError(f"fake model has no answer for {last_question(request.prompt)!r}")

    def _scripted(self, request: Request) -> Answer | None:
        if not self.script or not request.prompt.rstrip(" ").endswith("QS:"):
            return None
        question, done = decomposition_state(request.prompt)
        lines = self.script.get(question)
        if lines is None or done >= len(lines):
            return None
        return " " + lines[done]

    def _mapped(self, request: Request) -> Answer | None:
        """The mapping's reply for the whole prompt, else for the last question."""
        if request.prompt in self.mapping:
            return self.mapping[request.prompt]
        return self.mapping.get(last_question(request.prompt))

    def _matched(self, request: Request) -> str | None:
        """The reply of the first pattern that matches the last question and has one for this
        prompt (an answer; or, for a prompt asking for a `QS:` line, the step not yet written)."""
        steps_wanted = request.prompt.rstrip(" ").endswith("QS:")
        question, done = decomposition_state(request.prompt) if steps_wanted else (last_question(request.prompt), 0)
        for pattern in self.patterns:
            if pattern.steps is not None and (not steps_wanted or done >= len(pattern.steps)):
                continue
            found = pattern.regex.search(question)
            if found is None:
                continue
            if pattern.answer is not None:
                return found.expand(pattern.answer)
            return " " + found.expand(pattern.steps[done])
        return None

    def _mapped_inside(self, request: Request) -> Answer | None:
        """The reply of the longest mapping key found inside the last question."""
        question = last_question(request.prompt)
        for key in sorted(self.mapping, key=len, reverse=True):
            if key and key in question:
                return self.mapping[key]
        return None

    @classmethod
    def from_file(cls, path: str | Path) -> "FakeModel":
        """Build from a JSON file: {"answers": [...], "mapping": {...}, "script": {...},
        "patterns": [...], "default": ...}; raises `FakeFileError` (a `ModelError`) naming the
        line and column of every problem."""
        spec, raw = read_fake_file(path)
        model = cls(spec.answers, spec.mapping, spec.script, spec.default, name=f"fake:{path}",
                    patterns=spec.patterns)
        model._identity = f"{model.name}#sha256:{hashlib.sha256(raw).hexdigest()}"  # the file as it was read
        return model


#: The fake model's token count: the estimate of dry runs, one token per 4 characters, rounded up.
fake_tokens = estimated_tokens


def last_question(prompt: str) -> str:
    """The text of the last `Q:` or `QC:` line of a prompt (the whole prompt if none)."""
    found = _LAST_QUESTION.findall(prompt)
    return found[-1].strip() if found else prompt.strip()


def _callable_identity(value: Any) -> str:
    """A callable answer or scorer in a fake model's cache identity: its name and code."""
    code = getattr(value, "__code__", None)
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{name}:{code_fingerprint(code)}" if code is not None else name


def _apply(answer: Answer, request: Request) -> str:
    return answer(request) if callable(answer) else answer


def responder_model(spec: str, folder: str | Path | None = None, local: tuple[Path, ...] = (),
                    trust: Trust = NO_TRUST) -> FakeModel:
    """A fake model that answers every request with `function(request)`, for the spec
    `module:function`: the function imported as a python handler's (`import_function`: a module
    of `folder` or of `local`, or one `trust` trusts), else `ModelError` says why not."""
    fn = import_function(spec, folder, local, trust)
    if isinstance(fn, str):
        raise ModelError(f"fake model {spec!r}: {fn}")
    model = ResponderModel(_Responder(spec, fn), name=f"fake:{spec}")
    model._identity = f"{model.name}#code:{code_fingerprint(fn.__code__)}#module:{_source_sha256(fn)}"
    return model


class ResponderModel(FakeModel):
    """A fake model whose every reply is its responder's (`responder_model`), made off the event
    loop or awaited, so that its calls overlap as far as the scheduler lets them."""

    def __init__(self, responder: "_Responder", name: str):
        super().__init__(default=responder, name=name)
        self.responder = responder

    async def complete(self, request: Request) -> Completion:
        self.history.append(request)
        texts = tuple([await self.responder.reply(request) for _ in range(max(1, request.n))])
        self.replies.append(texts)
        return Completion(texts, fake_tokens(request.prompt), sum(map(fake_tokens, texts)))


class _Responder:
    """`function(request)` as a fake model's reply: a string, else that call's ModelError."""

    def __init__(self, spec: str, fn: Callable[[Request], Any]):
        self.spec, self.fn = spec, fn
        self.awaited = inspect.iscoroutinefunction(fn)

    def __call__(self, request: Request) -> str:
        try:
            text = self.fn(request)
        except Exception as err:  # the responder's own bug: this call fails, the run goes on
            raise self._raised(err) from err
        return self._checked(text)

    async def reply(self, request: Request) -> str:
        """The reply to `request`: an `async def` responder awaited, a plain one called in a
        thread of its own (its calls overlap; the event loop goes on meanwhile)."""
        if not self.awaited:
            return await _in_thread(self, request)
        try:
            text = await self.fn(request)
        except Exception as err:
            raise self._raised(err) from err
        return self._checked(text)

    def _raised(self, err: BaseException) -> ModelError:
        return ModelError(f"the fake model's responder {self.spec} raised {type(err).__name__}: {err}")

    def _checked(self, text: Any) -> str:
        if not isinstance(text, str):
            raise ModelError(f"the fake model's responder {self.spec} returned {type(text).__name__}, not a string")
        return text


async def _in_thread(responder: _Responder, request: Request) -> str:
    """`responder(request)` in a daemon thread of its own, awaited. What is not an `Exception`
    (`SystemExit` from the responder) is that call's `ModelError` too, never the run's end."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (responder(request), None)
        except Exception as err:
            outcome = (None, err)
        except BaseException as err:
            outcome = (None, responder._raised(err))
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, future, *outcome)

    threading.Thread(target=work, name="decomp-fake-responder", daemon=True).start()
    return await future


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():  # the call was given up
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _source_sha256(fn: Callable) -> str:
    """The sha256 of the source file of `fn`'s module ("" when it has none)."""
    import sys

    module = sys.modules.get(getattr(fn, "__module__", ""))
    path = module_file(module) if module is not None else None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else ""
    except OSError:
        return ""


#: The option a `.decomp` declaration's responder carries (set by `FakeBackend.check`, never
#: written by a user): the program's folder, where its module is looked for.
FOLDER_OPTION = "responder_folder"


def responder_folders(settings: object = None) -> list[Path]:
    """Where a responder's module is looked for: the folders the loader recorded for a declared
    model (`FOLDER_OPTION`: the program's folder, then the main program's), else the working
    folder."""
    option = getattr(settings, "option", None)
    recorded = option(FOLDER_OPTION) if option is not None else None
    return [Path(p) for p in recorded.split(os.pathsep)] if recorded else [Path.cwd()]


def fake_model(name: str, settings: object = None) -> FakeModel:
    """Factory for `fake:` model specs: `fake:answers.json` (a file), `fake:module:function` (a
    responder, looked for in the program's folder when declared in a .decomp file, else in the
    working folder), `fake:` alone (a model with no answers)."""
    if RESPONDER.fullmatch(name):
        folder, *local = responder_folders(settings)
        return responder_model(name, folder, tuple(local), getattr(settings, "trust", None) or NO_TRUST)
    return FakeModel.from_file(name) if name else FakeModel()


class FakeBackend(Backend):
    """The `fake:` scheme: makes fake models (`fake_model`), checks their declarations, and reads
    fake model files for `decomp check FILE.json`."""

    def __call__(self, name: str, settings: object = None) -> FakeModel:
        return fake_model(name, settings)

    def check(self, name: str, ctx: LoadContext) -> SpecCheck:
        """A declared `fake:module:function`: its module allowed as a python handler's is (a
        check imports none of a folder the user has not trusted: a warning); a declared
        `fake:PATH`: the path from the declaring file's folder, inside the program's allowed
        folders (a path outside is refused unread: its text stays out of every message)."""
        if RESPONDER.fullmatch(name):
            return _check_responder(name, ctx)
        if not name:
            return SpecCheck(name)
        path = Path(name) if Path(name).is_absolute() else ctx.base_dir / name
        if ctx.roots is not None and not inside(path, ctx.roots):
            return SpecCheck(str(path), errors=[refusal(name, "the fake model file", ctx.roots)])
        return SpecCheck(str(path))

    def check_file(self, path: Path, text: str) -> ModelFile | None:
        """A fake model file's content, checked (`FakeFileError` names every problem's place);
        None for a file that is none (`is_fake_file`)."""
        if not is_fake_file(path, text):
            return None
        spec = read_fake_file(path)[0]
        return ModelFile("fake model file", "fake_model", spec.summary(), spec.counts())


def _check_responder(name: str, ctx: LoadContext) -> SpecCheck:
    """A declared responder: where its module is looked for (the declaring file's folder, then
    the main program's), and whether it may be imported."""
    local = tuple((ctx.roots or ())[:1])
    found = SpecCheck(name, {FOLDER_OPTION: os.pathsep.join(map(str, (ctx.base_dir, *local)))})
    untrusted = untrusted_folder(name, ctx.base_dir, local, ctx.trusted_folders, ctx.trust)
    if untrusted is not None:  # a check: never imported from a folder the user has not trusted
        found.warnings.append(f"fake model {not_imported(name, untrusted)}")
        return found
    problem = import_function(name, ctx.base_dir, local, ctx.trust)
    if isinstance(problem, str):
        found.errors.append(f"fake model {name!r}: {problem}")
    return found


#: The `fake:` scheme's backend, registered once.
BACKEND = FakeBackend()


@hookimpl
def register_models(register):
    register("fake", BACKEND)
