"""Toolshop tasks: customer goals drawn from a database, their gold outcome, and an expert that reaches it.

A task is a customer who says who they are (an email, or name and zip) and asks for one or two
things: cancel a pending order, ship it elsewhere, move house, return or exchange delivered items,
buy something (topping up a gift card when it falls short), top up, add or remove a card, open or
close a support ticket, or just ask (an order's status, a tracking number, a gift card's balance).

Task `i` of database `d` is the `i`-th distinct goal of a seeded stream of draws over that
database (`TaskBook`), so ids are stable and no two tasks of one database ask the same thing.
Each goal holds what the customer said (`said`, all the expert may use) and the ids behind it
(`gold`, for the checker). The gold outcome is the gold calls run on a fresh `Store`; a task is won
when the episode's changed records equal the gold ones and the reply contains every asked answer.

The expert works only from what the tools answered: every time it is asked it replays its plan
from the start over the episode's calls so far (`Memory`), issuing the first call whose answer it
does not have yet (find the user, read, then write), so it adapts to results and survives other
calls interleaved by an exploring policy. Answers are read again after the episode's last write.
"""

from __future__ import annotations

import functools
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any

import orjson

from worldsmith.envs.toolshop.db import KINDS, TICKET_SUBJECTS, BaseDB, Store, base_db, random_address
from worldsmith.envs.toolshop.tools import CANCEL_REASONS, is_error_text, run_tool
from worldsmith.traces.model import Action

__all__ = ["RESPOND", "Goal", "Memory", "Task", "TaskBook", "TaskSpec", "check", "expert_action", "resolve", "task_book"]

RESPOND = "respond"
KIND_WEIGHTS = {
    "cancel": 10, "order_address": 8, "user_address": 6, "return": 9, "exchange": 9, "buy": 10, "top_up": 7,
    "add_card": 6, "remove_method": 6, "open_ticket": 7, "close_ticket": 6, "order_status": 6, "tracking": 4,
    "gift_balance": 5,
}
# Second goals that cannot interfere with any first goal (no shared order line, method or ticket subject).
SECOND_KINDS = ("user_address", "add_card", "close_ticket", "open_ticket", "order_status", "tracking", "gift_balance")
_AFTER_BUY = ("user_address", "add_card", "close_ticket", "gift_balance")  # a new order could repeat a product
ANSWER_KINDS = frozenset({"order_status", "tracking", "gift_balance"})
SECOND_GOAL_RATE = 0.35
_REASON_WORDS = {"ordered by mistake": ("I ordered it by mistake", "it was a mistake to order it"),
                 "no longer needed": ("I don't need it anymore", "I no longer need it")}


@dataclass(frozen=True)
class Goal:
    kind: str
    said: dict[str, Any]  # what the customer said: all the expert may use
    gold: dict[str, Any] = field(default_factory=dict)  # the ids behind it, for the checker


@dataclass(frozen=True)
class TaskSpec:
    db: int
    user_id: str
    ident: dict[str, str]  # {"by": "email", "email": ...} or {"by": "name_zip", first_name, last_name, zip}
    goals: tuple[Goal, ...]
    text: str

    def signature(self) -> bytes:
        return orjson.dumps([self.user_id, self.ident, [[g.kind, g.said] for g in self.goals]],
                            option=orjson.OPT_SORT_KEYS)


@dataclass
class Task:
    """A task ready to play: its spec, the gold records (by kind and id) and the answers its reply must hold."""

    spec: TaskSpec
    gold: dict[str, dict[str, dict[str, Any]]]
    answers: list[str]
    gold_calls: list[tuple[str, dict[str, Any]]]


# --------------------------------------------------------------------------------------------
# Drawing goals
# --------------------------------------------------------------------------------------------


def _orders(db: BaseDB, user: dict[str, Any], status: str | None = None) -> list[dict[str, Any]]:
    found = [db.orders[o] for o in user["orders"]]
    return [o for o in found if status is None or o["status"] == status]


