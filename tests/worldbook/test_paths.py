"""Any JSON key is a state path: `join_path` escapes it, `resolve_path` gives it back, builds keep it."""

from __future__ import annotations

import random

import orjson
import pytest

from worldsmith.traces import Episode
from worldsmith.worldbook import StatePath, build_worldbook
from worldsmith.worldbook.engine import apply_effects, resolve_path
from worldsmith.worldbook.model import escape_key, join_path
from worldsmith.worldbook.rule_replay import observe_turn

HOSTILE = ["MA(20)", "a.b", "bed 1", "x[0]", "]", "[", "{arg.symbol}", "{", "}}", "\\", "a\\]", "", " ", "arg.symbol",
           "arg.x]", "ключ", "名前", "'quoted'", '"double"', "line\nbreak", "*", "{key}", "tab\there", "..", "a-b_c"]
_ALPHABET = "ab.[]{}\\ '\"()#*-_\n" + "é名"


def _random_keys(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [''.join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 8))) for _ in range(count)]


@pytest.mark.parametrize("key", HOSTILE + _random_keys(300))
def test_every_key_round_trips_through_a_valid_path(key: str) -> None:
    path = join_path(["world", "indicators", key, "value"])
    assert StatePath(path=path).path == path  # the schema accepts it
    assert resolve_path(path, {"symbol": "AAPL"}) == ["world", "indicators", key, "value"]


def test_escaping_is_documented_and_readable() -> None:
    assert join_path(["world", "indicators", "MA(20)"]) == "world.indicators[MA(20)]"
    assert escape_key("plain_key-1") == ".plain_key-1"
    assert escape_key("a[0]") == r"[a\[0\]]"
    assert escape_key("{arg.x}") == r"[\{arg.x\}]"
    assert escape_key("arg.x") == r"[arg\.x]"  # not the argument x
    assert resolve_path("world.c[arg.x]", {"x": "bed 1"}) == ["world", "c", "bed 1"]


def _episode(number: int, results: list[tuple[str, dict]]) -> Episode:
    return Episode.model_validate({"id": f"quotes{number}", "turns": [
        {"index": index, "action": {"name": "quote", "arguments": {"symbol": symbol}},
         "observation": {"text": orjson.dumps(result).decode()}} for index, (symbol, result) in enumerate(results)]})


def test_a_build_on_hostile_json_keys_succeeds_and_reads_back_the_original_keys() -> None:
    keys = HOSTILE + _random_keys(20, seed=11)
    def result(symbol: str, price: float) -> dict:
        return {**{key: f"{key}!" for key in keys}, "symbol": symbol, "price": price,
                "indicators": {key: {key: index} for index, key in enumerate(keys)}}
    episodes = [_episode(n, [(s, result(s, n + i)) for i, s in enumerate(("AAPL", "MSFT", "GOOG"))]) for n in range(4)]
    book = build_worldbook(episodes, name="quotes").book  # the schema stage used to refuse 'world.MA(20)'
    paths = {p.path for p in book.state_schema.paths}
    assert "world[MA(20)]" in paths and r"world[x\[0\]]" in paths and "world[]" in paths
    state: dict = {}
    for item in book.evidence[:3]:
        state, _ = observe_turn(book.rules, item, state)
    expected = result("GOOG", 2)
    assert {key: state["world"].get(key) for key in expected} == expected  # every key (nested too), as observed
    effects = [e for rule in book.rules for e in rule.effects]
    assert {tuple(resolve_path(e.path, {"symbol": "X"}) or []) for e in effects} >= {("world", k) for k in keys}
    applied = apply_effects({}, effects, {"symbol": "IBM"})
    assert applied["world"]["symbol"] == "IBM"
    assert all(applied["world"][key] == f"{key}!" for key in keys)  # constants stay literal, braces and all
