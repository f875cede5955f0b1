"""Prices of models, per million tokens: what a run's cost figures and `--max-cost` use.

A price comes from a model declaration's options (`model m = "openai:gpt-4o-mini"
(price_in=0.15, price_out=0.6)`) or from a prices file (`--prices FILE`), JSON or TOML, that
maps a model's name (its spec, `openai:gpt-4o-mini`, or the name after the scheme,
`gpt-4o-mini`) to `{"price_in": X, "price_out": Y}`. A request costs
`prompt_tokens * price_in / 1e6 + completion_tokens * price_out / 1e6`. A model with no price
has no cost figure (never a made-up 0).
"""
from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["Price", "find_price", "load_prices", "price_from_options"]


@dataclass(frozen=True)
class Price:
    """What a model's tokens cost, in money per million tokens (prompt and completion)."""

    price_in: float
    price_out: float

    def __post_init__(self) -> None:
        for name in ("price_in", "price_out"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a number >= 0 (money per million tokens), not {value!r}")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The cost of one request that used these tokens."""
        return prompt_tokens * self.price_in / 1e6 + completion_tokens * self.price_out / 1e6


def price_from_options(options: Mapping[str, Any]) -> Price | None:
    """The price a model declaration's options give (both `price_in` and `price_out`), or None."""
    if "price_in" not in options and "price_out" not in options:
        return None
    if "price_in" not in options or "price_out" not in options:
        raise ValueError("give a model both price_in and price_out (money per million tokens), or neither")
    return Price(options["price_in"], options["price_out"])


def load_prices(path: str | Path) -> dict[str, Price]:
    """The prices file at `path` (.toml: TOML, else JSON): model name -> `Price`. Raises
    `ValueError` naming the file and the entry for anything else."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        raise ValueError(f"{path}: not a prices file ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a prices file maps model names to {{price_in, price_out}}")
    prices = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != {"price_in", "price_out"}:
            raise ValueError(f"{path}: model {name!r}: give exactly price_in and price_out "
                             "(money per million tokens)")
        try:
            prices[name] = Price(entry["price_in"], entry["price_out"])
        except ValueError as err:
            raise ValueError(f"{path}: model {name!r}: {err}") from None
    return prices


def find_price(prices: Mapping[str, Price], name: str) -> Price | None:
    """The price of the model named `name` (`openai:gpt-4o-mini`) in `prices`: under its full
    name, else under the name after its scheme (`gpt-4o-mini`); None when neither is there."""
    found = prices.get(name)
    if found is None and ":" in name:
        found = prices.get(name.partition(":")[2])
    return found
