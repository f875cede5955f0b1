"""Prefix reuse for the embedded model: a llama.cpp context evaluates only the tokens a prompt
does not share with the context's current KV state or with one of the states it kept.

A Decomposed Prompting run sends each handler's few-shot prefix on every call, and a
decomposer's calls of one row extend each other: most prompt tokens were evaluated before.
`PrefixStates` keeps the KV cells of recent prompts (llama.cpp's state of one sequence, about
18 KB a token for Gemma 3 270M, no logits), least recently used first out past a byte cap, and
`prepare` leaves a context holding the longest prefix of the next prompt that it or a kept
state shares.

The logits are those of a fresh evaluation, bit for bit, because every prompt is evaluated in
the same batches: chunks of `CHUNK` tokens from position 0 (the context's `n_batch`), and a
prefix is reused only up to a chunk boundary that a fresh evaluation would also cross. That
rule is not a nicety: llama.cpp's CPU kernels compute a token's row differently depending on
how many rows its batch holds (measured on Gemma 3 270M: an 11-token prompt evaluated as 1 + 10
tokens differs from one batch of 11 by 0.7 in a logit), so reusing a prefix cut anywhere would
change greedy answers. Generated tokens (decoded one at a time) are never kept, for the same
reason. Where cells sit in the cache does not matter (a cut after other text gives the same
logits), but a restored state is only ever used whole: cutting restored cells past Gemma 3's
512-token sliding window, then evaluating after the cut, changed the logits (a cut of the
current, evaluated state does not), so a kept state serves only prompts it is a prefix of, and
the current state is never cut inside the cells restored into it. What several prompts share (a
handler's few-shot prefix before each row's question) is kept as a state of its own, cut from a
state this context evaluated when the second such prompt ends.
`tests/runtime/models/test_local_prefix_reuse.py` checks exactly that (logits bit for bit,
greedy answers) on the bundled programs' prompts.
"""
from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

#: The kept states' default cap (MiB): about 14,000 tokens of Gemma 3 270M.
DEFAULT_CAP_MB = 256
#: Tokens per batch of every evaluation (the context's n_batch and n_ubatch), and the step at
#: which prefixes are reused. On two cores 32-token batches read a prompt as fast as 512-token
#: ones (about 300 tokens/s either way) and waste half as much as 64.
CHUNK = 32


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


def held_tokens(llm: Any) -> np.ndarray:
    """The tokens whose KV cells `llm` (a llama_cpp.Llama) holds, in order."""
    return llm.input_ids[:llm.n_tokens]


def truncate(llm: Any, n: int) -> None:
    """Keep only the first `n` evaluated tokens of `llm`'s state."""
    llm._ctx.kv_cache_seq_rm(-1, n, -1)
    llm.n_tokens = n


def forget(llm: Any, first: int, n: int) -> None:
    """Mark positions first..first+n-1 as holding no token (a soft prompt's embeddings sit
    there), so that no prompt's tokens match them."""
    llm.input_ids[first:first + n] = -1


def aligned(n: int, chunk: int) -> int:
    """`n` rounded down to a multiple of `chunk`."""
    return n - n % chunk


