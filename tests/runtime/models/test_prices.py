"""Model prices (decomp.runtime.models.prices): the prices file, a declaration's price options,
and the lookup by a model's name."""
from __future__ import annotations

import json

import pytest

from decomp.dsl.errors import DecompError
from decomp.runtime.engine.session import Session
from decomp.runtime.models.prices import Price, find_price, load_prices, price_from_options


def test_a_request_costs_its_tokens_at_the_price_per_million():
    assert Price(0.15, 0.6).cost(1_000_000, 0) == pytest.approx(0.15)
    assert Price(0.15, 0.6).cost(2000, 500) == pytest.approx(2000 * 0.15 / 1e6 + 500 * 0.6 / 1e6)
    for bad in (-1, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="price_in must be a number >= 0"):
            Price(bad, 0)


def test_prices_file_in_json_and_toml(tmp_path):
    as_json = tmp_path / "prices.json"
    as_json.write_text(json.dumps({"openai:gpt-4o-mini": {"price_in": 0.15, "price_out": 0.6}}))
    as_toml = tmp_path / "prices.toml"
    as_toml.write_text('["gpt-4o-mini"]\nprice_in = 0.15\nprice_out = 0.6\n')
    assert load_prices(as_json) == {"openai:gpt-4o-mini": Price(0.15, 0.6)}
    assert load_prices(as_toml) == {"gpt-4o-mini": Price(0.15, 0.6)}
    for prices in (load_prices(as_json), load_prices(as_toml)):
        assert find_price(prices, "openai:gpt-4o-mini") == Price(0.15, 0.6)  # full name or after the scheme
        assert find_price(prices, "openai:gpt-4o") is None


@pytest.mark.parametrize("text, message", [
    ("[1]", "maps model names"),
    ('{"m": {"price_in": 1}}', "model 'm': give exactly price_in and price_out"),
    ('{"m": {"price_in": 1, "price_out": -2}}', "model 'm': price_out must be a number >= 0"),
    ("{", "not a prices file"),
])
def test_a_bad_prices_file_is_named_with_its_entry(tmp_path, text, message):
    path = tmp_path / "prices.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        load_prices(path)
    assert str(path) in str(err.value)


def test_price_options_need_both_or_neither():
    assert price_from_options({"base_url": "x"}) is None
    assert price_from_options({"price_in": 1, "price_out": 2}) == Price(1, 2)
    with pytest.raises(ValueError, match="both price_in and price_out"):
        price_from_options({"price_in": 1})


@pytest.mark.parametrize("options, message", [
    ("price_in=1", "model 'default' has price_in but not price_out"),
    ("price_in=-1, price_out=1", "option 'price_in' of a model must be a price >= 0"),
    ('price_in="cheap", price_out=1', "option 'price_in' of a model needs a int"),
])
def test_a_declarations_price_options_are_checked_with_their_place(options, message):
    src = f'model default = "fake:" ({options})\nhandler ask = prompt(text="Q: x?\\nA: y\\n")\n' \
          'program p(question) {\n    QS: [ask] #question\n}\nmain p\n'
    with pytest.raises(DecompError, match=message) as err:
        Session().load("x.decomp", text=src)
    assert "x.decomp:1:" in str(err.value)
