"""Query, empty-result and precondition learners on hand-made evidence of a small shop API."""

from __future__ import annotations

import json
from typing import Any

from worldsmith.worldbook.lookup import EpisodeRecords, RecordStore, id_shape
from worldsmith.worldbook.model import Evidence, RuleStatus
from worldsmith.worldbook.preconditions import learn_preconditions
from worldsmith.worldbook.queries import learn_queries, render_answer, run_query

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


def test_store_keys_records_by_own_id_and_by_the_selecting_argument() -> None:
    store = RecordStore.from_evidence(shop_log().items)
    assert store.get("user_id", "ann_lee_1")["email"] == "ann@x.com"
    assert store.get("order_id", "#W1002")["status"] == "delivered"
    assert store.get("id", "gift_card_3")["balance"] == 0
    assert store.coverage("order_id", ["#W1001", "#W1002"]) == 1.0
    assert id_shape("#W1001") == "#A9" and id_shape("ann_lee_1") == "a_a_9"


def test_query_by_email_learns_the_path_renders_the_id_and_the_empty_answer() -> None:
    log = shop_log()
    rules = {r.action: r for r in learn_queries(log.items)}
    rule = rules["find_user_id_by_email"]
    assert rule.status == RuleStatus.SUPPORTED and rule.kind == "user_id" and rule.form == "bare"
    assert [(m.argument, m.path, m.mode) for m in rule.matches] == [("email", ["email"], "exact")]
    assert rule.empty == "Error: user not found" and rule.empty_support == 2
    view = EpisodeRecords(RecordStore.from_evidence(log.items))
    found = run_query(rule, view, {"email": "cy@x.com"})
    assert render_answer(rule, found or []) == "cy_lee_3"
    assert run_query(rule, view, {"email": "CY@x.com"}) == []  # exact: no evidence showed another case


def test_case_insensitive_only_where_the_evidence_shows_it() -> None:
    rule = next(r for r in learn_queries(shop_log(email_case=True).items) if r.action == "find_user_id_by_email")
    assert rule.matches[0].mode == "ci"


def test_nested_paths_for_several_arguments() -> None:
    rule = next(r for r in learn_queries(shop_log().items) if r.action == "find_user_id_by_name_zip")
    assert {m.argument: m.path for m in rule.matches} == {
        "first_name": ["name", "first_name"], "last_name": ["name", "last_name"], "zip": ["address", "zip"]}
    assert rule.status == RuleStatus.SUPPORTED


def test_an_attribute_that_matches_once_by_chance_makes_no_supported_rule() -> None:
    log = shop_log()
    log.new_episode()
    log.call("lucky_guess", "ann_lee_1", word="Ann")  # once: the argument happens to be her first name
    rules = [r for r in learn_queries(log.items) if r.action == "lucky_guess"]
    assert all(r.status != RuleStatus.SUPPORTED for r in rules)


def test_an_answer_unrelated_to_the_arguments_makes_no_rule() -> None:
    log = shop_log()
    log.new_episode()
    for word in ("red", "green", "blue"):
        log.call("random_user", "bob_ray_2", word=word)
    assert not [r for r in learn_queries(log.items) if r.action == "random_user" and r.status == "supported"]


def test_list_answer_in_the_order_the_evidence_shows() -> None:
    log = shop_log()
    log.new_episode()
    log.call("search_users", ["ann_lee_1", "cy_lee_3"], last_name="Lee")
    log.call("search_users", ["ann_lee_1", "cy_lee_3"], last_name="lee")
    log.call("search_users", [], last_name="Zed")
    log.call("search_users", ["bob_ray_2"], last_name="Ray")
    rule = next(r for r in learn_queries(log.items) if r.action == "search_users")
    assert rule.form == "list" and rule.matches[0].mode == "ci" and rule.status == RuleStatus.SUPPORTED
    assert rule.empty == "[]"
    reversed_log = shop_log()
    reversed_log.new_episode()
    for name in ("Lee", "lee"):  # an order neither the store's nor the ids' explains: the answers are not reproduced
        reversed_log.call("search_users", ["cy_lee_3", "ann_lee_1"], last_name=name)
    rule = next(r for r in learn_queries(reversed_log.items) if r.action == "search_users")
    assert rule.status != RuleStatus.SUPPORTED and rule.contradicting == 2


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


def test_preconditions_not_found_and_state() -> None:
    rules = {r.template: r for r in learn_preconditions(cancel_log().items) if r.action == "cancel_pending_order"}
    state = rules["Error: non-pending order cannot be cancelled"]
    assert state.test == "not_in_values" and state.path == ["status"] and state.values == ["pending"]
    assert state.status == RuleStatus.SUPPORTED
    missing = rules["Error: order not found"]
    assert missing.test == "unknown" and missing.kind == "order_id" and missing.status == RuleStatus.SUPPORTED


def test_not_found_falls_back_to_the_id_form_when_the_store_is_not_complete() -> None:
    log = cancel_log(complete=False)
    log.new_episode()
    log.call("cancel_pending_order", "Error: order not found", order_id="W77")
    log.call("cancel_pending_order", "Error: order not found", order_id="12")
    rules = {r.template: r for r in learn_preconditions(log.items) if r.action == "cancel_pending_order"}
    missing = rules["Error: order not found"]
    assert missing.test == "invalid_form"  # the orders of these episodes are each shown once: no `unknown`


def test_precondition_comparison_and_membership_with_slots() -> None:
    log = shop_log()
    log.new_episode()
    log.call("get_user_details", USERS["cy_lee_3"], user_id="cy_lee_3")
    log.call("pay", "Error: gift card balance is not enough", payment_method_id="gift_card_3", amount=10)
    log.call("pay", {"paid": 10}, payment_method_id="gift_card_2", amount=10)
    log.call("pay", "Error: gift card balance is not enough", payment_method_id="gift_card_1", amount=60)
    log.call("pay", {"paid": 60}, payment_method_id="gift_card_2", amount=60)
    log.call("pay", {"paid": 5}, payment_method_id="gift_card_1", amount=5)
    log.call("pay_order", "Error: payment method gift_card_2 not found", order_id="#W1001",
             payment_method_id="gift_card_2")
    log.call("pay_order", {"paid": 1}, order_id="#W1001", payment_method_id="gift_card_1")
    log.call("pay_order", "Error: payment method gift_card_1 not found", order_id="#W1003",
             payment_method_id="gift_card_1")
    log.call("pay_order", {"paid": 1}, order_id="#W1003", payment_method_id="gift_card_3")
    rules = {r.action: r for r in learn_preconditions(log.items)}
    balance = rules["pay"]
    assert (balance.test, balance.path, balance.other) == ("less_than", ["balance"], "amount")
    member = rules["pay_order"]
    assert member.test == "not_member" and member.via == "user_id" and member.path == ["payment_methods"]
    assert member.template == "Error: payment method {arg.payment_method_id} not found"
    assert member.status == RuleStatus.SUPPORTED
