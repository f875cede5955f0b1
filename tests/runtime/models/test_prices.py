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
    ("price_cached=0.5", "model 'default' has price_cached but not price_in and price_out: give them too"),
    ("price_in=1, price_out=2, price_cached=-1", "option 'price_cached' of a model must be a price >= 0"),
    ('price_in=1, price_out=2, price_cached="low"', "option 'price_cached' of a model needs a int"),
])
def test_a_declarations_price_options_are_checked_with_their_place(options, message):
    src = f'model default = "fake:" ({options})\nhandler ask = prompt(text="Q: x?\\nA: y\\n")\n' \
          'program p(question) {\n    QS: [ask] #question\n}\nmain p\n'
    with pytest.raises(DecompError, match=message) as err:
        Session().load("x.decomp", text=src)
    assert "x.decomp:1:" in str(err.value)


def test_cached_prompt_tokens_cost_price_cached_and_price_in_without_it():
    with_cached = Price(2.0, 10.0, price_cached=0.5)
    assert with_cached.cost(1000, 100, 600) == pytest.approx((400 * 2.0 + 600 * 0.5 + 100 * 10.0) / 1e6)
    assert with_cached.cost(1000, 100) == Price(2.0, 10.0).cost(1000, 100)  # none cached: as before
    plain = Price(2.0, 10.0)  # no price_cached: a cached token costs what any prompt token does
    assert plain.cost(1000, 100, 600) == plain.cost(1000, 100) == pytest.approx((1000 * 2.0 + 100 * 10.0) / 1e6)
    assert with_cached.cost(10, 0, 50) == with_cached.cost(10, 0, 10)  # at most the prompt's tokens
    assert Price(2.0, 10.0) == Price(2.0, 10.0, None) != with_cached
    for bad in (-1, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match="price_cached must be a number >= 0"):
            Price(1, 1, bad)


def test_a_prices_file_may_give_price_cached(tmp_path):
    as_json = tmp_path / "prices.json"
    as_json.write_text(json.dumps({"gpt-4o-mini": {"price_in": 0.15, "price_out": 0.6, "price_cached": 0.075},
                                   "other": {"price_in": 1, "price_out": 2}}))
    as_toml = tmp_path / "prices.toml"
    as_toml.write_text('["gpt-4o-mini"]\nprice_in = 0.15\nprice_out = 0.6\nprice_cached = 0.075\n')
    assert load_prices(as_json) == {"gpt-4o-mini": Price(0.15, 0.6, 0.075), "other": Price(1, 2)}
    assert load_prices(as_toml) == {"gpt-4o-mini": Price(0.15, 0.6, 0.075)}


@pytest.mark.parametrize("entry, message", [
    ({"price_in": 1, "price_cached": 0.5}, "model 'm': give exactly price_in and price_out, and optionally price_cached"),
    ({"price_in": 1, "price_out": 2, "price_cache": 0.5}, "model 'm': give exactly price_in and price_out"),
    ({"price_in": 1, "price_out": 2, "price_cached": -0.5}, "model 'm': price_cached must be a number >= 0"),
    ({"price_in": 1, "price_out": 2, "price_cached": None}, "model 'm': price_cached must be a number >= 0"),
    ({"price_in": 1, "price_out": 2, "price_cached": "half"}, "model 'm': price_cached must be a number >= 0"),
])
def test_a_bad_price_cached_in_a_prices_file_is_named_with_its_entry(tmp_path, entry, message):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"m": entry}))
    with pytest.raises(ValueError, match=message) as err:
        load_prices(path)
    assert str(path) in str(err.value)


def test_price_options_may_give_price_cached_with_both_prices():
    assert price_from_options({"price_in": 1, "price_out": 2, "price_cached": 0.25}) == Price(1, 2, 0.25)
    with pytest.raises(ValueError, match=r"both price_in and price_out .* \(price_cached needs both\)"):
        price_from_options({"price_cached": 0.25})


def test_a_declarations_price_cached_prices_its_model():
    src = 'model default = "fake:" (price_in=1, price_out=2, price_cached=0.25)\n' \
          'handler ask = prompt(text="Q: x?\\nA: y\\n")\nprogram p(question) {\n    QS: [ask] #question\n}\nmain p\n'
    session = Session()
    session.load("x.decomp", text=src)
    assert session.spec_price("default") == Price(1, 2, 0.25)
