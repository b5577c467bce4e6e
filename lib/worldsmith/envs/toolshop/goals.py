"""The kinds of customer goal: how each is drawn from the database, said, solved by gold calls and by the expert.

A kind is one class (registered in `GOAL_KINDS`) with four jobs: `draw` picks what a customer
could ask (None when this customer cannot), `words` says it as the customer would, `gold_calls`
are the calls that do it (run by the checker on a fresh store, so they may read it), and `play`
is the expert's plan over `Memory` (what the tools answered), returning what it tells the
customer. Question kinds change nothing; their `answer` is what the reply must contain.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from worldsmith.envs.toolshop.db import TICKET_SUBJECTS, BaseDB, Store, random_address
from worldsmith.envs.toolshop.expert import (
    Failed,
    Memory,
    card_id,
    charged_method,
    gift_of,
    methods,
    order_ids,
    order_with,
    paypal_id,
)
from worldsmith.envs.toolshop.tools import CANCEL_REASONS

__all__ = ["GOAL_KINDS", "Goal", "GoalKind", "address_words"]

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Goal:
    kind: str
    said: dict[str, Any]  # what the customer said: all the expert may use
    gold: dict[str, Any] = field(default_factory=dict)  # the ids behind it, for the gold calls


# --------------------------------------------------------------------------------------------
# What a customer's records allow
# --------------------------------------------------------------------------------------------


def _orders(db: BaseDB, user: dict[str, Any], status: str | None = None) -> list[dict[str, Any]]:
    found = [db.orders[order_id] for order_id in user["orders"]]
    return [order for order in found if status is None or order["status"] == status]


def _unique_line(rng: random.Random, orders: list[dict[str, Any]], among: list[dict[str, Any]] | None = None,
                 ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """An order of `orders` and one of its lines whose product is in no other order of `among` (default: `orders`)."""
    counts: dict[str, int] = {}
    for order in orders if among is None else among:
        for name in {line["name"] for line in order["items"]}:
            counts[name] = counts.get(name, 0) + 1
    choices = [(order, line) for order in orders for line in order["items"] if counts[line["name"]] == 1]
    return rng.choice(choices) if choices else None


def _cards(user: dict[str, Any]) -> list[dict[str, Any]]:
    """The customer's cards that brand and last four digits tell apart."""
    cards = [m for m in user["payment_methods"].values() if m["kind"] == "card"]
    return [c for c in cards if sum(d["last4"] == c["last4"] for d in cards) == 1]


def _gift(user: dict[str, Any]) -> dict[str, Any] | None:
    return next((m for m in user["payment_methods"].values() if m["kind"] == "gift_card"), None)


def _said_address(rng: random.Random) -> dict[str, str]:
    address = random_address(rng)
    return {key: address[key] for key in ("line1", "line2", "city", "state", "zip")}


def address_words(address: dict[str, str]) -> str:
    line2 = f", {address['line2']}" if address["line2"] else ""
    return f"{address['line1']}{line2}, {address['city']}, {address['state']} {address['zip']}"


def _options_words(options: dict[str, str]) -> str:
    return ", ".join(f"{key} {value}" for key, value in options.items())


def _method_words(pay: str) -> str:
    return "my gift card" if pay == "gift card" else "the original payment method"


def _line_of(order: dict[str, Any], name: str) -> dict[str, Any]:
    return next(line for line in order["items"] if line["name"] == name)


# --------------------------------------------------------------------------------------------
# The kinds
# --------------------------------------------------------------------------------------------


class GoalKind:
    name: ClassVar[str]
    weight: ClassVar[int]

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        raise NotImplementedError

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        raise NotImplementedError

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return []

    def answer(self, goal: Goal, user_id: str, store: Store) -> str | None:
        return None

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        raise NotImplementedError


