"""The toolshop's backing store: a database generated from a seed, and per-episode copy-on-write views.

One seed gives one database (users, orders, products, support tickets), the same for every task
of that seed, like a real service's store that many conversations touch. Records are plain JSON
dicts. An episode never changes the shared database: `Store` reads through to it and copies a
record the first time a tool changes it, so a reset costs nothing and the changed records are
exactly what the episode did.

Shapes (ids differ in style per kind on purpose: learners should not assume one):
- user `cu_<6 hex>`: name {first, last}, email, phone, address {line1, line2, city, state, zip,
  country}, payment_methods {id: method}, orders [order ids], member_since;
  a method is a card (`pm_card_<n>`, brand, last4, expires), a gift card (`pm_gift_<n>`, balance)
  or PayPal (`pm_paypal_<n>`, account email);
- order `#O<5 digits>`: user_id, status (pending, processed, shipped, delivered, cancelled,
  return requested, exchange requested), items [{item_id, product_id, name, options, price}],
  shipping_address, placed_on, payments [{kind: charge | refund, payment_method_id, amount}],
  fulfillment {carrier, tracking} once shipped, and what a cancel/return/exchange recorded;
- product `P-<4 digits>`: name, category, variants {item_id: {item_id, options, price, available}};
  item ids are 8-digit strings;
- ticket `TCK-<4 digits>`: user_id, order_id (or null), subject, status (open, closed), opened_on,
  messages [text].
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

__all__ = ["KINDS", "BaseDB", "Kind", "Store", "base_db", "random_address"]

Kind = Literal["users", "orders", "products", "tickets"]
KINDS: tuple[Kind, ...] = ("users", "orders", "products", "tickets")

USERS = 300
ORDER_STATUSES = ("pending", "processed", "shipped", "delivered", "cancelled", "return requested")
_STATUS_WEIGHTS = (30, 12, 10, 32, 11, 5)

FIRST_NAMES = (
    "Ava", "Liam", "Mia", "Noor", "Kenji", "Sofia", "Mateo", "Aisha", "Lucas", "Priya", "Omar", "Elena", "Yuki",
    "Daniel", "Fatima", "Hugo", "Ingrid", "Jamal", "Keira", "Leon", "Maya", "Nikolai", "Olivia", "Pablo", "Quinn",
    "Rosa", "Samir", "Tara", "Uma", "Victor", "Wen", "Ximena", "Yusuf", "Zoe", "Amara", "Bruno", "Chloe", "Dmitri",
    "Esme", "Farid", "Greta", "Hana", "Ivan", "Julia", "Kofi", "Lena", "Marco", "Nadia", "Oscar", "Paula",
)
LAST_NAMES = (
    "Okafor", "Lindqvist", "Moreau", "Tanaka", "Haddad", "Novak", "Garcia", "Schmidt", "Kowalski", "Rossi",
    "Nguyen", "Patel", "Ivanova", "Dubois", "Silva", "Kim", "Jensen", "Costa", "Murphy", "Ortiz", "Fischer",
    "Sato", "Mensah", "Larsen", "Bauer", "Reyes", "Chen", "Fernandes", "Walsh", "Petrov", "Abbott", "Brennan",
    "Castillo", "Delgado", "Eriksen", "Fontaine", "Gallo", "Horvat", "Ito", "Jovanovic",
)
# (city, state, first three zip digits)
CITIES = (
    ("Portland", "OR", "972"), ("Austin", "TX", "787"), ("Denver", "CO", "802"), ("Madison", "WI", "537"),
    ("Raleigh", "NC", "276"), ("Tucson", "AZ", "857"), ("Boise", "ID", "837"), ("Albany", "NY", "122"),
    ("Savannah", "GA", "314"), ("Omaha", "NE", "681"), ("Spokane", "WA", "992"), ("Dayton", "OH", "454"),
    ("Reno", "NV", "895"), ("Fresno", "CA", "937"), ("Burlington", "VT", "054"), ("Tulsa", "OK", "741"),
    ("Provo", "UT", "846"), ("Mobile", "AL", "366"), ("Lansing", "MI", "489"), ("Wichita", "KS", "672"),
)
STREETS = ("Maple", "Cedar", "Harbor", "Willow", "Summit", "Birch", "Lakeview", "Orchard", "Mill", "Ridge",
           "Juniper", "Elm", "Granite", "Sunset", "Prairie", "Meadow", "Aspen", "Canal", "Hawthorn", "Quarry")
STREET_KINDS = ("St", "Ave", "Rd", "Ln", "Blvd", "Way", "Ct", "Dr")
DOMAINS = ("example.com", "mailbox.test", "inbox.example", "post.example.org")
CARD_BRANDS = ("visa", "mastercard", "amex", "discover")
CARRIERS = ("UPS", "FedEx", "USPS", "DHL")
TICKET_SUBJECTS = (
    "damaged on arrival", "missing parts", "late delivery", "wrong size received", "wrong color received",
    "refund not received", "package left at wrong door", "question about warranty", "billing discrepancy",
    "item stopped working",
)

# name, category, base price, {option: values}
PRODUCTS: tuple[tuple[str, str, float, dict[str, tuple[str, ...]]], ...] = (
    ("Desk Lamp", "home", 39.0, {"color": ("black", "white", "brass"), "bulb": ("LED", "halogen")}),
    ("Running Shoes", "sports", 89.0, {"size": ("7", "8", "9", "10", "11"), "color": ("red", "navy", "grey")}),
    ("Water Bottle", "outdoor", 19.0, {"capacity": ("500ml", "750ml", "1l"), "material": ("steel", "plastic")}),
    ("Backpack", "outdoor", 64.0, {"volume": ("20l", "30l"), "color": ("green", "black", "orange")}),
    ("Mechanical Keyboard", "electronics", 119.0, {"switch": ("red", "brown", "blue"), "layout": ("ANSI", "ISO")}),
    ("Headphones", "electronics", 149.0, {"fit": ("over-ear", "in-ear"), "wireless": ("yes", "no")}),
    ("Coffee Maker", "kitchen", 79.0, {"capacity": ("4 cups", "8 cups", "12 cups"), "color": ("black", "steel")}),
    ("Yoga Mat", "sports", 29.0, {"thickness": ("4mm", "6mm", "8mm"), "color": ("purple", "teal", "black")}),
    ("T-Shirt", "clothing", 18.0, {"size": ("S", "M", "L", "XL"), "color": ("white", "black", "olive")}),
    ("Tent", "outdoor", 199.0, {"capacity": ("2-person", "4-person"), "season": ("3-season", "4-season")}),
    ("Office Chair", "home", 229.0, {"color": ("black", "grey"), "armrests": ("fixed", "adjustable")}),
    ("Smart Watch", "electronics", 249.0, {"case": ("40mm", "44mm"), "strap": ("silicone", "leather", "metal")}),
    ("Bluetooth Speaker", "electronics", 59.0, {"color": ("blue", "black", "red"), "waterproof": ("yes", "no")}),
    ("Blender", "kitchen", 99.0, {"power": ("600W", "1000W"), "jar": ("glass", "plastic")}),
    ("Electric Kettle", "kitchen", 45.0, {"capacity": ("1l", "1.7l"), "finish": ("steel", "white", "black")}),
    ("Sunglasses", "clothing", 75.0, {"frame": ("round", "square", "aviator"), "lens": ("polarized", "tinted")}),
    ("Wall Clock", "home", 34.0, {"diameter": ("25cm", "35cm"), "style": ("modern", "classic")}),
    ("Notebook", "office", 9.0, {"ruling": ("lined", "dotted", "blank"), "size": ("A5", "A4")}),
    ("Camping Stove", "outdoor", 69.0, {"fuel": ("gas", "multi-fuel"), "burners": ("1", "2")}),
    ("Bicycle Helmet", "sports", 55.0, {"size": ("S", "M", "L"), "color": ("white", "black", "yellow")}),
    ("Hiking Boots", "clothing", 139.0, {"size": ("7", "8", "9", "10", "11", "12"), "waterproof": ("yes", "no")}),
    ("Umbrella", "clothing", 24.0, {"size": ("compact", "full"), "color": ("black", "red", "clear")}),
    ("Frying Pan", "kitchen", 42.0, {"diameter": ("24cm", "28cm"), "coating": ("ceramic", "cast iron", "steel")}),
    ("Monitor", "electronics", 279.0, {"size": ("24in", "27in", "32in"), "resolution": ("1440p", "4K")}),
    ("Wireless Mouse", "electronics", 29.0, {"color": ("black", "white"), "grip": ("standard", "vertical")}),
    ("Air Purifier", "home", 159.0, {"room": ("small", "large"), "filter": ("HEPA", "carbon")}),
    ("Rain Jacket", "clothing", 95.0, {"size": ("S", "M", "L", "XL"), "color": ("yellow", "navy", "green")}),
    ("Suitcase", "travel", 129.0, {"size": ("carry-on", "checked"), "shell": ("hard", "soft")}),
    ("Phone Case", "electronics", 15.0, {"model": ("A", "B", "C"), "color": ("clear", "black", "pink")}),
    ("Cutting Board", "kitchen", 27.0, {"material": ("bamboo", "walnut", "plastic"), "size": ("medium", "large")}),
    ("Scented Candle", "home", 16.0, {"scent": ("cedar", "lavender", "citrus"), "size": ("small", "large")}),
    ("Board Game", "toys", 35.0, {"edition": ("standard", "deluxe")}),
    ("Plant Pot", "home", 22.0, {"diameter": ("15cm", "25cm", "35cm"), "color": ("terracotta", "white")}),
    ("Travel Pillow", "travel", 21.0, {"filling": ("memory foam", "inflatable"), "color": ("grey", "blue")}),
    ("Desk Organizer", "office", 26.0, {"material": ("wood", "metal"), "compartments": ("3", "5")}),
    ("Sleeping Bag", "outdoor", 110.0, {"rating": ("0C", "-10C"), "shape": ("mummy", "rectangular")}),
)


@dataclass(frozen=True)
class BaseDB:
    """The database of one seed (shared and never changed) with the indexes its queries need."""

    seed: int
    users: dict[str, dict[str, Any]]
    orders: dict[str, dict[str, Any]]
    products: dict[str, dict[str, Any]]
    tickets: dict[str, dict[str, Any]]
    items: dict[str, str] = field(default_factory=dict)  # item id -> product id
    by_email: dict[str, str] = field(default_factory=dict)
    by_name_zip: dict[tuple[str, str, str], str] = field(default_factory=dict)  # lower first, lower last, zip

    @functools.cached_property
    def user_ids(self) -> tuple[str, ...]:
        return tuple(self.users)

    @functools.cached_property
    def product_ids(self) -> tuple[str, ...]:
        return tuple(self.products)

    def table(self, kind: Kind) -> dict[str, dict[str, Any]]:
        return getattr(self, kind)


def random_address(rng: random.Random, line2: bool | None = None) -> dict[str, str]:
    city, state, prefix = rng.choice(CITIES)
    with_line2 = rng.random() < 0.3 if line2 is None else line2
    return {
        "line1": f"{rng.randint(1, 9999)} {rng.choice(STREETS)} {rng.choice(STREET_KINDS)}",
        "line2": f"Apt {rng.randint(1, 40)}{rng.choice('ABCD')}" if with_line2 else "",
        "city": city, "state": state, "zip": f"{prefix}{rng.randint(0, 99):02d}", "country": "USA",
    }


def _day(rng: random.Random, year: int) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _products(rng: random.Random) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    products: dict[str, dict[str, Any]] = {}
    items: dict[str, str] = {}
    product_numbers = rng.sample(range(1000, 10000), len(PRODUCTS))
    for number, (name, category, base, options) in zip(product_numbers, PRODUCTS, strict=True):
        product_id = f"P-{number}"
        variants: dict[str, dict[str, Any]] = {}
        for values in itertools.product(*options.values()):
            if len(variants) >= 2 and rng.random() < 0.15:
                continue  # not every combination is sold
            item_id = str(rng.randint(10_000_000, 99_999_999))
            while item_id in items:
                item_id = str(rng.randint(10_000_000, 99_999_999))
            variants[item_id] = {
                "item_id": item_id,
                "options": dict(zip(options, values, strict=True)),
                "price": round(base * rng.uniform(0.85, 1.3), 2),
                "available": rng.random() < 0.8,
            }
            items[item_id] = product_id
        products[product_id] = {"product_id": product_id, "name": name, "category": category, "variants": variants}
    return products, items


def _payment_methods(rng: random.Random, email: str, numbers: itertools.count) -> dict[str, dict[str, Any]]:
    methods: dict[str, dict[str, Any]] = {}
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
        number = next(numbers)
        methods[f"pm_card_{number}"] = {
            "id": f"pm_card_{number}", "kind": "card", "brand": rng.choice(CARD_BRANDS),
            "last4": f"{rng.randint(0, 9999):04d}", "expires": f"{rng.randint(1, 12):02d}/{rng.randint(27, 31)}",
        }
    if rng.random() < 0.55:
        number = next(numbers)
        methods[f"pm_gift_{number}"] = {"id": f"pm_gift_{number}", "kind": "gift_card",
                                        "balance": float(rng.choice((0, 10, 25, 40, 60, 100, 150, 250)) + rng.randint(0, 99) / 100)}
    if rng.random() < 0.3:
        number = next(numbers)
        methods[f"pm_paypal_{number}"] = {"id": f"pm_paypal_{number}", "kind": "paypal", "account": email}
    return methods


def _order(rng: random.Random, order_id: str, user: dict[str, Any], products: dict[str, dict[str, Any]]) -> dict[str, Any]:
    lines = []
    for product in rng.sample(list(products.values()), rng.choice((1, 1, 2, 2, 3, 4))):
        variant = rng.choice(list(product["variants"].values()))
        lines.append({"item_id": variant["item_id"], "product_id": product["product_id"], "name": product["name"],
                      "options": dict(variant["options"]), "price": variant["price"]})
    status = rng.choices(ORDER_STATUSES, weights=_STATUS_WEIGHTS)[0]
    method = rng.choice(list(user["payment_methods"]))
    total = round(sum(line["price"] for line in lines), 2)
    order: dict[str, Any] = {
        "order_id": order_id, "user_id": user["user_id"], "status": status, "items": lines,
        "shipping_address": dict(user["address"]) if rng.random() < 0.85 else random_address(rng),
        "placed_on": _day(rng, 2026), "payments": [{"kind": "charge", "payment_method_id": method, "amount": total}],
    }
    if status in ("shipped", "delivered", "return requested"):
        order["fulfillment"] = {"carrier": rng.choice(CARRIERS), "tracking": str(rng.randint(10**11, 10**12 - 1))}
    if status == "cancelled":
        order["cancel_reason"] = rng.choice(("no longer needed", "ordered by mistake"))
        order["payments"].append({"kind": "refund", "payment_method_id": method, "amount": total})
    if status == "return requested":
        returned = lines[: rng.randint(1, len(lines))]
        amount = round(sum(line["price"] for line in returned), 2)
        order["return"] = {"item_ids": [line["item_id"] for line in returned], "refund_method_id": method}
        order["payments"].append({"kind": "refund", "payment_method_id": method, "amount": amount})
    return order


@functools.cache
def base_db(seed: int) -> BaseDB:
    """The database of `seed` (built once per process; callers must not change it: use a `Store`)."""
    rng = random.Random(f"toolshop-db|{seed}")
    products, items = _products(rng)
    users: dict[str, dict[str, Any]] = {}
    by_email: dict[str, str] = {}
    by_name_zip: dict[tuple[str, str, str], str] = {}
    numbers = itertools.count(rng.randint(1000, 5000))
    while len(users) < USERS:
        first, last, address = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES), random_address(rng)
        key = (first.lower(), last.lower(), address["zip"])
        user_id = f"cu_{rng.getrandbits(24):06x}"
        email = f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@{rng.choice(DOMAINS)}"
        if key in by_name_zip or user_id in users or email in by_email:
            continue
        users[user_id] = {
            "user_id": user_id, "name": {"first": first, "last": last}, "email": email,
            "phone": f"+1-555-{rng.randint(100, 999)}-{rng.randint(0, 9999):04d}", "address": address,
            "payment_methods": _payment_methods(rng, email, numbers), "orders": [],
            "member_since": _day(rng, rng.randint(2018, 2025)),
        }
        by_email[email], by_name_zip[key] = user_id, user_id
    orders: dict[str, dict[str, Any]] = {}
    order_numbers = iter(rng.sample(range(10000, 100000), USERS * 6))
    for user in users.values():
        for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 3, 3, 4, 5))):
            order_id = f"#O{next(order_numbers)}"
            orders[order_id] = _order(rng, order_id, user, products)
            user["orders"].append(order_id)
    tickets: dict[str, dict[str, Any]] = {}
    for number in rng.sample(range(1000, 10000), USERS // 2):
        user = users[rng.choice(list(users))]
        about = rng.choice(user["orders"]) if rng.random() < 0.8 else None
        ticket_id = f"TCK-{number}"
        tickets[ticket_id] = {
            "ticket_id": ticket_id, "user_id": user["user_id"], "order_id": about,
            "subject": rng.choice(TICKET_SUBJECTS), "status": rng.choice(("open", "open", "closed")),
            "opened_on": _day(rng, 2026), "messages": ["Customer contacted support."],
        }
    return BaseDB(seed, users, orders, products, tickets, items, by_email, by_name_zip)


def _copy(record: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = orjson.loads(orjson.dumps(record))
    return copied


class Store:
    """One episode's view of a `BaseDB`: reads go through, a changed record is copied first."""

    def __init__(self, base: BaseDB) -> None:
        self.base = base
        self.changed: dict[Kind, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}

    def get(self, kind: Kind, key: str) -> dict[str, Any] | None:
        """The current record (read-only: change it through `edit`), or None."""
        if not isinstance(key, str):
            return None
        found = self.changed[kind].get(key)
        return found if found is not None else self.base.table(kind).get(key)

    def edit(self, kind: Kind, key: str) -> dict[str, Any]:
        """The record, copied into this episode's changes on first use; raises KeyError if it does not exist."""
        found = self.changed[kind].get(key)
        if found is None:
            found = self.changed[kind][key] = _copy(self.base.table(kind)[key])
        return found

    def insert(self, kind: Kind, key: str, record: dict[str, Any]) -> None:
        self.changed[kind][key] = record

    def ids(self, kind: Kind) -> list[str]:
        """Every id of a kind, the shared ones first, then those this episode created."""
        base = self.base.table(kind)
        return [*base, *(key for key in self.changed[kind] if key not in base)]

    def find_user_by_name_zip(self, first: str, last: str, zip_code: str) -> str | None:
        key = (first.strip().lower(), last.strip().lower(), zip_code.strip())
        candidates = [self.base.by_name_zip[key]] if key in self.base.by_name_zip else []
        candidates += list(self.changed["users"])  # an address change moves a user to another zip
        for user_id in candidates:
            user = self.get("users", user_id)
            if user is not None and (user["name"]["first"].lower(), user["name"]["last"].lower(),
                                     user["address"]["zip"]) == key:
                return user_id
        return None

    def snapshot(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The records this episode changed or created, by kind (JSON)."""
        return {kind: dict(sorted(records.items())) for kind, records in self.changed.items() if records}
