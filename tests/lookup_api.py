"""Hand-made evidence of a small shop API for the look-up learners' tests: queries, empties, preconditions."""

from __future__ import annotations

import json
from typing import Any

from worldsmith.worldbook.model import Evidence

USERS = {
    "ann_lee_1": {"name": {"first_name": "Ann", "last_name": "Lee"}, "address": {"zip": "10001"},
                  "email": "ann@x.com", "payment_methods": {"gift_card_1": {"id": "gift_card_1", "balance": 20}},
                  "orders": ["#W1001"]},
    "bob_ray_2": {"name": {"first_name": "Bob", "last_name": "Ray"}, "address": {"zip": "10002"},
                  "email": "bob@x.com", "payment_methods": {"gift_card_2": {"id": "gift_card_2", "balance": 500}},
                  "orders": ["#W1002"]},
    "cy_lee_3": {"name": {"first_name": "Cy", "last_name": "Lee"}, "address": {"zip": "10001"},
                 "email": "cy@x.com", "payment_methods": {"gift_card_3": {"id": "gift_card_3", "balance": 0}},
                 "orders": ["#W1003"]},
}
ORDERS = {
    "#W1001": {"order_id": "#W1001", "user_id": "ann_lee_1", "status": "pending", "total": 50},
    "#W1002": {"order_id": "#W1002", "user_id": "bob_ray_2", "status": "delivered", "total": 70},
    "#W1003": {"order_id": "#W1003", "user_id": "cy_lee_3", "status": "pending", "total": 10},
}


class Log:
    """Evidence written turn by turn, episode by episode."""

    def __init__(self) -> None:
        self.items: list[Evidence] = []
        self.episode = 0
        self.turn = 0

    def new_episode(self) -> None:
        self.episode += 1
        self.turn = 0

    def call(self, action: str, observation: Any, **arguments: Any) -> None:
        text = observation if isinstance(observation, str) else json.dumps(observation)
        line = f"{action}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
        self.items.append(Evidence(turn_id=f"ep{self.episode}#{self.turn}", action=action, arguments=arguments,
                                   action_text=line, observation=text))
        self.turn += 1


def shop_log(email_case: bool = False) -> Log:
    log = Log()
    for user_id, user in USERS.items():
        log.new_episode()
        email = user["email"].upper() if email_case and user_id == "bob_ray_2" else user["email"]
        log.call("find_user_id_by_email", user_id, email=email)
        log.call("get_user_details", user, user_id=user_id)
        order_id = user["orders"][0]
        log.call("get_order_details", ORDERS[order_id], order_id=order_id)
    for user_id, user in USERS.items():  # every user meets the same records again (a shared initial world)
        log.new_episode()
        log.call("get_user_details", user, user_id=user_id)
        log.call("get_order_details", ORDERS[user["orders"][0]], order_id=user["orders"][0])
    log.new_episode()
    log.call("find_user_id_by_email", "Error: user not found", email="nobody@x.com")
    log.call("find_user_id_by_email", "Error: user not found", email="ghost@y.org")
    log.call("find_user_id_by_name_zip", "ann_lee_1", first_name="Ann", last_name="Lee", zip="10001")
    log.call("find_user_id_by_name_zip", "cy_lee_3", first_name="Cy", last_name="Lee", zip="10001")
    return log


def cancel_log(complete: bool = True) -> Log:
    log = shop_log() if complete else Log()
    log.new_episode()
    log.call("get_order_details", ORDERS["#W1001"], order_id="#W1001")
    log.call("cancel_pending_order", {**ORDERS["#W1001"], "status": "cancelled"}, order_id="#W1001")
    log.call("cancel_pending_order", "Error: non-pending order cannot be cancelled", order_id="#W1001")
    log.new_episode()
    log.call("get_order_details", ORDERS["#W1002"], order_id="#W1002")
    log.call("cancel_pending_order", "Error: non-pending order cannot be cancelled", order_id="#W1002")
    log.call("cancel_pending_order", "Error: order not found", order_id="#W9999")
    log.call("cancel_pending_order", "Error: order not found", order_id="#W8888")
    log.new_episode()
    log.call("cancel_pending_order", {**ORDERS["#W1003"], "status": "cancelled"}, order_id="#W1003")
    return log