class Cancel(GoalKind):
    """Cancel the pending order with a product; one in four customers name an order that is past pending
    (the expert tries, the shop refuses: the gold outcome is no change)."""

    name, weight = "cancel", 10
    _REASONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "ordered by mistake": ("I ordered it by mistake", "it was a mistake to order it"),
        "no longer needed": ("I don't need it anymore", "I no longer need it"),
    }

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        pending = rng.random() < 0.75
        everything = _orders(db, user)
        if pending:
            found = _unique_line(rng, _orders(db, user, "pending"))
        else:
            late = [o for o in everything if o["status"] in ("processed", "shipped", "delivered")]
            found = _unique_line(rng, late, everything)
        if found is None:
            return None
        return Goal(self.name, {"product": found[1]["name"], "reason": rng.choice(CANCEL_REASONS), "pending": pending},
                    {"order_id": found[0]["order_id"], "status": found[0]["status"]})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        which = "pending order" if said["pending"] else "order"
        return rng.choice(("Please cancel my {w} with the {p}, because {r}.",
                           "I want to cancel the {w} that has a {p} in it: {r}.")).format(
            w=which, p=said["product"], r=rng.choice(self._REASONS[said["reason"]]))

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        if goal.gold["status"] != "pending":
            return []
        return [("cancel_order", {"order_id": goal.gold["order_id"], "reason": goal.said["reason"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        status = "pending" if goal.said["pending"] else None
        order = order_with(memory, order_ids(memory, user_id, status), [goal.said["product"]])
        memory.call("cancel_order", order_id=order["order_id"], reason=goal.said["reason"])
        return f"Your order {order['order_id']} is cancelled; the refund is on its way."


class OrderAddress(GoalKind):
    name, weight = "order_address", 8

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        found = _unique_line(rng, _orders(db, user, "pending"))
        if found is None:
            return None
        return Goal(self.name, {"product": found[1]["name"], "address": _said_address(rng)},
                    {"order_id": found[0]["order_id"]})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(("My pending order with the {p} should be shipped to {a} instead.",
                           "Could you change the shipping address of my pending {p} order to {a}?")).format(
            p=said["product"], a=address_words(said["address"]))

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return [("modify_order_address", {"order_id": goal.gold["order_id"], **goal.said["address"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        order = order_with(memory, order_ids(memory, user_id, "pending"), [goal.said["product"]])
        memory.call("modify_order_address", order_id=order["order_id"], **goal.said["address"])
        return f"Order {order['order_id']} will now ship to {address_words(goal.said['address'])}."


class UserAddress(GoalKind):
    name, weight = "user_address", 6

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        return Goal(self.name, {"address": _said_address(rng)})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(("I moved: please make {a} my default address.",
                           "Please update my default address to {a}.")).format(a=address_words(said["address"]))

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return [("modify_user_address", {"user_id": user_id, **goal.said["address"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        memory.call("modify_user_address", user_id=user_id, **goal.said["address"])
        return "Your default address is updated."


class Return(GoalKind):
    name, weight = "return", 9

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        found = _unique_line(rng, _orders(db, user, "delivered"))
        if found is None:
            return None
        order, line = found
        names = [line["name"]]
        others = [other["name"] for other in order["items"] if other["name"] != line["name"]]
        if others and rng.random() < 0.4:
            names.append(rng.choice(others))
        refund = "gift card" if _gift(user) is not None and rng.random() < 0.5 else "original"
        return Goal(self.name, {"products": names, "refund": refund}, {"order_id": order["order_id"]})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return (f"I'd like to return the {' and the '.join(said['products'])} from my delivered order, refunded to "
                f"{_method_words(said['refund'])}.")

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        order = store.get("orders", goal.gold["order_id"])
        user = store.get("users", user_id)
        assert order is not None and user is not None
        gift = _gift(user)
        method = charged_method(order) if goal.said["refund"] == "original" or gift is None else gift["id"]
        return [("return_order_items", {"order_id": order["order_id"], "payment_method_id": method,
                                        "item_ids": [_line_of(order, name)["item_id"] for name in goal.said["products"]]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        order = order_with(memory, order_ids(memory, user_id, "delivered"), goal.said["products"])
        items = [_line_of(order, name)["item_id"] for name in goal.said["products"]]
        method = charged_method(order) if goal.said["refund"] == "original" else gift_of(methods(memory, user_id))["id"]
        memory.call("return_order_items", order_id=order["order_id"], item_ids=items, payment_method_id=method)
        return f"The return for order {order['order_id']} is requested; the refund goes to {method}."


class Exchange(GoalKind):
    name, weight = "exchange", 9

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        found = _unique_line(rng, _orders(db, user, "delivered"))
        if found is None:
            return None
        order, line = found
        changes = []
        for variant in db.products[line["product_id"]]["variants"].values():
            differing = [key for key, value in variant["options"].items() if line["options"].get(key) != value]
            if variant["available"] and len(differing) == 1:
                changes.append((differing[0], variant))
        if not changes:
            return None
        option, variant = rng.choice(changes)
        gift = _gift(user)
        pay = "gift card" if gift is not None and rng.random() < 0.5 else "original"
        method = gift if gift is not None and pay == "gift card" else user["payment_methods"][charged_method(order)]
        if method["kind"] == "gift_card" and variant["price"] - line["price"] > method["balance"]:
            return None
        return Goal(self.name, {"product": line["name"], "options": line["options"], "option": option,
                                "value": variant["options"][option], "pay": pay},
                    {"order_id": order["order_id"], "item_id": line["item_id"], "new_item_id": variant["item_id"],
                     "payment_method_id": method["id"]})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return (f"The {said['product']} I received ({_options_words(said['options'])}) is not right: please exchange "
                f"it for the one with {said['option']} {said['value']}, settling any price difference with "
                f"{_method_words(said['pay'])}.")

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        gold = goal.gold
        return [("exchange_order_items", {"order_id": gold["order_id"], "item_ids": [gold["item_id"]],
                                          "new_item_ids": [gold["new_item_id"]],
                                          "payment_method_id": gold["payment_method_id"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        said = goal.said
        order = order_with(memory, order_ids(memory, user_id, "delivered"), [said["product"]])
        line = _line_of(order, said["product"])
        product = json.loads(memory.call("get_product", product_id=line["product_id"]))
        wanted = {**line["options"], said["option"]: said["value"]}
        new = next((v for v in product["variants"].values() if v["options"] == wanted and v["available"]), None)
        if new is None:
            raise Failed(f"no {said['option']} {said['value']} variant in stock")
        method = charged_method(order) if said["pay"] == "original" else gift_of(methods(memory, user_id))["id"]
        memory.call("exchange_order_items", order_id=order["order_id"], item_ids=[line["item_id"]],
                    new_item_ids=[new["item_id"]], payment_method_id=method)
        return f"The exchange for order {order['order_id']} is requested."


class Buy(GoalKind):
    """Buy one item; paid by gift card, it is first topped up by the missing whole dollars."""

    name, weight = "buy", 10

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        product = db.products[rng.choice(db.product_ids)]
        available = [v for v in product["variants"].values() if v["available"]]
        gift, cards = _gift(user), _cards(user)
        paypal = next((m for m in user["payment_methods"].values() if m["kind"] == "paypal"), None)
        choices = [("card", card) for card in cards] + ([("paypal", paypal)] if paypal else [])
        if gift is not None and cards:
            choices += [("gift card", gift)] * 2
        if gift is not None:
            choices.append(("gift card only", gift))  # may fall short: the shop refuses, nothing changes
        if not available or not choices:
            return None
        variant = rng.choice(available)
        pay, method = rng.choice(choices)
        said: dict[str, Any] = {"product": product["name"], "options": variant["options"], "pay": pay}
        gold: dict[str, Any] = {"item_id": variant["item_id"], "payment_method_id": method["id"]}
        if pay == "card":
            said |= {"brand": method["brand"], "last4": method["last4"]}
        if pay == "gift card":
            card = rng.choice(cards)
            said |= {"top_up_brand": card["brand"], "top_up_last4": card["last4"]}
            gold["top_up_card_id"] = card["id"]
        return Goal(self.name, said, gold)

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        wanted = f"I'd like to buy the {said['product']} ({_options_words(said['options'])})."
        if said["pay"] == "card":
            return f"{wanted} Charge my {said['brand']} card ending in {said['last4']}."
        if said["pay"] == "paypal":
            return f"{wanted} I'll pay with PayPal."
        if said["pay"] == "gift card only":
            return f"{wanted} Use my gift card for it, nothing else."
        return (f"{wanted} Pay with my gift card; if its balance is short, first top it up from my "
                f"{said['top_up_brand']} card ending in {said['top_up_last4']} by the missing amount rounded up to "
                "whole dollars.")

    @staticmethod
    def top_up(price: float, balance: float) -> int:
        """Whole dollars a gift card lacks to pay `price` (0 when it has enough)."""
        return max(0, math.ceil(round(price - balance, 2)))

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        gold = goal.gold
        calls: list[Call] = []
        if goal.said["pay"] in ("gift card", "gift card only"):
            user = store.get("users", user_id)
            assert user is not None
            price = store.base.products[store.base.items[gold["item_id"]]]["variants"][gold["item_id"]]["price"]
            amount = self.top_up(price, user["payment_methods"][gold["payment_method_id"]]["balance"])
            if amount and goal.said["pay"] == "gift card only":
                return []  # the balance is not enough and the customer allows nothing else
            if amount:
                calls.append(("top_up_gift_card", {"user_id": user_id, "gift_card_id": gold["payment_method_id"],
                                                   "amount": amount, "source_payment_method_id": gold["top_up_card_id"]}))
        calls.append(("place_order", {"user_id": user_id, "item_ids": [gold["item_id"]],
                                      "payment_method_id": gold["payment_method_id"]}))
        return calls

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        said = goal.said
        found = json.loads(memory.call("search_products", query=said["product"]))
        product_id = next((p["product_id"] for p in found if p["name"] == said["product"]), None)
        if product_id is None:
            raise Failed(f"no product named {said['product']}")
        product = json.loads(memory.call("get_product", product_id=product_id))
        variant = next((v for v in product["variants"].values() if v["options"] == said["options"]), None)
        if variant is None or not variant["available"]:
            raise Failed(f"the {said['product']} ({_options_words(said['options'])}) is not in stock")
        on_file = methods(memory, user_id)
        if said["pay"] == "card":
            method = card_id(on_file, said["brand"], said["last4"])
        elif said["pay"] == "paypal":
            method = paypal_id(on_file)
        else:
            gift = gift_of(on_file)
            method, amount = gift["id"], self.top_up(variant["price"], gift["balance"])
            if amount and said["pay"] == "gift card":
                memory.call("top_up_gift_card", user_id=user_id, gift_card_id=method, amount=amount,
                            source_payment_method_id=card_id(on_file, said["top_up_brand"], said["top_up_last4"]))
        order = json.loads(memory.call("place_order", user_id=user_id, item_ids=[variant["item_id"]],
                                       payment_method_id=method))
        return f"Your order {order['order_id']} is placed (${variant['price']:.2f})."


class TopUp(GoalKind):
    name, weight = "top_up", 7

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        gift, cards = _gift(user), _cards(user)
        if gift is None or not cards:
            return None
        card = rng.choice(cards)
        amount = rng.choice((10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200))
        return Goal(self.name, {"amount": amount, "brand": card["brand"], "last4": card["last4"]},
                    {"gift_card_id": gift["id"], "card_id": card["id"]})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return f"Please add ${said['amount']} to my gift card, paid with my {said['brand']} card ending in {said['last4']}."

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return [("top_up_gift_card", {"user_id": user_id, "gift_card_id": goal.gold["gift_card_id"],
                                      "amount": goal.said["amount"], "source_payment_method_id": goal.gold["card_id"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        on_file = methods(memory, user_id)
        text = memory.call("top_up_gift_card", user_id=user_id, gift_card_id=gift_of(on_file)["id"],
                           amount=goal.said["amount"],
                           source_payment_method_id=card_id(on_file, goal.said["brand"], goal.said["last4"]))
        return f"Your gift card now holds ${json.loads(text)['balance']:.2f}."


class AddCard(GoalKind):
    name, weight = "add_card", 6

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        last4 = f"{rng.randint(0, 9999):04d}"
        if last4 in {m.get("last4") for m in user["payment_methods"].values()}:
            return None
        return Goal(self.name, {"brand": rng.choice(("visa", "mastercard", "amex", "discover")), "last4": last4,
                                "expires": f"{rng.randint(1, 12):02d}/{rng.randint(27, 33)}"})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return f"Please add my new {said['brand']} card ending in {said['last4']} (expires {said['expires']}) to my account."

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return [("add_card", {"user_id": user_id, **goal.said})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        memory.call("add_card", user_id=user_id, **goal.said)
        return f"Your {goal.said['brand']} card ending in {goal.said['last4']} is added."


class RemoveMethod(GoalKind):
    name, weight = "remove_method", 6

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        options = [({"method": "card", "brand": c["brand"], "last4": c["last4"]}, c["id"]) for c in _cards(user)]
        options += [({"method": "paypal"}, m["id"]) for m in user["payment_methods"].values() if m["kind"] == "paypal"]
        if len(user["payment_methods"]) < 2 or not options:
            return None
        said, method_id = rng.choice(options)
        return Goal(self.name, said, {"payment_method_id": method_id})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        if said["method"] == "paypal":
            return "Please remove PayPal from my payment methods."
        return f"Please remove my {said['brand']} card ending in {said['last4']} from my account."

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return [("remove_payment_method", {"user_id": user_id, "payment_method_id": goal.gold["payment_method_id"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        on_file, said = methods(memory, user_id), goal.said
        method = paypal_id(on_file) if said["method"] == "paypal" else card_id(on_file, said["brand"], said["last4"])
        memory.call("remove_payment_method", user_id=user_id, payment_method_id=method)
        return "That payment method is removed."


class _AboutAnOrder(GoalKind):
    """A goal about the one order (of any status) holding a named product."""

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        everything = _orders(db, user)
        candidates = [order for order in everything if self.fits(order)]
        found = _unique_line(rng, candidates, everything)
        if found is None:
            return None
        return Goal(self.name, {"product": found[1]["name"], **self.more(rng)}, {"order_id": found[0]["order_id"]})

    def fits(self, order: dict[str, Any]) -> bool:
        return True

    def more(self, rng: random.Random) -> dict[str, Any]:
        return {}

    @staticmethod
    def order(goal: Goal, memory: Memory, user_id: str) -> dict[str, Any]:
        return order_with(memory, order_ids(memory, user_id, None), [goal.said["product"]])


class OpenTicket(_AboutAnOrder):
    name, weight = "open_ticket", 7

    def more(self, rng: random.Random) -> dict[str, Any]:
        return {"subject": rng.choice(TICKET_SUBJECTS)}

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return f"Please open a support ticket about my order with the {said['product']}: \"{said['subject']}\"."

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return [("open_ticket", {"user_id": user_id, "subject": goal.said["subject"], "order_id": goal.gold["order_id"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        order = self.order(goal, memory, user_id)
        ticket = json.loads(memory.call("open_ticket", user_id=user_id, subject=goal.said["subject"],
                                        order_id=order["order_id"]))
        return f"I opened ticket {ticket['ticket_id']} about order {order['order_id']}."


class OrderStatus(_AboutAnOrder):
    name, weight = "order_status", 6

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(("What is the status of my order with the {p}?", "Where is my {p} order at?")).format(
            p=said["product"])

    def answer(self, goal: Goal, user_id: str, store: Store) -> str | None:
        order = store.get("orders", goal.gold["order_id"])
        return None if order is None else str(order["status"])

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        order_id = self.order(goal, memory, user_id)["order_id"]
        status = json.loads(memory.call("get_order_status", fresh=True, order_id=order_id))["status"]
        return f"Your order {order_id} is {status}."


class Tracking(_AboutAnOrder):
    name, weight = "tracking", 4

    def fits(self, order: dict[str, Any]) -> bool:
        return "fulfillment" in order

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return f"What is the tracking number of my order with the {said['product']}?"

    def answer(self, goal: Goal, user_id: str, store: Store) -> str | None:
        order = store.get("orders", goal.gold["order_id"])
        return None if order is None else str(order["fulfillment"]["tracking"])

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        order_id = self.order(goal, memory, user_id)["order_id"]
        fresh = json.loads(memory.call("get_order", fresh=True, order_id=order_id))
        return f"The tracking number of order {order_id} is {(fresh.get('fulfillment') or {}).get('tracking')}."


class CloseTicket(GoalKind):
    name, weight = "close_ticket", 6

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        mine = [t for t in db.tickets.values() if t["user_id"] == user["user_id"] and t["status"] == "open"]
        unique = [t for t in mine if sum(u["subject"] == t["subject"] for u in mine) == 1]
        if not unique:
            return None
        ticket = rng.choice(unique)
        return Goal(self.name, {"subject": ticket["subject"]}, {"ticket_id": ticket["ticket_id"]})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return f"My support ticket about \"{said['subject']}\" is resolved, you can close it."

    def gold_calls(self, goal: Goal, user_id: str, store: Store) -> list[Call]:
        return [("close_ticket", {"ticket_id": goal.gold["ticket_id"]})]

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        tickets = json.loads(memory.call("list_user_tickets", user_id=user_id, status="open"))
        ticket = next((t for t in tickets if t["subject"] == goal.said["subject"]), None)
        if ticket is None:
            raise Failed(f"no open ticket about {goal.said['subject']!r}")
        memory.call("close_ticket", ticket_id=ticket["ticket_id"])
        return f"Ticket {ticket['ticket_id']} is closed."


class GiftBalance(GoalKind):
    name, weight = "gift_balance", 5

    def draw(self, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
        gift = _gift(user)
        return None if gift is None else Goal(self.name, {}, {"gift_card_id": gift["id"]})

    def words(self, said: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(("How much is left on my gift card?", "What's my gift card balance now?"))

    def answer(self, goal: Goal, user_id: str, store: Store) -> str | None:
        user = store.get("users", user_id)
        return None if user is None else f"{user['payment_methods'][goal.gold['gift_card_id']]['balance']:.2f}"

    def play(self, goal: Goal, memory: Memory, user_id: str) -> str:
        return f"Your gift card balance is ${gift_of(methods(memory, user_id, fresh=True))['balance']:.2f}."


GOAL_KINDS: dict[str, GoalKind] = {kind.name: kind for kind in (
    Cancel(), OrderAddress(), UserAddress(), Return(), Exchange(), Buy(), TopUp(), AddCard(), RemoveMethod(),
    OpenTicket(), CloseTicket(), OrderStatus(), Tracking(), GiftBalance(),
)}