def _unique_product(rng: random.Random, orders: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """An order and one of its lines whose product is in no other of these orders."""
    counts: dict[str, int] = {}
    for order in orders:
        for name in {line["name"] for line in order["items"]}:
            counts[name] = counts.get(name, 0) + 1
    choices = [(o, line) for o in orders for line in o["items"] if counts[line["name"]] == 1]
    return rng.choice(choices) if choices else None


def _cards(user: dict[str, Any]) -> list[dict[str, Any]]:
    """The user's cards told apart by brand and last four digits."""
    cards = [m for m in user["payment_methods"].values() if m["kind"] == "card"]
    return [c for c in cards if sum(d["last4"] == c["last4"] for d in cards) == 1]


def _gift(user: dict[str, Any]) -> dict[str, Any] | None:
    return next((m for m in user["payment_methods"].values() if m["kind"] == "gift_card"), None)


def _said_address(rng: random.Random) -> dict[str, str]:
    address = random_address(rng)
    return {key: address[key] for key in ("line1", "line2", "city", "state", "zip")}


def _address_words(address: dict[str, str]) -> str:
    line2 = f", {address['line2']}" if address["line2"] else ""
    return f"{address['line1']}{line2}, {address['city']}, {address['state']} {address['zip']}"


def _draw_goal(kind: str, db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:  # noqa: C901 - one case per kind
    if kind in ("cancel", "order_address"):
        found = _unique_product(rng, _orders(db, user, "pending"))
        if found is None:
            return None
        order, line = found
        if kind == "cancel":
            return Goal(kind, {"product": line["name"], "reason": rng.choice(CANCEL_REASONS)},
                        {"order_id": order["order_id"]})
        return Goal(kind, {"product": line["name"], "address": _said_address(rng)}, {"order_id": order["order_id"]})
    if kind == "user_address":
        return Goal(kind, {"address": _said_address(rng)})
    if kind == "return":
        delivered = _orders(db, user, "delivered")
        found = _unique_product(rng, delivered)
        if found is None:
            return None
        order, line = found
        names = [line["name"]]
        others = [other["name"] for other in order["items"] if other["name"] != line["name"]]
        if others and rng.random() < 0.4:
            names.append(rng.choice(others))
        gift = _gift(user)
        refund = "gift card" if gift is not None and rng.random() < 0.5 else "original"
        return Goal(kind, {"products": names, "refund": refund}, {"order_id": order["order_id"]})
    if kind == "exchange":
        return _draw_exchange(db, user, rng)
    if kind == "buy":
        return _draw_buy(db, user, rng)
    if kind == "top_up":
        gift, cards = _gift(user), _cards(user)
        if gift is None or not cards:
            return None
        card = rng.choice(cards)
        return Goal(kind, {"amount": rng.choice((10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200)), "brand": card["brand"],
                           "last4": card["last4"]}, {"gift_card_id": gift["id"], "card_id": card["id"]})
    if kind == "add_card":
        on_file = {m.get("last4") for m in user["payment_methods"].values()}
        last4 = f"{rng.randint(0, 9999):04d}"
        if last4 in on_file:
            return None
        return Goal(kind, {"brand": rng.choice(("visa", "mastercard", "amex", "discover")), "last4": last4,
                           "expires": f"{rng.randint(1, 12):02d}/{rng.randint(27, 33)}"})
    if kind == "remove_method":
        if len(user["payment_methods"]) < 2:
            return None
        options = [{"method": "card", "brand": c["brand"], "last4": c["last4"], "id": c["id"]} for c in _cards(user)]
        options += [{"method": "paypal", "id": m["id"]} for m in user["payment_methods"].values() if m["kind"] == "paypal"]
        if not options:
            return None
        chosen = dict(rng.choice(options))
        method_id = chosen.pop("id")
        return Goal(kind, chosen, {"payment_method_id": method_id})
    if kind in ("open_ticket", "order_status", "tracking"):
        orders = _orders(db, user)
        if kind == "tracking":
            orders = [o for o in orders if "fulfillment" in o]
            if not orders:
                return None
            found = _unique_product(rng, orders)
            if found is not None and sum(found[1]["name"] in {i["name"] for i in o["items"]} for o in _orders(db, user)) > 1:
                found = None  # the product must name one order among all of them
        else:
            found = _unique_product(rng, orders)
        if found is None:
            return None
        order, line = found
        said: dict[str, Any] = {"product": line["name"]}
        if kind == "open_ticket":
            said["subject"] = rng.choice(TICKET_SUBJECTS)
        return Goal(kind, said, {"order_id": order["order_id"]})
    if kind == "close_ticket":
        open_tickets = [t for t in db.tickets.values() if t["user_id"] == user["user_id"] and t["status"] == "open"]
        unique = [t for t in open_tickets if sum(u["subject"] == t["subject"] for u in open_tickets) == 1]
        if not unique:
            return None
        ticket = rng.choice(unique)
        return Goal(kind, {"subject": ticket["subject"]}, {"ticket_id": ticket["ticket_id"]})
    if kind == "gift_balance":
        gift = _gift(user)
        return None if gift is None else Goal(kind, {}, {"gift_card_id": gift["id"]})
    raise ValueError(f"unknown goal kind {kind!r}")


def _draw_exchange(db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
    found = _unique_product(rng, _orders(db, user, "delivered"))
    if found is None:
        return None
    order, line = found
    product = db.products[line["product_id"]]
    changes = []
    for variant in product["variants"].values():
        differing = [k for k, v in variant["options"].items() if line["options"].get(k) != v]
        if variant["available"] and len(differing) == 1:
            changes.append((differing[0], variant))
    if not changes:
        return None
    option, variant = rng.choice(changes)
    difference = variant["price"] - line["price"]
    original = next(p["payment_method_id"] for p in order["payments"] if p["kind"] == "charge")
    gift = _gift(user)
    pay = "gift card" if gift is not None and rng.random() < 0.5 else "original"
    method = gift if pay == "gift card" else user["payment_methods"][original]
    if method is None or (method["kind"] == "gift_card" and difference > method["balance"]):
        return None
    return Goal("exchange", {"product": line["name"], "options": line["options"], "option": option,
                             "value": variant["options"][option], "pay": pay},
                {"order_id": order["order_id"], "item_id": line["item_id"], "new_item_id": variant["item_id"],
                 "payment_method_id": method["id"]})


def _draw_buy(db: BaseDB, user: dict[str, Any], rng: random.Random) -> Goal | None:
    product = db.products[rng.choice(list(db.products))]
    available = [v for v in product["variants"].values() if v["available"]]
    if not available:
        return None
    variant = rng.choice(available)
    gift, cards = _gift(user), _cards(user)
    paypal = next((m for m in user["payment_methods"].values() if m["kind"] == "paypal"), None)
    choices = [("card", card) for card in cards] + ([("paypal", paypal)] if paypal else [])
    if gift is not None and cards:
        choices += [("gift card", gift)] * 2
    if not choices:
        return None
    pay, method = rng.choice(choices)
    said: dict[str, Any] = {"product": product["name"], "options": variant["options"], "pay": pay}
    gold: dict[str, Any] = {"item_id": variant["item_id"], "payment_method_id": method["id"]}
    if pay == "card":
        said |= {"brand": method["brand"], "last4": method["last4"]}
    if pay == "gift card":
        card = rng.choice(cards)
        said |= {"top_up_brand": card["brand"], "top_up_last4": card["last4"]}
        gold["top_up_card_id"] = card["id"]
    return Goal("buy", said, gold)


# --------------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------------


def _options_words(options: dict[str, str]) -> str:
    return ", ".join(f"{key} {value}" for key, value in options.items())


def _goal_words(goal: Goal, rng: random.Random) -> str:  # noqa: C901 - one case per kind
    s = goal.said
    if goal.kind == "cancel":
        return rng.choice(("Please cancel my pending order with the {p}, because {r}.",
                           "I want to cancel the pending order that has a {p} in it: {r}.")).format(
            p=s["product"], r=rng.choice(_REASON_WORDS[s["reason"]]))
    if goal.kind == "order_address":
        return rng.choice(("My pending order with the {p} should be shipped to {a} instead.",
                           "Could you change the shipping address of my pending {p} order to {a}?")).format(
            p=s["product"], a=_address_words(s["address"]))
    if goal.kind == "user_address":
        return rng.choice(("I moved: please make {a} my default address.",
                           "Please update my default address to {a}.")).format(a=_address_words(s["address"]))
    if goal.kind == "return":
        what = " and the ".join(s["products"])
        where = "my gift card" if s["refund"] == "gift card" else "the original payment method"
        return f"I'd like to return the {what} from my delivered order, refunded to {where}."
    if goal.kind == "exchange":
        pay = "my gift card" if s["pay"] == "gift card" else "the original payment method"
        return (f"The {s['product']} I received ({_options_words(s['options'])}) is not right: please exchange it "
                f"for the one with {s['option']} {s['value']}, settling any price difference with {pay}.")
    if goal.kind == "buy":
        wanted = f"I'd like to buy the {s['product']} ({_options_words(s['options'])})."
        if s["pay"] == "card":
            return f"{wanted} Charge my {s['brand']} card ending in {s['last4']}."
        if s["pay"] == "paypal":
            return f"{wanted} I'll pay with PayPal."
        return (f"{wanted} Pay with my gift card; if its balance is short, first top it up from my {s['top_up_brand']} "
                f"card ending in {s['top_up_last4']} by the missing amount rounded up to whole dollars.")
    if goal.kind == "top_up":
        return f"Please add ${s['amount']} to my gift card, paid with my {s['brand']} card ending in {s['last4']}."
    if goal.kind == "add_card":
        return f"Please add my new {s['brand']} card ending in {s['last4']} (expires {s['expires']}) to my account."
    if goal.kind == "remove_method":
        if s["method"] == "paypal":
            return "Please remove PayPal from my payment methods."
        return f"Please remove my {s['brand']} card ending in {s['last4']} from my account."
    if goal.kind == "open_ticket":
        return f"Please open a support ticket about my order with the {s['product']}: \"{s['subject']}\"."
    if goal.kind == "close_ticket":
        return f"My support ticket about \"{s['subject']}\" is resolved, you can close it."
    if goal.kind == "order_status":
        return rng.choice(("What is the status of my order with the {p}?", "Where is my {p} order at?")).format(
            p=s["product"])
    if goal.kind == "tracking":
        return f"What is the tracking number of my order with the {s['product']}?"
    if goal.kind == "gift_balance":
        return rng.choice(("How much is left on my gift card?", "What's my gift card balance now?"))
    raise ValueError(goal.kind)


def _intro(user: dict[str, Any], ident: dict[str, str], rng: random.Random) -> str:
    if ident["by"] == "email":
        return rng.choice(("Hi, my email is {e}.", "Hello! This is {f}, email {e}.")).format(
            e=ident["email"], f=user["name"]["first"])
    return rng.choice(("Hi, I'm {f} {l}, zip code {z}.", "Hello, {f} {l} here (zip {z}).")).format(
        f=ident["first_name"], l=ident["last_name"], z=ident["zip"])


def draw(db: BaseDB, number: int) -> TaskSpec | None:
    """The `number`-th draw of the database's task stream (None when the drawn user cannot do the drawn goal)."""
    rng = random.Random(f"toolshop-task|{db.seed}|{number}")
    user = db.users[rng.choice(list(db.users))]
    kinds = list(KIND_WEIGHTS)
    first = _draw_goal(rng.choices(kinds, weights=[KIND_WEIGHTS[k] for k in kinds])[0], db, user, rng)
    if first is None:
        return None
    goals = [first]
    if rng.random() < SECOND_GOAL_RATE:
        options = [k for k in (_AFTER_BUY if first.kind == "buy" else SECOND_KINDS) if k != first.kind
                   and {k, first.kind} != {"open_ticket", "close_ticket"}]
        second = _draw_goal(rng.choice(options), db, user, rng)
        if second is not None:
            goals.append(second)
    if rng.random() < 0.6:
        ident = {"by": "email", "email": user["email"]}
    else:
        ident = {"by": "name_zip", "first_name": user["name"]["first"], "last_name": user["name"]["last"],
                 "zip": user["address"]["zip"]}
    words = [_goal_words(goal, rng) for goal in goals]
    if len(words) == 2:
        words[1] = rng.choice(("Also: ", "And one more thing. ", "")) + words[1]
    text = " ".join([_intro(user, ident, rng), *words])
    return TaskSpec(db.seed, user["user_id"], ident, tuple(goals), text)


class TaskBook:
    """The distinct tasks of one database, drawn lazily in order (task `i` never changes)."""

    def __init__(self, db: BaseDB) -> None:
        self.db = db
        self._draws: list[int] = []  # the draw number of each task
        self._seen: set[bytes] = set()
        self._next = 0

    def spec(self, index: int) -> TaskSpec:
        while len(self._draws) <= index:
            number, self._next = self._next, self._next + 1
            drawn = draw(self.db, number)
            if drawn is not None and drawn.signature() not in self._seen:
                self._seen.add(drawn.signature())
                self._draws.append(number)
        found = draw(self.db, self._draws[index])
        assert found is not None
        return found


@functools.cache
def task_book(db: int) -> TaskBook:
    return TaskBook(base_db(db))


# --------------------------------------------------------------------------------------------
# Gold outcome
# --------------------------------------------------------------------------------------------


def _gold_calls(goal: Goal, user_id: str, store: Store) -> list[tuple[str, dict[str, Any]]]:  # noqa: C901
    s, g = goal.said, goal.gold
    if goal.kind == "cancel":
        return [("cancel_order", {"order_id": g["order_id"], "reason": s["reason"]})]
    if goal.kind == "order_address":
        return [("modify_order_address", {"order_id": g["order_id"], **s["address"]})]
    if goal.kind == "user_address":
        return [("modify_user_address", {"user_id": user_id, **s["address"]})]
    if goal.kind == "return":
        order = store.get("orders", g["order_id"])
        assert order is not None
        items = [next(line["item_id"] for line in order["items"] if line["name"] == name) for name in s["products"]]
        method = _refund_method(order, store, s["refund"])
        return [("return_order_items", {"order_id": g["order_id"], "item_ids": items, "payment_method_id": method})]
    if goal.kind == "exchange":
        return [("exchange_order_items", {"order_id": g["order_id"], "item_ids": [g["item_id"]],
                                          "new_item_ids": [g["new_item_id"]],
                                          "payment_method_id": g["payment_method_id"]})]
    if goal.kind == "buy":
        calls: list[tuple[str, dict[str, Any]]] = []
        if s["pay"] == "gift card":
            user = store.get("users", user_id)
            assert user is not None
            price = store.base.products[store.base.items[g["item_id"]]]["variants"][g["item_id"]]["price"]
            short = price - user["payment_methods"][g["payment_method_id"]]["balance"]
            if short > 0:
                calls.append(("top_up_gift_card", {"user_id": user_id, "gift_card_id": g["payment_method_id"],
                                                   "amount": math.ceil(round(short, 2)),
                                                   "source_payment_method_id": g["top_up_card_id"]}))
        calls.append(("place_order", {"user_id": user_id, "item_ids": [g["item_id"]],
                                      "payment_method_id": g["payment_method_id"]}))
        return calls
    if goal.kind == "top_up":
        return [("top_up_gift_card", {"user_id": user_id, "gift_card_id": g["gift_card_id"], "amount": s["amount"],
                                      "source_payment_method_id": g["card_id"]})]
    if goal.kind == "add_card":
        return [("add_card", {"user_id": user_id, **s})]
    if goal.kind == "remove_method":
        return [("remove_payment_method", {"user_id": user_id, "payment_method_id": g["payment_method_id"]})]
    if goal.kind == "open_ticket":
        return [("open_ticket", {"user_id": user_id, "subject": s["subject"], "order_id": g["order_id"]})]
    if goal.kind == "close_ticket":
        return [("close_ticket", {"ticket_id": g["ticket_id"]})]
    return []  # questions change nothing


def _refund_method(order: dict[str, Any], store: Store, refund: str) -> str:
    if refund == "original":
        return next(p["payment_method_id"] for p in order["payments"] if p["kind"] == "charge")
    user = store.get("users", order["user_id"])
    assert user is not None
    gift = _gift(user)
    assert gift is not None
    return str(gift["id"])


def _answer(goal: Goal, user_id: str, store: Store) -> str | None:
    if goal.kind == "order_status":
        order = store.get("orders", goal.gold["order_id"])
        return None if order is None else str(order["status"])
    if goal.kind == "tracking":
        order = store.get("orders", goal.gold["order_id"])
        return None if order is None else str(order["fulfillment"]["tracking"])
    if goal.kind == "gift_balance":
        user = store.get("users", user_id)
        return None if user is None else f"{user['payment_methods'][goal.gold['gift_card_id']]['balance']:.2f}"
    return None


def resolve(spec: TaskSpec) -> Task:
    """Run the gold calls of `spec` on a fresh store: the records they change and the answers asked for."""
    store = Store(base_db(spec.db))
    calls: list[tuple[str, dict[str, Any]]] = []
    for goal in spec.goals:
        for name, arguments in _gold_calls(goal, spec.user_id, store):
            text = run_tool(store, name, arguments)
            if is_error_text(text):
                raise AssertionError(f"gold call {name}({arguments}) failed on db {spec.db}: {text}")
            calls.append((name, arguments))
    answers = [answer for goal in spec.goals if (answer := _answer(goal, spec.user_id, store)) is not None]
    return Task(spec, store.snapshot(), answers, calls)


def check(task: Task, store: Store, reply: str) -> dict[str, Any]:
    """Whether the episode reached the gold outcome: the same changed records, every answer in the reply."""
    wrong: list[str] = []
    for kind in KINDS:
        keys = set(task.gold.get(kind, {})) | set(store.changed[kind])
        for key in sorted(keys):
            expected = task.gold.get(kind, {}).get(key) or store.base.table(kind).get(key)
            if store.get(kind, key) != expected:
                wrong.append(f"{kind}/{key}")
    missing = [answer for answer in task.answers if answer not in reply]
    return {"won": not wrong and not missing, "wrong_records": wrong, "missing_answers": missing}


# --------------------------------------------------------------------------------------------
# The expert
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One call of the episode and its answer."""

    name: str
    arguments: dict[str, Any]
    text: str
    error: bool
    write: bool


class _Need(Exception):
    """The plan needs this call's answer next."""

    def __init__(self, action: Action) -> None:
        super().__init__(action.name)
        self.action = action


class _Failed(Exception):
    """A call the plan needs answered with an error: the goal cannot be done."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _key(name: str, arguments: dict[str, Any]) -> bytes:
    return name.encode() + orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)


class Memory:
    """The episode's calls as the expert consults them."""

    def __init__(self, calls: list[Seen]) -> None:
        self.calls = calls
        last_write = max((i for i, c in enumerate(calls) if c.write and not c.error), default=-1)
        self._first: dict[bytes, Seen] = {}
        self._fresh: dict[bytes, Seen] = {}
        for position, call in enumerate(calls):
            key = _key(call.name, call.arguments)
            self._first.setdefault(key, call)
            if position > last_write:
                self._fresh.setdefault(key, call)
        self.notes: list[str] = []

    def read(self, name: str, fresh: bool = False, **arguments: Any) -> str:
        """The answer of this read (the first one; with `fresh`, one after the last write); else it is needed."""
        seen = (self._fresh if fresh else self._first).get(_key(name, arguments))
        if seen is None:
            raise _Need(Action(name=name, arguments=arguments))
        if seen.error:
            raise _Failed(seen.text)
        return seen.text

    def write(self, name: str, **arguments: Any) -> str:
        """Make this write once; its answer (an error ends the goal)."""
        seen = self._first.get(_key(name, arguments))
        if seen is None:
            raise _Need(Action(name=name, arguments=arguments))
        if seen.error:
            raise _Failed(seen.text)
        return seen.text


def _user_id(memory: Memory, ident: dict[str, str]) -> str:
    if ident["by"] == "email":
        user_id = memory.read("find_user_id_by_email", email=ident["email"])
    else:
        user_id = memory.read("find_user_id_by_name_zip", first_name=ident["first_name"],
                              last_name=ident["last_name"], zip=ident["zip"])
    memory.read("get_user", user_id=user_id)
    return user_id


def _order_with(memory: Memory, order_ids: list[str], names: list[str]) -> dict[str, Any]:
    """The first of these orders holding every named product, reading them one by one."""
    for order_id in order_ids:
        order = json.loads(memory.read("get_order", order_id=order_id))
        if set(names) <= {line["name"] for line in order["items"]}:
            return dict(order)
    raise _Failed(f"no order with {', '.join(names)}")


def _methods(memory: Memory, user_id: str) -> list[dict[str, Any]]:
    return list(json.loads(memory.read("get_user_payment_methods", user_id=user_id)))


def _card_id(methods: list[dict[str, Any]], brand: str, last4: str) -> str:
    for method in methods:
        if method["kind"] == "card" and method["brand"] == brand and method["last4"] == last4:
            return str(method["id"])
    raise _Failed(f"no {brand} card ending in {last4}")


def _paypal_id(methods: list[dict[str, Any]]) -> str:
    method = next((m["id"] for m in methods if m["kind"] == "paypal"), None)
    if method is None:
        raise _Failed("no PayPal account on file")
    return str(method)


def _gift_of(methods: list[dict[str, Any]]) -> dict[str, Any]:
    gift = next((m for m in methods if m["kind"] == "gift_card"), None)
    if gift is None:
        raise _Failed("no gift card")
    return gift


def _search(memory: Memory, user_id: str, status: str | None) -> list[str]:
    if status is None:
        return list(json.loads(memory.read("get_user", user_id=user_id))["orders"])
    return list(json.loads(memory.read("search_orders", user_id=user_id, status=status)))


def _play_goal(goal: Goal, memory: Memory, user_id: str) -> str:  # noqa: C901 - one case per kind
    """Run the goal's plan; returns what to tell the customer about it."""
    s = goal.said
    if goal.kind in ("cancel", "order_address"):
        order = _order_with(memory, _search(memory, user_id, "pending"), [s["product"]])
        if goal.kind == "cancel":
            memory.write("cancel_order", order_id=order["order_id"], reason=s["reason"])
            return f"Your order {order['order_id']} is cancelled; the refund is on its way."
        memory.write("modify_order_address", order_id=order["order_id"], **s["address"])
        return f"Order {order['order_id']} will now ship to {_address_words(s['address'])}."
    if goal.kind == "user_address":
        memory.write("modify_user_address", user_id=user_id, **s["address"])
        return "Your default address is updated."
    if goal.kind == "return":
        order = _order_with(memory, _search(memory, user_id, "delivered"), s["products"])
        items = [next(line["item_id"] for line in order["items"] if line["name"] == name) for name in s["products"]]
        if s["refund"] == "original":
            method = next(p["payment_method_id"] for p in order["payments"] if p["kind"] == "charge")
        else:
            method = _gift_of(_methods(memory, user_id))["id"]
        memory.write("return_order_items", order_id=order["order_id"], item_ids=items, payment_method_id=method)
        return f"The return for order {order['order_id']} is requested; the refund goes to {method}."
    if goal.kind == "exchange":
        order = _order_with(memory, _search(memory, user_id, "delivered"), [s["product"]])
        line = next(line for line in order["items"] if line["name"] == s["product"])
        product = json.loads(memory.read("get_product", product_id=line["product_id"]))
        wanted = {**line["options"], s["option"]: s["value"]}
        new = next((v for v in product["variants"].values() if v["options"] == wanted and v["available"]), None)
        if new is None:
            raise _Failed(f"no {s['option']} {s['value']} variant in stock")
        if s["pay"] == "original":
            method = next(p["payment_method_id"] for p in order["payments"] if p["kind"] == "charge")
        else:
            method = _gift_of(_methods(memory, user_id))["id"]
        memory.write("exchange_order_items", order_id=order["order_id"], item_ids=[line["item_id"]],
                     new_item_ids=[new["item_id"]], payment_method_id=method)
        return f"The exchange for order {order['order_id']} is requested."
    if goal.kind == "buy":
        return _play_buy(goal, memory, user_id)
    if goal.kind == "top_up":
        methods = _methods(memory, user_id)
        text = memory.write("top_up_gift_card", user_id=user_id, gift_card_id=_gift_of(methods)["id"],
                            amount=s["amount"], source_payment_method_id=_card_id(methods, s["brand"], s["last4"]))
        return f"Your gift card now holds ${json.loads(text)['balance']:.2f}."
    if goal.kind == "add_card":
        memory.write("add_card", user_id=user_id, brand=s["brand"], last4=s["last4"], expires=s["expires"])
        return f"Your {s['brand']} card ending in {s['last4']} is added."
    if goal.kind == "remove_method":
        methods = _methods(memory, user_id)
        method = _paypal_id(methods) if s["method"] == "paypal" else _card_id(methods, s["brand"], s["last4"])
        memory.write("remove_payment_method", user_id=user_id, payment_method_id=method)
        return "That payment method is removed."
    if goal.kind == "open_ticket":
        order = _order_with(memory, _search(memory, user_id, None), [s["product"]])
        ticket = json.loads(memory.write("open_ticket", user_id=user_id, subject=s["subject"],
                                         order_id=order["order_id"]))
        return f"I opened ticket {ticket['ticket_id']} about order {order['order_id']}."
    if goal.kind == "close_ticket":
        tickets = json.loads(memory.read("list_user_tickets", user_id=user_id, status="open"))
        ticket = next((t for t in tickets if t["subject"] == s["subject"]), None)
        if ticket is None:
            raise _Failed(f"no open ticket about {s['subject']!r}")
        memory.write("close_ticket", ticket_id=ticket["ticket_id"])
        return f"Ticket {ticket['ticket_id']} is closed."
    if goal.kind in ("order_status", "tracking"):
        order = _order_with(memory, _search(memory, user_id, None), [s["product"]])
        if goal.kind == "order_status":
            status = json.loads(memory.read("get_order_status", fresh=True, order_id=order["order_id"]))["status"]
            return f"Your order {order['order_id']} is {status}."
        fresh = json.loads(memory.read("get_order", fresh=True, order_id=order["order_id"]))
        tracking = (fresh.get("fulfillment") or {}).get("tracking")
        return f"The tracking number of order {order['order_id']} is {tracking}."
    if goal.kind == "gift_balance":
        balance = _gift_of(json.loads(memory.read("get_user_payment_methods", fresh=True, user_id=user_id)))["balance"]
        return f"Your gift card balance is ${balance:.2f}."
    raise ValueError(goal.kind)


def _play_buy(goal: Goal, memory: Memory, user_id: str) -> str:
    s = goal.said
    found = json.loads(memory.read("search_products", query=s["product"]))
    product_id = next((p["product_id"] for p in found if p["name"] == s["product"]), None)
    if product_id is None:
        raise _Failed(f"no product named {s['product']}")
    product = json.loads(memory.read("get_product", product_id=product_id))
    variant = next((v for v in product["variants"].values() if v["options"] == s["options"]), None)
    if variant is None or not variant["available"]:
        raise _Failed(f"the {s['product']} ({_options_words(s['options'])}) is not in stock")
    methods = _methods(memory, user_id)
    if s["pay"] == "card":
        method = _card_id(methods, s["brand"], s["last4"])
    elif s["pay"] == "paypal":
        method = _paypal_id(methods)
    else:
        gift = _gift_of(methods)
        method = gift["id"]
        short = variant["price"] - gift["balance"]
        if short > 0:
            memory.write("top_up_gift_card", user_id=user_id, gift_card_id=method, amount=math.ceil(round(short, 2)),
                         source_payment_method_id=_card_id(methods, s["top_up_brand"], s["top_up_last4"]))
    order = json.loads(memory.write("place_order", user_id=user_id, item_ids=[variant["item_id"]],
                                    payment_method_id=method))
    return f"Your order {order['order_id']} is placed (${variant['price']:.2f})."


def expert_action(spec: TaskSpec, calls: list[Seen]) -> Action:
    """The expert's next call for `spec` given the episode's calls so far; `respond` once every goal is played."""
    memory = Memory(calls)
    lines = []
    try:
        user_id = _user_id(memory, spec.ident)
    except _Need as need:
        return need.action
    except _Failed as failed:
        return Action(name=RESPOND, arguments={"text": f"Sorry, I could not find your account ({failed.text})."})
    for goal in spec.goals:
        try:
            lines.append(_play_goal(goal, memory, user_id))
        except _Need as need:
            return need.action
        except _Failed as failed:
            lines.append(f"Sorry, I could not do that: {failed.text}.")
    return Action(name=RESPOND, arguments={"text": " ".join(lines)})
