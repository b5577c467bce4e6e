"""JSON writes as arithmetic on the episode's last values: numeric changes, list appends, fresh ids."""

from __future__ import annotations

import json

from worldsmith.sim.sources.fields import FieldTracker
from worldsmith.worldbook import Evidence


def _episode(name: str, start: float, watch: list[str], order: int) -> list[Evidence]:
    turns = [
        ("displayCarStatus", {"option": "fuel"}, {"fuelLevel": start}),
        ("fillFuelTank", {"fuelAmount": 5}, {"fuelLevel": start + 5}),
        ("get_watchlist", {}, {"watchlist": watch}),
        ("add_to_watchlist", {"stock": "ZETA"}, {"watchlist": [*watch, "ZETA"]}),
        ("remove_stock_from_watchlist", {"symbol": watch[0]}, {"watchlist": [*watch[1:], "ZETA"]}),
        ("get_order", {}, {"order_id": order, "status": "Open"}),
        ("place_order", {"symbol": "ZETA", "amount": 3}, {"order_id": order + 1, "status": "Pending", "symbol": "ZETA"}),
    ]
    return [Evidence(turn_id=f"{name}#{i}", action=action, arguments=arguments, action_text=action,
                     observation=json.dumps(answer)) for i, (action, arguments, answer) in enumerate(turns)]


def _tracker() -> FieldTracker:
    return FieldTracker([*_episode("e1", 10.0, ["AAPL"], 100), *_episode("e2", 22.5, ["NVDA", "MSFT"], 7)])


def test_relations_are_learned_per_action_and_field() -> None:
    relations = _tracker().relations
    assert relations[("fillFuelTank", "fuelLevel")] == ("add", "fuelAmount")
    assert relations[("add_to_watchlist", "watchlist")] == ("append", "stock")
    assert relations[("remove_stock_from_watchlist", "watchlist")] == ("remove", "symbol")
    assert relations[("place_order", "order_id")] == ("next", None)
    assert relations[("place_order", "status")] == ("const", None)
    assert relations[("place_order", "symbol")] == ("echo", "symbol")


def test_a_write_is_answered_from_the_episodes_last_values_in_the_tools_layout() -> None:
    tracker = _tracker()
    tracker.reset()
    assert tracker.propose("fillFuelTank", {"fuelAmount": 7}) == []  # the fuel level was never shown
    tracker.observe("displayCarStatus", {}, '{"fuelLevel": 42.0}')
    [fuel] = tracker.propose("fillFuelTank", {"fuelAmount": 7})
    assert (fuel.source, fuel.observation) == ("fields", '{"fuelLevel": 49.0}')
    tracker.observe("get_watchlist", {}, '{"watchlist": ["NVDA"]}')
    assert tracker.propose("add_to_watchlist", {"stock": "AAPL"})[0].observation == '{"watchlist": ["NVDA", "AAPL"]}'
    tracker.observe("get_order", {}, '{"order_id": 41, "status": "Open"}')
    [order] = tracker.propose("place_order", {"symbol": "QQQ", "amount": 1})
    assert order.observation == '{"order_id": 42, "status": "Pending", "symbol": "QQQ"}'
    assert tracker.propose("get_watchlist", {}) == []  # a read: memory and entity records answer those
