"""Constrained decoding on the embedded model: llguidance token masks applied through
llama-cpp-python's logits processor.

A `Guide` serves one loaded llama context. It builds llguidance's tokenizer from the context's
vocabulary once (about a second for Gemma 3's 262,144 tokens), compiles each `Constraint` once
into a matcher kept in a small LRU (`compilations` counts them), and gives every generation a
fresh copy of that matcher inside a `GuidedLogits` processor. At each sampling step the
processor feeds the matcher the tokens sampled since the step before, fills a preallocated
bitmask and sets every disallowed logit to -inf (numpy over the mask's words and bits, not
llguidance's own kernel that repeats every word 32 times: about a tenth of a millisecond,
against 12-30 ms for the step itself).

Three rules keep a greedy constrained answer equal to the free one whenever the free one fits:
- the reply may begin with one space, before the JSON value or the regex's match: what a
  few-shot prompt's `A:` is followed by, and what the engine strips from an answer anyway
  (held to the bare value, the model would write tokens it never saw after `A:`);
- where the grammar may end, a token that begins with one of the request's stop strings is
  allowed beside end-of-text: the stop cuts the text there, as in free decoding. Elsewhere such
  a token is kept out even where the grammar allows it (a newline between JSON items), since
  the stop would cut the value short (unless nothing else is allowed there);
- where the grammar must end (the matcher is stopped), only end-of-text is allowed, so the
  reply ends where its type closes.

JSON Schema keywords llguidance does not implement (`uniqueItems`, ...) are ignored (its
`lenient` option), white space between JSON tokens is bounded (`JSON_WHITESPACE`; a schema's
own `x-guidance` options come first), and a regex's outer `^` and `$` are dropped (the match is of the whole reply
anyway). A constraint llguidance cannot compile even so (a lookaround, a word boundary) decodes freely,
its reason kept in `Guide.refused`: the grammar is then looser than the type, and the engine
validates every typed answer anyway.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Callable

from decomp.runtime.models.base import Constraint

#: How many compiled constraints (and stop-token sets) a model keeps.
CAPACITY = 32
#: The white space allowed between JSON tokens: spaces and tabs, at most one newline (and its
#: indentation). llguidance's default, any run of any JSON white space, lets a small model
#: write `["L" \r\r\r...` to the token limit when a newline stop keeps `\n` out.
JSON_WHITESPACE = r"[ \t]{0,20}(?:\n[ \t]{0,40})?"


class Lru:
    """A small least-recently-used table: `get(key, build)` returns the kept value or
    `build()`'s, keeping at most `capacity` entries."""

    def __init__(self, capacity: int = CAPACITY):
        self._capacity = capacity
        self._items: OrderedDict = OrderedDict()

    def get(self, key, build: Callable[[], Any]):
        """The value kept for `key`, else `build()`'s, kept (the least recently used dropped)."""
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = self._items[key] = build()
        if len(self._items) > self._capacity:
            self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)


def llguidance_grammar(constraint: Constraint) -> str:
    """llguidance's grammar text for a constraint, after an optional space: the regex, or the
    JSON Schema with unimplemented keywords ignored."""
    from llguidance import LLMatcher

    if constraint.regex is not None:
        return LLMatcher.grammar_from_regex(f" ?(?:{unanchored(constraint.regex)})")
    schema = json.loads(constraint.schema)
    if isinstance(schema, dict):
        own = schema.get("x-guidance")
        own = own if isinstance(own, dict) else {}
        schema = {**schema, "x-guidance": {"lenient": True, "whitespace_pattern": JSON_WHITESPACE, **own}}
    return 'start: " "? %json ' + json.dumps(schema)


def unanchored(regex: str) -> str:
    """`regex` without a leading `^` and a trailing unescaped `$`, which llguidance does not
    take and a whole-reply match does not need."""
    if regex.startswith("^"):
        regex = regex[1:]
    if regex.endswith("$") and (len(regex) - len(regex[:-1].rstrip("\\")) - 1) % 2 == 0:
        regex = regex[:-1]
    return regex


def llama_grammar(constraint: Constraint):
    """llama-cpp-python's own grammar for a JSON Schema constraint (the `llama` mode); None for
    a regex, which it has no converter for, and for a schema its converter refuses."""
    if constraint.schema is None:
        return None
    from llama_cpp import LlamaGrammar

    try:
        return LlamaGrammar.from_json_schema(constraint.schema, verbose=False)
    except Exception:  # its converter raises what it meets (ValueError, KeyError, ...): decode freely
        return None


