"""`Session`: the one object that wires a run together: registry, models, scheduler, cache,
budgets and usage.

    session = Session(model=FakeModel(answers=[...]))
    module = session.load("programs/decomp/letter_cat.decomp")
    result = session.run(module, {"question": "Take the last letters of ..."})
    result.answer, result.error, result.usage, result.trace
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from decomp.dsl.errors import DecompError, InternalError, ModelError
from decomp.dsl.values import Failed, json_text, outcome
from decomp.handlers.base import Handler
from decomp.handlers.sandbox.offload import Limits
from decomp.handlers.plugins import load as load_plugins
from decomp.handlers.registry import Registry, default_registry
from decomp.handlers.service import Service
from decomp.handlers.sandbox.trust import NO_TRUST, FolderTrust, Trust
from decomp.runtime.engine.budgets import CURRENT_ROW, Budget, RowContext, SharedRun, Usage, current_row
from decomp.runtime.engine.cache import StepCache, cache_key
from decomp.runtime.engine.containment import run_kind
from decomp.runtime.engine.call import EngineCall, named
from decomp.runtime.engine.interpreter import RUNNER, also_failed, typed_answer
from decomp.runtime.engine.loader import LoadedModule, load
from decomp.runtime.engine.scheduler import Scheduler, timing
from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.engine.run_secrets import RunSecrets
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.models.base import Completion, Message, Model, ModelSettings, Request, Score, ToolCall
from decomp.runtime.models.prices import Price, find_price, price_from_options

if TYPE_CHECKING:  # pragma: no cover
    from decomp.handlers.soft_prompts import SoftPrompt


@dataclass
class RunResult:
    """What one row produced: its answer, or the error that ended it, its usage and trace.

    `failed` is the row's outcome: true when the answer's outcome is failed (an executor that
    did not finish its task, a plan that failed) though no error ended the row."""

    answer: Any
    error: str | None
    trace: TraceNode
    usage: Usage = field(default_factory=Usage)
    failed: bool = False
    #: What each environment the row used reports, by handler name.
    environments: dict[str, Any] = field(default_factory=dict)
    #: The errors of other steps that failed at the same time as the one in `error`, earliest
    #: first, each naming its own handler and line (their details are on their trace nodes).
    also_failed: tuple[str, ...] = ()
    #: Why the outcome failed, where the answer says (an answer that does not fit its type).
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when no error ended the row (its outcome may still be failed)."""
        return self.error is None

    @property
    def succeeded(self) -> bool:
        """True when the row answered and its outcome is ok."""
        return self.error is None and not self.failed


#: The model used when nothing names one: the embedded local model (see runtime/models/local.py).
DEFAULT_MODEL = "local:gemma-3-270m"


#: What each kind of cached value holds (a value of another shape is damaged: a miss).
_SAMPLE = {"text": str}
_SCORE = {"logprob": (int, float), "tokens": int}
_ANSWER = {"answer": object}


