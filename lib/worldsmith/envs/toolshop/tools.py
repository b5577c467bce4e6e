"""The toolshop's tools: plain functions over a `Store`, each with an OpenAI function schema.

A tool returns the text the agent sees. Reads return JSON (`json.dumps` defaults for most, a
compact layout for `get_item`, `get_order_status` and `search_products`, indented for
`get_ticket`), queries by attribute return a bare id or a JSON list (possibly `[]`), writes return
the updated record (or a one-line confirmation), and failures are plain text: most start with
`Error: `, some name the argument (`Error: order #O12345 not found`), some are fixed
(`Error: non-pending order cannot be cancelled`), and one has no prefix (`payment method not
found`), as real backends mix them. `run_tool` checks arguments against the schema first
(missing, unexpected, wrongly typed), so every call gets a text answer and none raises.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from worldsmith.envs.toolshop.db import Store

__all__ = ["CANCEL_REASONS", "TOOLS", "Tool", "ToolError", "is_error_text", "run_tool", "tool_schemas"]

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
ADDRESS_FIELDS = ("line1", "line2", "city", "state", "zip")
MAX_TOP_UP = 500.0


class ToolError(Exception):
    """A failed call: the message is exactly what the agent sees."""


def is_error_text(text: str) -> bool:
    """Whether a tool answer reports a failure (every failure text of this module)."""
    return text.startswith("Error: ") or text == "payment method not found"


def _dumps(value: Any) -> str:
    return json.dumps(value)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _money(value: float) -> float:
    return round(value + 1e-9, 2)


# --------------------------------------------------------------------------------------------
# Lookups shared by the tools
# --------------------------------------------------------------------------------------------


def _user(store: Store, user_id: str) -> dict[str, Any]:
    user = store.get("users", user_id)
    if user is None:
        raise ToolError(f"Error: user {user_id} not found")
    return user


def _order(store: Store, order_id: str) -> dict[str, Any]:
    order = store.get("orders", order_id)
    if order is None:
        raise ToolError(f"Error: order {order_id} not found")
    return order


def _method(user: dict[str, Any], method_id: str) -> dict[str, Any]:
    method = user["payment_methods"].get(method_id)
    if method is None:
        raise ToolError("payment method not found")
    return method


def _variant(store: Store, item_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    product_id = store.base.items.get(item_id)
    if product_id is None:
        raise ToolError(f"Error: item {item_id} not found")
    product = store.get("products", product_id)
    assert product is not None
    return product, product["variants"][item_id]


def _charge(store: Store, user_id: str, method_id: str, amount: float) -> dict[str, Any]:
    """A payment entry for `amount` (negative: a refund); gift cards are debited or credited at once."""
    user = _user(store, user_id)
    method = _method(user, method_id)
    if method["kind"] == "gift_card":
        if amount > 0 and method["balance"] + 1e-9 < amount:
            raise ToolError("Error: gift card balance is not enough")
        edited = store.edit("users", user_id)["payment_methods"][method_id]
        edited["balance"] = _money(edited["balance"] - amount)
    return {"kind": "charge" if amount >= 0 else "refund", "payment_method_id": method_id, "amount": _money(abs(amount))}


def _order_lines(order: dict[str, Any], item_ids: list[str]) -> list[dict[str, Any]]:
    """The order lines of `item_ids` (a repeated id takes another line of the same item)."""
    remaining = list(order["items"])
    chosen = []
    for item_id in item_ids:
        line = next((line for line in remaining if line["item_id"] == item_id), None)
        if line is None:
            raise ToolError(f"Error: item {item_id} not in order {order['order_id']}")
        remaining.remove(line)
        chosen.append(line)
    return chosen


# --------------------------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------------------------


def get_user(store: Store, user_id: str) -> str:
    return _dumps(_user(store, user_id))


def get_user_payment_methods(store: Store, user_id: str) -> str:
    return _dumps(list(_user(store, user_id)["payment_methods"].values()))


def get_order(store: Store, order_id: str) -> str:
    return _dumps(_order(store, order_id))


def get_order_status(store: Store, order_id: str) -> str:
    order = _order(store, order_id)
    return _compact({"order_id": order["order_id"], "status": order["status"]})


def get_product(store: Store, product_id: str) -> str:
    product = store.get("products", product_id)
    if product is None:
        raise ToolError(f"Error: product {product_id} not found")
    return _dumps(product)


def get_item(store: Store, item_id: str) -> str:
    product, variant = _variant(store, item_id)
    return _compact({"item_id": item_id, "product_id": product["product_id"], "name": product["name"], **{
        key: variant[key] for key in ("options", "price", "available")}})


def get_ticket(store: Store, ticket_id: str) -> str:
    ticket = store.get("tickets", ticket_id)
    if ticket is None:
        raise ToolError(f"Error: ticket {ticket_id} not found")
    return json.dumps(ticket, indent=2)


# --------------------------------------------------------------------------------------------
# Queries by attribute
# --------------------------------------------------------------------------------------------


def find_user_id_by_email(store: Store, email: str) -> str:
    user_id = store.base.by_email.get(email.strip().lower())
    if user_id is None:
        raise ToolError("Error: user not found")
    return user_id


def find_user_id_by_name_zip(store: Store, first_name: str, last_name: str, zip: str) -> str:  # noqa: A002 - the field's name
    user_id = store.find_user_by_name_zip(first_name, last_name, zip)
    if user_id is None:
        raise ToolError("Error: user not found")
    return user_id


def search_orders(store: Store, user_id: str, status: str | None = None) -> str:
    user = _user(store, user_id)
    found = []
    for order_id in user["orders"]:
        order = store.get("orders", order_id)
        if order is not None and (status is None or order["status"] == status):
            found.append(order_id)
    return _dumps(found)


def search_products(store: Store, query: str | None = None, min_price: float | None = None,
                    max_price: float | None = None, available_only: bool = False) -> str:
    """Products whose name contains `query` (any case) with a variant in the price range."""
    if min_price is not None and max_price is not None and min_price > max_price:
        raise ToolError("Error: min_price is greater than max_price")
    found = []
    for product_id in store.ids("products"):
        product = store.get("products", product_id)
        assert product is not None
        if query is not None and query.strip().lower() not in product["name"].lower():
            continue
        prices = [v["price"] for v in product["variants"].values() if v["available"] or not available_only]
        prices = [p for p in prices if (min_price is None or p >= min_price) and (max_price is None or p <= max_price)]
        if prices:
            found.append({"product_id": product_id, "name": product["name"], "from_price": min(prices)})
    return _compact(found)


def list_user_tickets(store: Store, user_id: str, status: str | None = None) -> str:
    _user(store, user_id)
    found = []
    for ticket_id in store.ids("tickets"):
        ticket = store.get("tickets", ticket_id)
        assert ticket is not None
        if ticket["user_id"] == user_id and (status is None or ticket["status"] == status):
            found.append({"ticket_id": ticket_id, "subject": ticket["subject"], "status": ticket["status"]})
    return _dumps(found)


# --------------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------------


def cancel_order(store: Store, order_id: str, reason: str) -> str:
    order = _order(store, order_id)
    if order["status"] != "pending":
        raise ToolError("Error: non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError(f"Error: invalid reason {reason!r}: expected one of {', '.join(CANCEL_REASONS)}")
    refunds = [_charge(store, order["user_id"], p["payment_method_id"], -p["amount"])
               for p in order["payments"] if p["kind"] == "charge"]
    order = store.edit("orders", order_id)
    order["status"], order["cancel_reason"] = "cancelled", reason
    order["payments"].extend(refunds)
    return _dumps(order)


def _address_arguments(line1: str, line2: str, city: str, state: str, zip: str) -> dict[str, str]:  # noqa: A002
    if not line1.strip() or not city.strip():
        raise ToolError("Error: address line1 and city are required")
    if not (len(zip) == 5 and zip.isdigit()):
        raise ToolError(f"Error: invalid zip code {zip!r}")
    return {"line1": line1, "line2": line2, "city": city, "state": state, "zip": zip, "country": "USA"}


def modify_order_address(store: Store, order_id: str, line1: str, line2: str, city: str, state: str,
                         zip: str) -> str:  # noqa: A002
    order = _order(store, order_id)
    if order["status"] != "pending":
        raise ToolError("Error: non-pending order cannot be modified")
    address = _address_arguments(line1, line2, city, state, zip)
    order = store.edit("orders", order_id)
    order["shipping_address"] = address
    return _dumps(order)


def modify_user_address(store: Store, user_id: str, line1: str, line2: str, city: str, state: str,
                        zip: str) -> str:  # noqa: A002
    _user(store, user_id)
    address = _address_arguments(line1, line2, city, state, zip)
    user = store.edit("users", user_id)
    user["address"] = address
    return _dumps(user)


def return_order_items(store: Store, order_id: str, item_ids: list[str], payment_method_id: str) -> str:
    order = _order(store, order_id)
    if order["status"] != "delivered":
        raise ToolError("Error: non-delivered order cannot be returned")
    if not item_ids:
        raise ToolError("Error: no items given")
    lines = _order_lines(order, item_ids)
    method = _method(_user(store, order["user_id"]), payment_method_id)
    original = {p["payment_method_id"] for p in order["payments"] if p["kind"] == "charge"}
    if payment_method_id not in original and method["kind"] != "gift_card":
        raise ToolError("Error: refund must go to the original payment method or a gift card")
    refund = _charge(store, order["user_id"], payment_method_id, -sum(line["price"] for line in lines))
    order = store.edit("orders", order_id)
    order["status"] = "return requested"
    order["return"] = {"item_ids": list(item_ids), "refund_method_id": payment_method_id}
    order["payments"].append(refund)
    return _dumps(order)


def exchange_order_items(store: Store, order_id: str, item_ids: list[str], new_item_ids: list[str],
                         payment_method_id: str) -> str:
    order = _order(store, order_id)
    if order["status"] != "delivered":
        raise ToolError("Error: non-delivered order cannot be exchanged")
    if not item_ids or len(item_ids) != len(new_item_ids):
        raise ToolError("Error: the number of items to exchange does not match")
    lines = _order_lines(order, item_ids)
    difference = 0.0
    for line, new_item_id in zip(lines, new_item_ids, strict=True):
        product, variant = _variant(store, new_item_id)
        if product["product_id"] != line["product_id"]:
            raise ToolError(f"Error: new item {new_item_id} is not the same product as item {line['item_id']}")
        if not variant["available"]:
            raise ToolError(f"Error: new item {new_item_id} is not available")
        difference += variant["price"] - line["price"]
    payment = _charge(store, order["user_id"], payment_method_id, _money(difference))
    order = store.edit("orders", order_id)
    order["status"] = "exchange requested"
    order["exchange"] = {"item_ids": list(item_ids), "new_item_ids": list(new_item_ids),
                         "price_difference": _money(difference), "payment_method_id": payment_method_id}
    if payment["amount"] > 0:
        order["payments"].append(payment)
    return _dumps(order)


def place_order(store: Store, user_id: str, item_ids: list[str], payment_method_id: str) -> str:
    user = _user(store, user_id)
    if not item_ids:
        raise ToolError("Error: no items given")
    lines = []
    for item_id in item_ids:
        product, variant = _variant(store, item_id)
        if not variant["available"]:
            raise ToolError(f"Error: item {item_id} is not available")
        lines.append({"item_id": item_id, "product_id": product["product_id"], "name": product["name"],
                      "options": dict(variant["options"]), "price": variant["price"]})
    payment = _charge(store, user_id, payment_method_id, _money(sum(line["price"] for line in lines)))
    number = max(int(key[2:]) for key in store.ids("orders")) + 1
    order_id = f"#O{number}"
    order = {"order_id": order_id, "user_id": user_id, "status": "pending", "items": lines,
             "shipping_address": dict(user["address"]), "placed_on": "2026-12-04", "payments": [payment]}
    store.insert("orders", order_id, order)
    store.edit("users", user_id)["orders"].append(order_id)
    return _dumps(order)


def top_up_gift_card(store: Store, user_id: str, gift_card_id: str, amount: float, source_payment_method_id: str) -> str:
    user = _user(store, user_id)
    gift = _method(user, gift_card_id)
    if gift["kind"] != "gift_card":
        raise ToolError(f"Error: {gift_card_id} is not a gift card")
    source = _method(user, source_payment_method_id)
    if source["kind"] != "card":
        raise ToolError("Error: top-ups must be paid by card")
    if not (math.isfinite(amount) and 1 <= amount <= MAX_TOP_UP):
        raise ToolError(f"Error: amount must be between 1 and {MAX_TOP_UP:g}")
    edited = store.edit("users", user_id)["payment_methods"][gift_card_id]
    edited["balance"] = _money(edited["balance"] + amount)
    return _compact(edited)


def add_card(store: Store, user_id: str, brand: str, last4: str, expires: str) -> str:
    user = _user(store, user_id)
    if brand not in ("visa", "mastercard", "amex", "discover"):
        raise ToolError(f"Error: unsupported card brand {brand!r}")
    if not (len(last4) == 4 and last4.isdigit()):
        raise ToolError("Error: last4 must be 4 digits")
    if any(m["kind"] == "card" and m["brand"] == brand and m["last4"] == last4 for m in user["payment_methods"].values()):
        raise ToolError("Error: card already on file")
    numbers = [int(key.rsplit("_", 1)[1]) for uid in store.ids("users")
               for key in (store.get("users", uid) or {"payment_methods": {}})["payment_methods"]]
    method_id = f"pm_card_{max(numbers) + 1}"
    user = store.edit("users", user_id)
    user["payment_methods"][method_id] = {"id": method_id, "kind": "card", "brand": brand, "last4": last4,
                                          "expires": expires}
    return _dumps(list(user["payment_methods"].values()))


def remove_payment_method(store: Store, user_id: str, payment_method_id: str) -> str:
    user = _user(store, user_id)
    method = _method(user, payment_method_id)
    if len(user["payment_methods"]) == 1:
        raise ToolError("Error: cannot remove the last payment method")
    if method["kind"] == "gift_card" and method["balance"] > 0:
        raise ToolError("Error: a gift card with a balance cannot be removed")
    del store.edit("users", user_id)["payment_methods"][payment_method_id]
    return f"Payment method {payment_method_id} removed."


def open_ticket(store: Store, user_id: str, subject: str, order_id: str | None = None) -> str:
    user = _user(store, user_id)
    if not subject.strip():
        raise ToolError("Error: subject must not be empty")
    if order_id is not None and order_id not in user["orders"]:
        raise ToolError(f"Error: order {order_id} not found for user {user_id}")
    ticket_id = f"TCK-{max(int(key[4:]) for key in store.ids('tickets')) + 1}"
    ticket: dict[str, Any] = {"ticket_id": ticket_id, "user_id": user_id, "order_id": order_id, "subject": subject,
              "status": "open", "opened_on": "2026-12-04", "messages": []}
    store.insert("tickets", ticket_id, ticket)
    return _dumps(ticket)


def close_ticket(store: Store, ticket_id: str) -> str:
    ticket = store.get("tickets", ticket_id)
    if ticket is None:
        raise ToolError(f"Error: ticket {ticket_id} not found")
    if ticket["status"] == "closed":
        raise ToolError(f"Error: ticket {ticket_id} is already closed")
    store.edit("tickets", ticket_id)["status"] = "closed"
    return f"Ticket {ticket_id} closed."


# --------------------------------------------------------------------------------------------
# Schemas and dispatch
# --------------------------------------------------------------------------------------------

_STRING = {"type": "string"}
_ID_LIST = {"type": "array", "items": {"type": "string"}}


@dataclass(frozen=True)
class Tool:
    name: str
    function: Callable[..., str]
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    writes: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": self.properties, "required": list(self.required)},
        }}


def _p(description: str, schema: dict[str, Any] = _STRING) -> dict[str, Any]:
    return {**schema, "description": description}


_ADDRESS = {
    "line1": _p("street and number"), "line2": _p("apartment, suite (may be empty)"), "city": _p("city"),
    "state": _p("two-letter state code"), "zip": _p("five-digit zip code"),
}
_USER_ID = {"user_id": _p("the user's id, such as cu_1a2b3c")}
_ORDER_ID = {"order_id": _p("the order id, such as #O12345")}

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool("find_user_id_by_email", find_user_id_by_email, "Find a user's id by their email address.",
         {"email": _p("the email address")}, ("email",)),
    Tool("find_user_id_by_name_zip", find_user_id_by_name_zip,
         "Find a user's id by first name, last name and the zip code of their default address.",
         {"first_name": _p("first name"), "last_name": _p("last name"), "zip": _p("five-digit zip code")},
         ("first_name", "last_name", "zip")),
    Tool("get_user", get_user, "The whole user record: name, contact, default address, payment methods, order ids.",
         _USER_ID, ("user_id",)),
    Tool("get_user_payment_methods", get_user_payment_methods,
         "A user's payment methods (cards, gift cards with balances, PayPal).", _USER_ID, ("user_id",)),
    Tool("get_order", get_order, "The whole order: items, status, shipping address, payments.", _ORDER_ID,
         ("order_id",)),
    Tool("get_order_status", get_order_status, "Only the status of an order.", _ORDER_ID, ("order_id",)),
    Tool("search_orders", search_orders, "Ids of a user's orders, optionally only those with a status.",
         {**_USER_ID, "status": _p("pending, processed, shipped, delivered, cancelled, return requested or "
                                   "exchange requested")}, ("user_id",)),
    Tool("get_product", get_product, "A product with all its variants (item ids, options, price, availability).",
         {"product_id": _p("the product id, such as P-1234")}, ("product_id",)),
    Tool("get_item", get_item, "One variant of a product by its 8-digit item id.",
         {"item_id": _p("the item id")}, ("item_id",)),
    Tool("search_products", search_products,
         "Products whose name contains the query and that have a variant in the price range.",
         {"query": _p("part of the product name"), "min_price": _p("lowest price", {"type": "number"}),
          "max_price": _p("highest price", {"type": "number"}),
          "available_only": _p("only variants in stock", {"type": "boolean"})}, ()),
    Tool("list_user_tickets", list_user_tickets, "A user's support tickets, optionally only open or closed ones.",
         {**_USER_ID, "status": _p("open or closed")}, ("user_id",)),
    Tool("get_ticket", get_ticket, "A support ticket.", {"ticket_id": _p("the ticket id, such as TCK-1234")},
         ("ticket_id",)),
    Tool("cancel_order", cancel_order, "Cancel a pending order; charges are refunded to their payment methods.",
         {**_ORDER_ID, "reason": _p("'no longer needed' or 'ordered by mistake'")}, ("order_id", "reason"),
         writes=True),
    Tool("modify_order_address", modify_order_address, "Change the shipping address of a pending order.",
         {**_ORDER_ID, **_ADDRESS}, ("order_id", *ADDRESS_FIELDS), writes=True),
    Tool("modify_user_address", modify_user_address, "Change a user's default address.",
         {**_USER_ID, **_ADDRESS}, ("user_id", *ADDRESS_FIELDS), writes=True),
    Tool("return_order_items", return_order_items,
         "Return items of a delivered order; the refund goes to the original payment method or a gift card.",
         {**_ORDER_ID, "item_ids": _p("item ids to return", _ID_LIST),
          "payment_method_id": _p("where the refund goes")}, ("order_id", "item_ids", "payment_method_id"),
         writes=True),
    Tool("exchange_order_items", exchange_order_items,
         "Exchange items of a delivered order for other variants of the same products; the price difference is "
         "charged or refunded to the payment method.",
         {**_ORDER_ID, "item_ids": _p("item ids to exchange", _ID_LIST),
          "new_item_ids": _p("the new item ids, in the same order", _ID_LIST),
          "payment_method_id": _p("pays or receives the price difference")},
         ("order_id", "item_ids", "new_item_ids", "payment_method_id"), writes=True),
    Tool("place_order", place_order, "Order items for a user, paid with one of their payment methods.",
         {**_USER_ID, "item_ids": _p("item ids to buy", _ID_LIST), "payment_method_id": _p("pays the order")},
         ("user_id", "item_ids", "payment_method_id"), writes=True),
    Tool("top_up_gift_card", top_up_gift_card, "Add money to a user's gift card, paid by one of their cards.",
         {**_USER_ID, "gift_card_id": _p("the gift card's payment method id"),
          "amount": _p(f"dollars to add, 1 to {MAX_TOP_UP:g}", {"type": "number"}),
          "source_payment_method_id": _p("the card that pays")},
         ("user_id", "gift_card_id", "amount", "source_payment_method_id"), writes=True),
    Tool("add_card", add_card, "Add a credit card to a user's payment methods.",
         {**_USER_ID, "brand": _p("visa, mastercard, amex or discover"), "last4": _p("the last four digits"),
          "expires": _p("MM/YY")}, ("user_id", "brand", "last4", "expires"), writes=True),
    Tool("remove_payment_method", remove_payment_method, "Remove one of a user's payment methods.",
         {**_USER_ID, "payment_method_id": _p("the payment method id")}, ("user_id", "payment_method_id"),
         writes=True),
    Tool("open_ticket", open_ticket, "Open a support ticket for a user, optionally about one of their orders.",
         {**_USER_ID, "subject": _p("what the ticket is about"), "order_id": _p("the order it concerns")},
         ("user_id", "subject"), writes=True),
    Tool("close_ticket", close_ticket, "Close an open support ticket.",
         {"ticket_id": _p("the ticket id")}, ("ticket_id",), writes=True),
)}


def tool_schemas() -> list[dict[str, Any]]:
    """Every tool as an OpenAI function definition (a fresh copy: callers may change it)."""
    schemas: list[dict[str, Any]] = orjson.loads(orjson.dumps([tool.schema() for tool in TOOLS.values()]))
    return schemas


def _type_problem(name: str, value: Any, schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if kind == "string" and not isinstance(value, str):
        return f"Error: argument '{name}' must be a string"
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        return f"Error: argument '{name}' must be a number"
    if kind == "boolean" and not isinstance(value, bool):
        return f"Error: argument '{name}' must be true or false"
    if kind == "array" and not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        return f"Error: argument '{name}' must be a list of strings"
    return None


def run_tool(store: Store, name: str, arguments: Any) -> str:
    """Call a tool by name with JSON arguments; every outcome, failures included, is the text the agent sees."""
    tool = TOOLS.get(name)
    if tool is None:
        return f"Error: unknown tool '{name}'"
    if not isinstance(arguments, dict):
        return "Error: arguments must be a JSON object"
    for key in arguments:
        if key not in tool.properties:
            return f"Error: unexpected argument '{key}'"
    for key in tool.required:
        if key not in arguments:
            return f"Error: missing argument '{key}'"
    for key, value in arguments.items():
        if value is None and key not in tool.required:
            continue
        problem = _type_problem(key, value, tool.properties[key])
        if problem is not None:
            return problem
    try:
        return tool.function(store, **{key: value for key, value in arguments.items() if value is not None})
    except ToolError as error:
        return str(error)
