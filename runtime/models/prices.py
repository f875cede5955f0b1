"""Prices of models, per million tokens: what a run's cost figures and `--max-cost` use.

A price comes from a model declaration's options (`model m = "openai:gpt-4o-mini"
(price_in=0.15, price_out=0.6)`) or from a prices file (`--prices FILE`), JSON or TOML, that
maps a model's name (its spec, `openai:gpt-4o-mini`, or the name after the scheme,
`gpt-4o-mini`) to `{"price_in": X, "price_out": Y}`, with an optional `"price_cached": Z`: the
price of prompt tokens the provider served from its prompt cache (`price_in` when not given). A
request costs `(prompt_tokens - cached_tokens) * price_in / 1e6 + cached_tokens * price_cached /
1e6 + completion_tokens * price_out / 1e6`. A model with no price has no cost figure (never a
made-up 0).
"""
from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from decomp.dsl.errors import InputError

__all__ = ["Price", "find_price", "load_prices", "price_from_options"]

#: The keys of a price: in a prices file's entry, or among a model declaration's options.
_KEYS = ("price_in", "price_out", "price_cached")


@dataclass(frozen=True)
class Price:
    """What a model's tokens cost, in money per million tokens: prompt tokens (`price_in`),
    completion tokens (`price_out`) and prompt tokens served from the provider's prompt cache
    (`price_cached`; None: at `price_in`, as any prompt token)."""

    price_in: float
    price_out: float
    price_cached: float | None = None

    def __post_init__(self) -> None:
        for name in ("price_in", "price_out", "price_cached"):
            value = getattr(self, name)
            if value is None and name == "price_cached":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InputError(f"{name} must be a number >= 0 (money per million tokens), not {value!r}")

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """The cost of one request that used these tokens, `cached_tokens` of its prompt tokens
        served from the provider's cache (at most all of them count as such)."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        price_cached = self.price_in if self.price_cached is None else self.price_cached
        return ((prompt_tokens - cached) * self.price_in / 1e6 + cached * price_cached / 1e6
                + completion_tokens * self.price_out / 1e6)


def price_from_options(options: Mapping[str, Any]) -> Price | None:
    """The price a model declaration's options give (both `price_in` and `price_out`, and
    optionally `price_cached`), or None when they give none."""
    if not any(name in options for name in _KEYS):
        return None
    if "price_in" not in options or "price_out" not in options:
        raise InputError("give a model both price_in and price_out (money per million tokens), or neither"
                         + (" (price_cached needs both)" if "price_cached" in options else ""))
    return Price(options["price_in"], options["price_out"], options.get("price_cached"))


def load_prices(path: str | Path) -> dict[str, Price]:
    """The prices file at `path` (.toml: TOML, else JSON): model name -> `Price`. Raises
    `InputError` (a `ValueError`) naming the file and the entry for anything else."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, RecursionError, tomllib.TOMLDecodeError) as err:
        raise InputError(f"{path}: not a prices file ({err})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a prices file maps model names to {{price_in, price_out[, price_cached]}}")
    prices = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not {"price_in", "price_out"} <= set(entry) <= set(_KEYS):
            raise InputError(f"{path}: model {name!r}: give exactly price_in and price_out, and optionally "
                             "price_cached (money per million tokens)")
        try:
            if "price_cached" in entry and entry["price_cached"] is None:  # null is no price, nor "as price_in"
                raise InputError("price_cached must be a number >= 0 (money per million tokens), not None")
            prices[name] = Price(**entry)
        except ValueError as err:
            raise InputError(f"{path}: model {name!r}: {err}") from None
    return prices


def find_price(prices: Mapping[str, Price], name: str) -> Price | None:
    """The price of the model named `name` (`openai:gpt-4o-mini`) in `prices`: under its full
    name, else under the name after its scheme (`gpt-4o-mini`); None when neither is there."""
    found = prices.get(name)
    if found is None and ":" in name:
        found = prices.get(name.partition(":")[2])
    return found
