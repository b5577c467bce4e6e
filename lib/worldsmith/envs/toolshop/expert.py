"""What the toolshop expert knows: the episode's calls and their answers, consulted as a plan replays.

The expert holds no state of its own. Each time it is asked, a goal's plan runs from the start
over `Memory`: a step whose answer is there goes on with it, the first step without one raises
`Need` (that call is the next action), and a needed call answered with an error raises `Failed`
(the goal cannot be done). So the expert adapts to what the tools said, and calls interleaved by
another policy change nothing unless they are the very calls it needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from worldsmith.traces.model import Action

__all__ = ["Failed", "Memory", "Need", "Seen", "card_id", "charged_method", "find_user", "gift_of", "methods", "order_ids",
           "order_with", "paypal_id"]


@dataclass(frozen=True)
class Seen:
    """One call of the episode and its answer."""

    name: str
    arguments: dict[str, Any]
    text: str
    error: bool
    write: bool


class Need(Exception):
    """The plan needs this call's answer next."""

    def __init__(self, action: Action) -> None:
        super().__init__(action.name)
        self.action = action


class Failed(Exception):
    """The plan cannot go on (a needed call failed, or the answers do not hold what the customer named)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _key(name: str, arguments: dict[str, Any]) -> bytes:
    return name.encode() + orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)


class Memory:
    """The episode's calls by name and arguments: the first answer of each, and the first after the last write."""

    def __init__(self, calls: list[Seen]) -> None:
        last_write = max((i for i, call in enumerate(calls) if call.write and not call.error), default=-1)
        self._first: dict[bytes, Seen] = {}
        self._fresh: dict[bytes, Seen] = {}
        for position, call in enumerate(calls):
            key = _key(call.name, call.arguments)
            self._first.setdefault(key, call)
            if position > last_write:
                self._fresh.setdefault(key, call)

    def call(self, name: str, *, fresh: bool = False, **arguments: Any) -> str:
        """The answer of this call (with `fresh`: one given after the episode's last write), else `Need` it.

        A write is made once: its first answer stands for it from then on.
        """
        seen = (self._fresh if fresh else self._first).get(_key(name, arguments))
        if seen is None:
            raise Need(Action(name=name, arguments=arguments))
        if seen.error:
            raise Failed(seen.text)
        return seen.text


def find_user(memory: Memory, ident: dict[str, str]) -> str:
    """The customer's id by the query their words allow, then their record read once."""
    if ident["by"] == "email":
        user_id = memory.call("find_user_id_by_email", email=ident["email"])
    else:
        user_id = memory.call("find_user_id_by_name_zip", first_name=ident["first_name"],
                              last_name=ident["last_name"], zip=ident["zip"])
    memory.call("get_user", user_id=user_id)
    return user_id


def order_ids(memory: Memory, user_id: str, status: str | None) -> list[str]:
    """The customer's order ids: all from their record, or those of a status by search."""
    if status is None:
        return list(json.loads(memory.call("get_user", user_id=user_id))["orders"])
    return list(json.loads(memory.call("search_orders", user_id=user_id, status=status)))


def order_with(memory: Memory, ids: list[str], names: list[str]) -> dict[str, Any]:
    """The first of these orders holding every named product, read one by one until found."""
    for order_id in ids:
        order = json.loads(memory.call("get_order", order_id=order_id))
        if set(names) <= {line["name"] for line in order["items"]}:
            return dict(order)
    raise Failed(f"no order with the {' and the '.join(names)}")


def methods(memory: Memory, user_id: str, *, fresh: bool = False) -> list[dict[str, Any]]:
    return list(json.loads(memory.call("get_user_payment_methods", fresh=fresh, user_id=user_id)))


def card_id(found: list[dict[str, Any]], brand: str, last4: str) -> str:
    for method in found:
        if method["kind"] == "card" and method["brand"] == brand and method["last4"] == last4:
            return str(method["id"])
    raise Failed(f"no {brand} card ending in {last4} on file")


def paypal_id(found: list[dict[str, Any]]) -> str:
    method = next((m["id"] for m in found if m["kind"] == "paypal"), None)
    if method is None:
        raise Failed("no PayPal account on file")
    return str(method)


def gift_of(found: list[dict[str, Any]]) -> dict[str, Any]:
    gift = next((m for m in found if m["kind"] == "gift_card"), None)
    if gift is None:
        raise Failed("no gift card on file")
    return gift


def charged_method(order: dict[str, Any]) -> str:
    """The payment method an order was charged to."""
    return str(next(p["payment_method_id"] for p in order["payments"] if p["kind"] == "charge"))