class Session:
    """Owns the registry, the models, the scheduler, the cache and the limits of a run.

    model:  a `Model` or a spec (`openai:gpt-4o-mini`, `fake:answers.json`) used by every
            handler that does not name its own model
    cache:  a `StepCache`, or None for no caching (the default in the library; the CLI caches)
    default_model: the spec used when nothing else names a model (None: that is an error)
    budget: model, token and service budgets, and the handler-call and memory budgets (`Budget`)
    handler_timeout: seconds one handler call's synchronous work (a Python function, the
            calculator, a regex, a template) may take, for handlers with no `timeout=` of their
            own (None: 10 s); such work runs off the event loop (`decomp.handlers.sandbox.offload`)
    handler_memory_mb: MiB one call of a user's Python function may add to its worker process,
            for python handlers with no `memory=` of their own (None: 1,024 MiB; see
            `decomp.handlers.sandbox.workers`)
    python_workers: True (the default): python handlers' functions run in worker processes,
            stopped at their limits; False: in threads of this process, not contained (for
            test doubles that patch a helper's module, and for a debugger)
    prices: model name -> `Price` (a `--prices` file; see `decomp.runtime.models.prices`); a
            model declaration's own price_in/price_out options win
    on_note: told, as one line, what the session finds out as it runs (an `api="auto"` model
            that found the endpoint answers on the other API)
    apis:   the API each `api="auto"` model answers on, by `NAME@ENDPOINT`, as found before (a
            resumed run's run.json): such a model is built on it, with no request to find out
    default_temperature, max_output_tokens: the temperature and the most tokens one model call
            may generate, for the calls of handlers whose declaration writes no `temperature=`
            / `max_tokens=` of their own (`--temperature`, `--max-output-tokens`; see
            `sampling`); None: the kind's own default. `temperature`, when given (every
            request's, over the handlers' own: `decomp optimize`'s retry rounds), wins over both
    """

    def __init__(self, *, registry: Registry | None = None, model: Model | str | None = None,
                 settings: ModelSettings | None = None, scheduler: Scheduler | None = None,
                 cache: StepCache | None = None, budget: Budget | None = None,
                 max_depth: int = 64, max_steps: int | None = None, default_model: str | None = DEFAULT_MODEL,
                 handler_timeout: float | None = None, handler_memory_mb: float | None = None,
                 python_workers: bool = True, prices: Mapping[str, Price] | None = None,
                 temperature: float | None = None, rollout: int = 0,
                 on_note: Callable[[str], None] | None = None, apis: Mapping[str, str] | None = None,
                 default_temperature: float | None = None, max_output_tokens: int | None = None,
                 trust: Trust | None = None):
        if temperature is not None and not temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if default_temperature is not None and not default_temperature >= 0:
            raise ValueError(f"default_temperature must be >= 0, got {default_temperature}")
        if max_output_tokens is not None and not max_output_tokens >= 1:
            raise ValueError(f"max_output_tokens must be >= 1, got {max_output_tokens}")
        if rollout < 0:
            raise ValueError(f"rollout must be >= 0, got {rollout}")
        self.registry = load_plugins(registry or default_registry)
        #: What runs nested work for every call of this session (the interpreter).
        self.runner = RUNNER
        #: What this session's programs may reach beyond their folders (`--trust`, `--allow-root`):
        #: its own, handed to each load and call, never shared with another session.
        self._trust = trust or NO_TRUST
        #: Folders lent for a while (`trusting`), with how many blocks lend each.
        self._lent: collections.Counter[Path] = collections.Counter()
        self.settings = dataclasses.replace(settings or ModelSettings(), trust=self._trust)
        self.scheduler = scheduler or Scheduler()
        self.cache = cache
        self.budget = budget or Budget()
        self.max_depth = max_depth
        self.max_steps = max_steps
        #: What each handler call of this session may use (time, memory, answer size, worker
        #: processes), handed to every call as `Call.limits`: never set for the process.
        self.limits = Limits(handler_timeout, handler_memory_mb, self.budget.answer_mb, python_workers)
        #: The temperature of every model request, over the handlers' own (None: theirs).
        self.temperature = temperature
        #: The temperature, and the most tokens one call may generate, of model calls whose
        #: handler writes none (None: the kind's own default; see `sampling`).
        self.default_temperature = default_temperature
        self.max_output_tokens = max_output_tokens
        #: Which rollout this session's samples are: at temperature > 0, samples of rollout k > 0
        #: have keys of their own, so a retry of a whole run draws new samples, not the cache's.
        self.rollout = rollout
        self.usage = Usage()
        #: Where the run's budgets are counted when its rows run in several processes
        #: (`budgets.SharedRun`; None: in this session's `usage`).
        self.shared_run: SharedRun | None = None
        self._override = model
        #: The secrets of the models and services used so far, masked in every model reply.
        self.secrets = RunSecrets()
        if isinstance(model, Model):
            self.secrets.learn(model)
        self.default_model = default_model
        self._models: dict[str, Model] = {}
        self._services: dict[int, Service] = {}
        self._modules: list[LoadedModule] = []
        self._declared: dict[str, tuple[str, ModelSettings]] = {}
        #: Model name -> price, from the `prices` given; `_priced`: by model instance, from its
        #: declaration's options.
        self.prices: dict[str, Price] = dict(prices or {})
        self._priced: dict[int, Price] = {}
        #: Told each note of the run, as one line (see `on_note` above).
        self.on_note = on_note
        #: What `api="auto"` models found (given, and found by this session's models), by
        #: `NAME@ENDPOINT`: a model built again (after `aclose`) starts on it too.
        self.apis: dict[str, str] = dict(apis or {})

    # ---- trust
    @property
    def trust(self) -> Trust:
        """What this session's programs may reach beyond their own folders: its `trust`, and the
        folders lent now (`trusting`)."""
        return self._trust.adding(roots=self._lent) if self._lent else self._trust

    @contextlib.contextmanager
    def trusting(self, roots: Iterable[str | Path]) -> Iterator[None]:
        """Within the block, this session also allows the folders `roots` (a folder the caller
        gives as a field, `--field index=DIR`: the user's own, readable by the run); other
        sessions never see them. Blocks may overlap: a folder stays allowed while any lends it."""
        folders = list(Trust.of(roots=roots).roots)
        self._lent.update(folders)
        try:
            yield
        finally:
            for folder in folders:
                self._lent[folder] -= 1
                if self._lent[folder] <= 0:  # no block lends it any more
                    del self._lent[folder]

    # ---- loading
    def load(self, path: str | Path, text: str | None = None, *,
             trusted_folders: FolderTrust | None = None) -> LoadedModule:
        """Parse and check a .decomp file; raises `DecompError` (often `Diagnostics`).
        `trusted_folders`: a check's (the program's Python is imported only from them); None, a
        run's (running a program is consent to import its own modules)."""
        module = load(path, self.registry, text, trusted_folders, self.trust)
        for name, (spec, options) in module.model_decls.items():
            settings = dataclasses.replace(self.settings, **_known_settings(options),
                                           options=tuple(sorted(options.items())))
            self._declared[name] = (spec, settings)
        self._modules.append(module)
        return module

    # ---- models
    @property
    def model_override(self) -> Model | str | None:
        """The model given to the session (a `Model` or a spec), which handlers naming none use."""
        return self._override

    def default_model_spec(self, module: LoadedModule) -> str | None:
        """The model spec a handler of `module` naming none would use (what a run records)."""
        if isinstance(self._override, Model):
            return self._override.name
        return self._spec(None, module.default_model)

    def resolve_model(self, explicit: str | None, module_default: str | None) -> Model:
        """The model for a handler: its own `model=`, else the session's (--model), else the module's
        `model default`, else the session's default (the embedded local model)."""
        if explicit is None and isinstance(self._override, Model):
            return self._override
        spec = self._spec(explicit, module_default)
        if spec is None:
            raise ModelError("no model is configured: pass --model or declare `model default = \"...\"`")
        return self.model(spec)

    def _spec(self, explicit: str | None, module_default: str | None) -> str | None:
        """The spec `resolve_model` uses when the session's override is not a `Model` instance."""
        override = self._override if isinstance(self._override, str) else None
        return explicit or override or module_default or self.default_model

    def model(self, spec: str) -> Model:
        """A model instance for a spec or a declared model name (one instance per spec)."""
        if spec not in self._models:
            real, settings = self._declared.get(spec, (spec, self.settings))
            model = self._build_model(real, settings)
            where = f"{model.name}@{getattr(model, 'endpoint', '')}"
            if settings.api == "auto" and where in self.apis:  # found before: on it from the start
                model = self._build_model(real, dataclasses.replace(settings, api=self.apis[where]))
            if hasattr(model, "on_api"):
                model.on_api = lambda api, line, where=where: self._api_found(where, api, line)
            self._models[spec] = model
            self.secrets.learn(self._models[spec])
            price = price_from_options(dict(settings.options))
            if price is not None:
                self._priced[id(self._models[spec])] = price
        return self._models[spec]

    def _api_found(self, where: str, api: str, line: str) -> None:
        """An `api="auto"` model found its API: kept, and said once per model and endpoint."""
        if self.apis.get(where) != api:
            self.apis[where] = api
            if self.on_note is not None:
                self.on_note(line)

    def _build_model(self, spec: str, settings: ModelSettings) -> Model:
        scheme, _, rest = spec.partition(":")
        factory = self.registry.model_backend(scheme)
        if factory is None:
            known = ", ".join(sorted(self.registry.model_backends))
            raise ModelError(f"unknown model {spec!r} (known backends: {known})")
        return factory(rest, settings)

    # ---- model calls: cache, budget, scheduler, usage
    def sampling(self, request: Request, options: Any) -> Request:
        """`request` as the run sends it for a handler with `options`: `default_temperature` and
        `max_output_tokens` in place of the kind's defaults, where the kind has the option
        (`temperature`, `max_tokens`) and the handler's declaration does not write it. A
        handler's own option wins; a kind with no such option keeps what it asked for."""
        if self.default_temperature is None and self.max_output_tokens is None:
            return request
        written = getattr(options, "model_fields_set", set())
        known = getattr(type(options), "model_fields", {})
        given = {"temperature": self.default_temperature, "max_tokens": self.max_output_tokens}
        changes = {name: value for name, value in given.items()
                   if value is not None and name in known and name not in written}
        return dataclasses.replace(request, **changes) if changes else request

    def price(self, model: Model) -> Price | None:
        """What `model`'s tokens cost: its declaration's price_in/price_out, else `prices` under
        its name; None when neither says."""
        return self._priced.get(id(model)) or find_price(self.prices, model.name)

    def spec_price(self, spec: str | None) -> Price | None:
        """The price of the model `spec` (a declared name, or a spec) would give, unbuilt."""
        if spec is None:
            return None
        real, settings = self._declared.get(spec, (spec, self.settings))
        return price_from_options(dict(settings.options)) or find_price(self.prices, real)

    async def _request(self, model: Model, request: Request, row: RowContext) -> Completion:
        """One request of `model`, made: counted, refused by a spent budget, timed and charged."""
        price = self.price(model)
        hold = price.cost(len(request.prompt) // 4, request.max_tokens * request.n) \
            if price is not None and self.budget.run_cost is not None else 0.0
        row.before_call(model.kind, model.name, price, hold)
        try:
            with timing() as latency:
                done = self.secrets.masked(await self.scheduler.complete(model, request, self._turn(row)))
        except BaseException:
            row.release(hold)
            raise
        row.charge(done.prompt_tokens, done.completion_tokens, 0, model=model.name,
                   seconds=latency.seconds, queued=latency.queued, price=price, held=hold,
                   cached_tokens=done.cached_tokens, reasoning_tokens=done.reasoning_tokens)
        return done

    async def complete(self, model: Model, request: Request, handler: str = "") -> Completion:
        """One request through the cache and the scheduler; each sample is cached by its index.
        The run's secrets are masked in the texts before anything stores them (`RunSecrets`)."""
        row = current_row()
        self.secrets.learn(model)
        _takes_soft_prompt(model, request.soft_prompt)
        if request.tools and not model.takes_tools:
            raise ModelError(f"{model.name} cannot call tools: tools need a chat model (an openai: model on the "
                             "chat API: --api chat)")
        if self.temperature is not None:
            request = dataclasses.replace(request, temperature=self.temperature)
        if self.cache is None:
            return await self._request(model, request, row)
        # a request of temperature > 0 made again in the row (a retry) gets new samples, not the
        # first request's from the cache: its k-th occurrence takes sample indexes k*n .. k*n+n-1
        chat = model.chat
        first = (row.occurrence(self._sample_key(model, request, -1, self.rollout)) * request.n
                 if request.temperature > 0 else 0)
        keys = [self._sample_key(model, request, first + i, self.rollout) for i in range(request.n)]
        found = [self._cached(k, f"[{handler}] on {model.name}", _SAMPLE) for k in keys]
        if request.tools:  # a sample with tool calls that are not well formed is a miss
            found = [_sample(value) for value in found]
        missing = [i for i, value in enumerate(found) if value is None]
        if not missing:
            row.charge(0, 0, request.n)
            return Completion(self.secrets.mask_all(f["text"] for f in found), cache_hits=request.n,
                              tool_calls=_calls_of(found, self.secrets) if request.tools else ())
        fresh = await self._request(model, dataclasses.replace(request, n=len(missing)), row)
        if model.chat != chat:  # the model found out its API on this request: key it as it went
            keys = [self._sample_key(model, request, first + i, self.rollout) for i in range(request.n)]
        for i, text, calls in zip(missing, fresh.texts, fresh.tool_calls or ((),) * len(missing)):
            found[i] = {"text": text, "tool_calls": [call.wire() for call in calls]} if calls else {"text": text}
            self.cache.put(keys[i], found[i])
        row.charge(0, 0, request.n - len(missing))
        texts = self.secrets.mask_all(f["text"] for f in found)  # the hits among them too
        reasons = fresh.finish_reasons if len(missing) == request.n else ()  # hits' reasons are not kept
        return Completion(texts, fresh.prompt_tokens, fresh.completion_tokens, request.n - len(missing), reasons,
                          tool_calls=_calls_of(found, self.secrets) if request.tools else (),
                          cached_tokens=fresh.cached_tokens,
                          reasoning_tokens=fresh.reasoning_tokens)

    async def score(self, model: Model, prompt: str, continuation: str, handler: str = "", *,
                    soft_prompt: SoftPrompt | None = None) -> Score:
        """Log-likelihood of `continuation` after `prompt` (after `soft_prompt`'s embeddings, when
        given), cached like completions."""
        row = current_row()
        _takes_soft_prompt(model, soft_prompt)
        key = self._score_key(model, prompt, continuation, soft_prompt)
        value = self._cached(key, f"[{handler}] on {model.name}", _SCORE)
        if value is not None:
            row.charge(0, 0, 1)
            return Score(value["logprob"], value["tokens"])
        price = self.price(model)
        row.before_call(model.kind, model.name, price)
        with timing() as latency:
            score = await self.scheduler.score(model, prompt, continuation, self._turn(row), soft_prompt)
        self._store(key, {"logprob": score.logprob, "tokens": score.tokens})
        row.charge(score.tokens, 0, 0, model=model.name, seconds=latency.seconds, queued=latency.queued, price=price)
        return score

    async def request(self, service: Service, method, args: tuple, *, cache: Mapping[str, Any] | None = None,
                      tokens: float = 0, what: str = "") -> tuple[Any, bool]:
        """One call of any outbound service: the step cache (when `cache` names what decides
        the answer), the budgets of its kind, the scheduler's slots, rate limits and retries.
        Returns the answer and whether the cache gave it."""
        self._services.setdefault(id(service), service)
        self.secrets.learn(service)
        row = current_row()
        key = None
        if cache is not None and self.cache is not None:
            # the handler's parts apart, so none of them can stand for the service's kind or name
            key = cache_key({"op": service.kind, "service": service.name, "parts": dict(cache)})
            value = self._cached(key, f"{service.kind} {what[:60]!r} on {service.name}", _ANSWER)
            if value is not None:
                row.charge(0, 0, 1)
                return value["answer"], True
        row.before_call(service.kind)
        answer = await self.scheduler.call(service, method, args, self._turn(row), tokens)
        if key is not None:
            self._store(key, {"answer": answer})
        return answer, False

    def _turn(self, row: RowContext) -> int:
        """The scheduler priority of the call `row` has just counted."""
        return self.scheduler.turn(row.priority, row.usage.calls - 1)

    @staticmethod
    def _sample_key(model: Model, request: Request, index: int, rollout: int = 0) -> str:
        sampling = {"max_tokens": request.max_tokens, "temperature": request.temperature,
                    "stop": list(request.stop), "seed": request.seed}
        sample = index if request.temperature > 0 else 0
        if rollout and request.temperature > 0:  # in the key only then: other keys stay as they were
            sampling["rollout"] = rollout
        # the model's identity, not only its name: a fake model's file or a weights file edited
        # under the same name must miss
        parts = {"op": "complete", "model": model.cache_identity(), "sampling": sampling, "sample": sample,
                 "prompt": request.prompt}
        if request.tools or (model.chat and request.messages is not None):
            # a conversation decides a chat model's answer, not the text: in the key only then
            # (a prompt sent as one user message keeps the key it always had)
            del parts["prompt"]
            parts["messages"] = [m.wire() for m in request.messages or (Message("user", request.prompt),)]
            if request.tools:
                parts["tools"] = [tool.wire() for tool in request.tools]
        if request.constraint is not None:  # in the key only then: other keys stay as they were
            parts["constraint"] = request.constraint.key()
        return cache_key(_with_soft_prompt(parts, request.soft_prompt))

    @staticmethod
    def _score_key(model: Model, prompt: str, continuation: str, soft_prompt: SoftPrompt | None) -> str:
        parts = {"op": "score", "model": model.cache_identity(), "prompt": prompt, "continuation": continuation}
        return cache_key(_with_soft_prompt(parts, soft_prompt))

    def _cached(self, key: str, what: str, shape: Mapping[str, Any]) -> Any:
        """The cached value of `key` when it has `shape` (else a miss: see `StepCache.get`)."""
        if self.cache is None:
            return None
        value = self.cache.get(key, what, shape)
        return value if self.cache.hit(value) else None

    def _store(self, key: str, value: Any) -> None:
        if self.cache is not None:
            self.cache.put(key, value)

    # ---- running
    async def arun(self, module: LoadedModule, fields: Mapping[str, Any], target: str | None = None,
                   index: int = 0) -> RunResult:
        """Run the module's main (or `target`) on one row; errors are caught into the result."""
        row = RowContext(index, self.budget, self.usage, fields=fields, shared=self.shared_run)
        token = CURRENT_ROW.set(row)
        trace = TraceNode("row", label=str(fields.get("id", "")), started=time.time())
        try:
            answer = await self._entry(module, target, fields, trace)
        except DecompError as err:
            trace.error, trace.details = str(err), getattr(err, "details", None)
            return RunResult(None, str(err), trace, row.usage, environments=_finish_environments(row),
                             also_failed=tuple(str(other) for other in also_failed(err)))
        except Exception as err:  # a bug in the interpreter must not end the run: record it on the row
            trace.error = str(InternalError.of(err))
            return RunResult(None, trace.error, trace, row.usage, environments=_finish_environments(row))
        finally:
            CURRENT_ROW.reset(token)
        value, ok = outcome(answer)
        reason = answer.reason if isinstance(answer, Failed) else None
        trace.answer, trace.failed = value, not ok
        return RunResult(value, None, trace, row.usage, failed=not ok, environments=_finish_environments(row),
                         reason=reason)

    def run(self, module: LoadedModule, fields: Mapping[str, Any], target: str | None = None) -> RunResult:
        """Synchronous `arun` for one row (closes the models' connections afterwards). Inside a
        running event loop (a Jupyter cell) it runs on a worker thread with a loop of its own
        (`decomp.runtime.engine.syncrun`); `await session.arun(...)` there runs in that loop."""
        async def one() -> RunResult:
            try:
                return await self.arun(module, fields, target)
            finally:
                await self.aclose()
        return run_sync(one)

    async def arun_handler(self, handler: Handler, query: str, values: tuple = (),
                           inputs: Mapping[str, Any] | None = None) -> Any:
        """Run one handler instance on a sub-query, as a step would (no step cache): for testing
        a handler kind of one's own. Raises the `Failure` or `Abort` that ended it."""
        trace = TraceNode("call", handler=handler.name, query=query)
        call = EngineCall(query, tuple(values), dict(inputs or {}), (), None, self, handler, trace)
        try:
            return await run_kind(handler, call)
        except Exception as err:
            failure = named(err, handler, None)
            if failure is err:
                raise
            raise failure from err

    def run_handler(self, handler: Handler, query: str, values: tuple = (),
                    inputs: Mapping[str, Any] | None = None) -> Any:
        """Synchronous `arun_handler` (inside a running loop, on a worker thread: see `run`)."""
        return run_sync(lambda: self.arun_handler(handler, query, values, inputs))

    def run_sync(self, awaitable):
        """Run one coroutine of this session (a `complete`, a `score`) to its end (inside a
        running loop, on a worker thread: see `run`)."""
        return run_sync(lambda: awaitable)

    async def aclose(self) -> None:
        """Close model clients and other services (they are rebuilt on next use), call every
        loaded handler's close hook, and commit the cache."""
        services = [*self._models.values(), *self._services.values()]
        self._models, self._services = {}, {}
        for service in services:
            await service.aclose()
        for handler in self._loaded_handlers():
            await handler.aclose()
        if self.cache is not None:
            self.cache.flush()

    def _loaded_handlers(self) -> list[Handler]:
        """Every handler of the loaded modules and of the modules their `program(file=...)`
        handlers loaded, once each (such a handler's own close hook closes its target)."""
        found: list[Handler] = []
        seen: set[int] = set()
        modules = list(self._modules)
        while modules:
            module = modules.pop(0)
            for handler in module.handlers.values():
                if id(handler) in seen:
                    continue
                seen.add(id(handler))
                found.append(handler)
                for target in handler.linked():
                    seen.add(id(target))
                    if target.ctx.module is not None:
                        modules.append(target.ctx.module)
        return found

    async def _entry(self, module: LoadedModule, target: str | None, fields, trace: TraceNode) -> Any:
        name = target or module.main
        if name is None:
            raise DecompError(f"{module.path} has no `main` and no target was given")
        handler = module.handlers.get(name)
        if handler is None:
            raise DecompError(f"{module.path} has no program or handler named '{name}'")
        try:
            if handler.reads_row:
                call = EngineCall("", (), dict(fields), (name,), None, self, handler, trace)
                return typed_answer(handler, await handler.run_main(call, fields), trace)
            if "question" not in fields:
                raise DecompError(f"the row has no 'question' field for [{name}]")
            question = fields["question"]
            if question is None:
                raise DecompError(f"the row's 'question' is null: [{name}] has nothing to answer")
            stack = (name,) if handler.nests else ()
            query = question if isinstance(question, str) else json_text(question)  # 12, not "12.0"; lists as JSON
            call = EngineCall(query, (), dict(fields), stack, None, self, handler, trace)
            return typed_answer(handler, await run_kind(handler, call), trace)
        except Exception as err:  # named like any other handler's, a bug included
            failure = named(err, handler, None)
            if failure is err:
                raise
            raise failure from err


def _takes_soft_prompt(model: Model, soft_prompt: SoftPrompt | None) -> None:
    """Refuse a soft prompt for a model that cannot read one (every backend but the local one)."""
    if soft_prompt is not None and not model.soft_prompts:
        raise ModelError(f"{model.name} cannot take a soft prompt (soft_prompt= needs a local: model)")


def _with_soft_prompt(parts: dict[str, Any], soft_prompt: SoftPrompt | None) -> dict[str, Any]:
    """A cache key's parts with the soft prompt's file digest, when there is one: the keys of
    calls without one stay as they were, so caches made before soft prompts still answer."""
    return parts if soft_prompt is None else {**parts, "soft_prompt": soft_prompt.digest}


def _sample(value: Any) -> dict | None:
    """A cached sample, or None (a miss) when its tool calls, if it has any, are not well formed."""
    if value is None or "tool_calls" not in value:
        return value
    try:
        ok = all(isinstance(c["id"], str) and isinstance(c["function"]["name"], str)
                 and isinstance(c["function"]["arguments"], str) for c in value["tool_calls"])
    except (TypeError, KeyError):
        return None
    return value if ok else None


def _calls_of(samples: list[dict], secrets: RunSecrets) -> tuple[tuple[ToolCall, ...], ...]:
    """The tool calls of cached or fresh samples, masked (empty when none has any)."""
    if not any("tool_calls" in sample for sample in samples):
        return ()
    calls = tuple(tuple(ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                        for c in sample.get("tool_calls") or ()) for sample in samples)
    return tuple(secrets.mask_calls(found) for found in calls) if any(calls) else ()


def _finish_environments(row: RowContext) -> dict[str, Any]:
    """The row's environment summaries, then their close hooks; an environment's own failure
    is recorded in the summaries, never raised (it must not lose the row)."""
    try:
        summaries = row.environment_summaries()
    except Exception as err:
        summaries = {"error": f"summary: {type(err).__name__}: {err}"}
    try:
        row.close_environments()
    except Exception as err:
        summaries["close error"] = f"{type(err).__name__}: {err}"
    return summaries


def _known_settings(options: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(ModelSettings)} - {"options"}
    return {k: v for k, v in options.items() if k in names}