class Guide:
    """llguidance for one llama context: its tokenizer, the compiled constraints, and a logits
    processor per generation. Build it only when a constrained request comes."""

    def __init__(self, llm, capacity: int = CAPACITY):
        self.llm = llm
        self.tokenizer, self._pieces = tokenizer(llm)
        #: how many constraints were compiled (a cached one is not compiled again)
        self.compilations = 0
        #: (schema, regex) -> why llguidance could not compile it (it then decodes freely)
        self.refused: dict[tuple, str] = {}
        self._matchers = Lru(capacity)
        self._stop_masks = Lru(capacity)

    def processor(self, constraint: Constraint, stop: tuple[str, ...] = ()) -> list | None:
        """A `LogitsProcessorList` that holds one generation to `constraint`, letting it end at
        any of `stop` where the constraint may end; None for a constraint llguidance refused."""
        from llama_cpp import LogitsProcessorList

        key = (constraint.schema, constraint.regex)
        template = self._matchers.get(key, lambda: self._compile(key, constraint))
        if template is None:
            return None
        return LogitsProcessorList([GuidedLogits(template.deep_copy(), self.llm, self.tokenizer.eos_tokens,
                                                 self.stop_mask(stop))])

    def _compile(self, key: tuple, constraint: Constraint):
        """The constraint's matcher before any token, or None (the reason in `refused`)."""
        from llguidance import LLMatcher

        self.compilations += 1
        try:
            matcher = LLMatcher(self.tokenizer, llguidance_grammar(constraint), log_level=0)
        except ValueError as err:  # a schema that is not JSON
            self.refused[key] = str(err)
            return None
        if matcher.is_error():
            self.refused[key] = matcher.get_error()
            return None
        return matcher

    def stop_mask(self, stop: tuple[str, ...]):
        """The tokens whose text begins with one of `stop`, as a bitmask in llguidance's layout
        (int32 words, bit i of word w for token 32w+i); None for no stop strings."""
        stops = tuple(s.encode("utf-8") for s in stop if s)
        return self._stop_masks.get(stops, lambda: self._bitmask(stops)) if stops else None

    def _bitmask(self, stops: tuple[bytes, ...]):
        import numpy as np

        bits = np.zeros((len(self._pieces) + 31) // 32 * 32, dtype=bool)
        bits[[token for token, piece in enumerate(self._pieces) if piece.startswith(stops)]] = True
        return np.packbits(bits, bitorder="little").view(np.int32)


def tokenizer(llm) -> tuple[Any, list[bytes]]:
    """llguidance's tokenizer for a llama context's vocabulary, and each token's text (a
    control token's marked by a leading 0xff byte, as llguidance wants). As
    `llguidance.llamacpp.lltokenizer_from_vocab` builds it, without the deprecated
    `llama_token_get_attr` that warns once per token (262,144 warnings for Gemma 3)."""
    import ctypes

    import llama_cpp
    from llguidance import LLTokenizer

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    buffer = ctypes.create_string_buffer(16 * 1024)
    pieces = []
    for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)
        piece = buffer.raw[:max(n, 0)]
        attr = llama_cpp.llama_vocab_get_attr(vocab, token)
        if attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL or (attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
                                                         and piece.startswith(b"<") and piece.endswith(b">")):
            piece = b"\xff" + piece
        pieces.append(piece)
    tokenize = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
    made = LLTokenizer.from_llamacpp(tokens=pieces, vocab_ptr=vocab, tokenize_fptr=tokenize,
                                     eos_token=llama_cpp.llama_vocab_eos(vocab), slices=None)
    return made, pieces


class GuidedLogits:
    """A llama-cpp-python logits processor holding one generation to an llguidance matcher.

    llama-cpp-python calls it at each sampling step with its whole token buffer; the tokens
    sampled so far are those from the position of the first call (the prompt's end, whatever
    part of the prompt a kept state held) to the context's current `n_tokens`."""

    def __init__(self, matcher, llm, eos: list[int], stops=None):
        import numpy as np

        self.matcher = matcher
        self._llm = llm
        self._eos = list(eos)
        self._stops = stops  # `Guide.stop_mask`'s bitmask, or None
        self._seen: int | None = None
        words = (llm.n_vocab() + 31) // 32
        self._bits = np.zeros(words, dtype=np.int32)
        self._out = np.empty(words * 32, dtype=np.float32)

    def __call__(self, input_ids, scores):
        import numpy as np

        self._consume(input_ids)
        out = self._out[:len(scores)]
        if self.matcher.is_stopped():  # the type has closed (or the matcher failed): end here
            out.fill(-np.inf)
            out[self._eos] = scores[self._eos]
            return out
        self.matcher.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)
        if self._stops is not None:
            self._with_stops()
        self._masked(scores)
        return out

    def _with_stops(self) -> None:
        """Let a stop string end the reply only where the grammar may end: its tokens allowed
        there, kept out elsewhere (unless nothing else is allowed: the stop then cuts the text
        as it would in free decoding)."""
        import numpy as np

        words = self._bits
        if self.matcher.is_accepting():
            np.bitwise_or(words, self._stops, out=words)
            return
        kept = words & ~self._stops
        if kept.any():
            words[:] = kept

    def _masked(self, scores) -> None:
        """`scores` into the output where the bitmask allows, -inf elsewhere. Few tokens allowed
        (between JSON values): those alone are copied. Most allowed (inside a string): all are,
        then the 32-token blocks the mask empties are blanked, and the bits of mixed blocks."""
        import numpy as np

        words, out = self._bits, self._out
        if np.count_nonzero(words) * 2 < len(words):
            allowed = np.unpackbits(words.view(np.uint8), bitorder="little")[:len(scores)].view(bool)
            out.fill(-np.inf)
            np.copyto(out[:len(scores)], scores, where=allowed)
            return
        out[len(scores):] = -np.inf
        np.copyto(out[:len(scores)], scores)
        blocks = out.reshape(-1, 32)
        blocks[words == 0] = -np.inf
        mixed = np.flatnonzero((words != 0) & (words != -1))
        if mixed.size:
            bits = np.unpackbits(words[mixed].view(np.uint8), bitorder="little").view(bool).reshape(-1, 32)
            part = blocks[mixed]
            part[~bits] = -np.inf
            blocks[mixed] = part

    def _consume(self, input_ids) -> None:
        """Feed the matcher the tokens sampled since the last call."""
        position = self._llm.n_tokens
        if self._seen is not None and position > self._seen:
            self.matcher.consume_tokens([int(token) for token in input_ids[self._seen:position]])
        self._seen = position
