"""A small order backend behind function calls, for unit tests of tool rules and the entity store.

Its orders live in one shared store (every episode starts from the same records, as service APIs do). The
writes: `cancel_order(order_id, reason)` answers with the whole order, status "cancelled", the reason kept,
a refund appended to its payment history (amount and method from the first payment); `modify_address(order_id,
address1, city, zip)` answers `{"order_id", "address"}` with a new address object; `return_items(order_id,
item_ids)` answers with a fixed text and is seen in later reads (status "return requested", the returned
items moved to `return_items`); `touch_order(order_id)` sets `stamp` to a random number (a field no relation
explains). `get_order(order_id)` reads.
"""

from __future__ import annotations

import json
import random
from typing import Any

from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.worldbook.model import Evidence


def initial_orders(count: int = 12) -> dict[str, dict[str, Any]]:
    orders = {}
    for n in range(count):
        order_id = f"#W{1000 + n}"
        orders[order_id] = {
            "order_id": order_id, "user_id": f"user_{n % 4}", "status": "pending",
            "address": {"address1": f"{n} Main St", "city": "Austin", "zip": "73301"},
            "items": [{"item_id": f"it{n}a", "price": 10.0 + n}, {"item_id": f"it{n}b", "price": 5.0}],
            "payment_history": [{"transaction_type": "payment", "amount": 15.0 + n,
                                 "payment_method_id": f"card_{n % 3}"}],
            "stamp": 0,
        }
    return orders


def _call(orders: dict[str, dict[str, Any]], tool: str, arguments: dict[str, Any], rng: random.Random) -> str:
    order = orders[arguments["order_id"]]
    if tool == "get_order":
        return json.dumps(order)
    if tool == "cancel_order":
        order["status"] = "cancelled"
        order["cancel_reason"] = arguments["reason"]
        first = order["payment_history"][0]
        order["payment_history"].append({"transaction_type": "refund", "amount": first["amount"],
                                         "payment_method_id": first["payment_method_id"]})
        return json.dumps(order)
    if tool == "modify_address":
        order["address"] = {"address1": arguments["address1"], "city": arguments["city"], "zip": arguments["zip"]}
        return json.dumps({"order_id": order["order_id"], "address": order["address"]})
    if tool == "return_items":
        order["status"] = "return requested"
        order["return_items"] = [i for i in order["items"] if i["item_id"] in arguments["item_ids"]]
        return "Return requested."
    if tool == "touch_order":
        order["stamp"] = rng.randint(1, 10**6)
        return json.dumps(order)
    raise ValueError(tool)


def episodes(count: int = 24, seed: int = 0, prefix: str = "ep") -> list[list[Evidence]]:
    """`count` episodes, each from the shared initial store: a few reads and writes on a few orders."""
    rng = random.Random(seed)
    out = []
    for e in range(count):
        orders = initial_orders()
        calls: list[tuple[str, dict[str, Any]]] = []
        for order_id in rng.sample(sorted(orders), 3):
            if rng.random() < 0.5:
                calls.append(("get_order", {"order_id": order_id}))
            write = rng.choice(["cancel_order", "modify_address", "return_items", "touch_order"])
            if write == "cancel_order":
                calls.append((write, {"order_id": order_id, "reason": rng.choice(["no longer needed", "ordered by mistake"])}))
            elif write == "modify_address":
                calls.append((write, {"order_id": order_id, "address1": f"{rng.randint(1, 99)} Oak Ave",
                                      "city": rng.choice(["Denver", "Boston"]), "zip": str(rng.randint(10000, 99999))}))
            elif write == "return_items":
                calls.append((write, {"order_id": order_id, "item_ids": [orders[order_id]["items"][0]["item_id"]]}))
            else:
                calls.append((write, {"order_id": order_id}))
            calls.append(("get_order", {"order_id": order_id}))
        items = []
        for index, (tool, arguments) in enumerate(calls):
            observation = _call(orders, tool, arguments, rng)
            items.append(Evidence(turn_id=f"{prefix}{e}#{index}", action=tool, arguments=arguments,
                                  action_text=f"{tool}({json.dumps(arguments)})", observation=observation))
        out.append(items)
    return out


def evidence(count: int = 24, seed: int = 0) -> list[Evidence]:
    return [item for items in episodes(count, seed) for item in items]


def as_episodes(count: int = 24, seed: int = 0, prefix: str = "ep") -> list[Episode]:
    """The same calls as recorded episodes (one task family each), for builds and the harness."""
    out = []
    for number, items in enumerate(episodes(count, seed, prefix)):
        turns = [Turn(index=i, action=Action(name=item.action, arguments=item.arguments),
                      observation=Observation(text=item.observation)) for i, item in enumerate(items)]
        out.append(Episode(id=f"{prefix}{number}", env_id="shop", task_id=f"{prefix}-task-{number}", turns=turns,
                           initial_observation=Observation(text="")))
    return out