class PrefixStates:
    """The KV states one llama.cpp context kept, by the tokens they hold: least recently used
    first out once they pass `cap_bytes` (0 keeps none: only the current state is reused).
    Prefixes are reused and kept in whole chunks of `chunk` tokens (the context's n_batch).

    Counters: `reused` and `evaluated` prompt tokens, `restored` states, `kept_bytes`, and
    `peak_bytes` (the most the kept states held at once)."""

    def __init__(self, cap_bytes: int, chunk: int = CHUNK):
        self.cap_bytes = max(0, int(cap_bytes))
        self.chunk = max(1, int(chunk))
        self._kept: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self.kept_bytes = self.peak_bytes = 0
        self._held = 0  # how many of the context's current cells are a fresh evaluation's
        self._restored = 0  # how many of them were restored from a kept state (never cut inside)
        self.reused = self.evaluated = self.restored = 0

    def __len__(self) -> int:
        return len(self._kept)

    def prepare(self, llm: Any, tokens: Sequence[int], limit: int | None = None) -> int:
        """Leave `llm` holding the longest prefix of `tokens` in whole chunks, at most `limit`
        tokens and never all of them (the last is evaluated, for its logits), that its current
        state or a kept state shares; return that prefix's length."""
        limit = len(tokens) - 1 if limit is None else min(limit, len(tokens) - 1)
        limit = aligned(max(0, limit), self.chunk)
        current = aligned(min(common_prefix(held_tokens(llm), tokens), limit, self._held), self.chunk)
        if current < self._restored:
            current = 0
        best, chosen = current, None
        for key in self._kept:  # whole keys only (see the module's docstring)
            if best < len(key) <= limit and common_prefix(key, tokens) == len(key):
                best, chosen = len(key), key
        if chosen is not None and not self._restore(llm, chosen):
            best = 0
        truncate(llm, best)
        self._held = best
        if chosen is not None:
            self._restored = best
        elif best == 0:
            self._restored = 0
        self.reused += best
        self.evaluated += len(tokens) - best
        return best

    def _restore(self, llm: Any, key: tuple[int, ...]) -> bool:
        import llama_cpp

        data = self._kept[key]
        self._kept.move_to_end(key)
        truncate(llm, 0)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buffer, len(data), 0) != len(data):
            truncate(llm, 0)
            return False
        llm.input_ids[:len(key)] = key
        llm.n_tokens = len(key)
        self.restored += 1
        return True

    def keep(self, llm: Any, evaluated: int) -> None:
        """Cut `llm`'s state to the whole chunks of its first `evaluated` tokens (those read as
        a fresh evaluation reads them: a prompt, not what was generated after it) and keep it
        (unless it is kept already); the oldest go while the kept pass the cap. States it
        extends stay: a shorter one (a few-shot prefix) serves prompts this one does not.

        Where the prompt parts from a kept state after whole chunks they share (one handler's
        few-shot prefix, followed by another row's question), the shared part is kept too, cut
        from this evaluation: the next call of that handler restores it whole."""
        n = aligned(min(evaluated, llm.n_tokens), self.chunk)
        truncate(llm, n)
        self._held = n
        if self.cap_bytes == 0 or n == 0:
            return
        key = tuple(int(t) for t in held_tokens(llm))
        if -1 in key:  # a soft prompt's embeddings: no token sequence names this state
            return
        shared = self._shared(key)
        self._save(llm, key)
        if shared:
            truncate(llm, shared)  # cut cells this context evaluated: the same as a fresh prefix
            self._held = shared
            self._save(llm, key[:shared])

    def _shared(self, key: tuple[int, ...]) -> int:
        """The longest whole-chunk prefix `key` shares with a kept state, when neither holds it
        all, no state is kept for it, and it is not cut inside restored cells; else 0."""
        best = 0
        for other in self._kept:
            shared = aligned(common_prefix(other, key), self.chunk)
            if best < shared < min(len(other), len(key)):
                best = shared
        if best < max(self._restored, self.chunk) or key[:best] in self._kept:
            return 0
        return best

    def _save(self, llm: Any, key: tuple[int, ...]) -> None:
        """Keep `llm`'s current state under `key` (the tokens it holds), most recent last."""
        import llama_cpp

        if key in self._kept:
            self._kept.move_to_end(key)
            return
        size = llama_cpp.llama_state_seq_get_size(llm._ctx.ctx, 0)
        if size > self.cap_bytes:
            return
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(llm._ctx.ctx, buffer, size, 0)
        self._kept[key] = ctypes.string_at(buffer, written)
        self.kept_bytes += written
        while self.kept_bytes > self.cap_bytes:
            self.kept_bytes -= len(self._kept.popitem(last=False)[1])
        self.peak_bytes = max(self.peak_bytes, self.kept_bytes)

    def stats(self) -> dict:
        """The counters, as a dict."""
        return {"reused_tokens": self.reused, "evaluated_tokens": self.evaluated, "restored": self.restored,
                "kept": len(self._kept), "kept_bytes": self.kept_bytes, "peak_kept_bytes": self.peak_bytes}
