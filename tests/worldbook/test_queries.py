"""Query, empty-result and precondition learners on hand-made evidence of a small shop API."""

from __future__ import annotations

from lookup_api import USERS, cancel_log, shop_log
from worldsmith.worldbook.model import RuleStatus
from worldsmith.worldbook.preconditions import learn_preconditions
from worldsmith.worldbook.queries import learn_queries, render_answer, run_query
from worldsmith.worldbook.record_store import EpisodeRecords, RecordStore, id_shape


def test_store_keys_records_by_own_id_and_by_the_selecting_argument() -> None:
    store = RecordStore.from_evidence(shop_log().items)
    assert store.entity("user_id", "ann_lee_1")["email"] == "ann@x.com"
    assert store.entity("order_id", "#W1002")["status"] == "delivered"
    assert store.entity("id", "gift_card_3")["balance"] == 0
    assert store.coverage("order_id", ["#W1001", "#W1002"]) == 1.0
    assert id_shape("#W1001") == "#x" and id_shape("ann_lee_1") == "x_x_x" == id_shape("cu_9a_8")


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


def test_lookup_rules_are_tool_rules_of_three_kinds_with_status_and_provenance() -> None:
    from worldsmith.worldbook import Worldbook
    from worldsmith.worldbook.lookup_rules import learn_lookup_rules

    rules = {rule.id: rule for rule in learn_lookup_rules(cancel_log().items)}
    query = rules["query:find_user_id_by_email"]
    assert query.kind == "query" and query.executable and query.provenance.supporting
    empty = rules["empty:find_user_id_by_email"]
    assert empty.kind == "empty" and empty.template == "Error: user not found" and empty.executable
    conditions = {r.template: r for r in rules.values() if r.kind == "precondition"}
    assert conditions["Error: order not found"].precondition.test == "unknown"
    book = Worldbook(name="shop", tool_rules=list(rules.values()))
    assert Worldbook.model_validate_json(book.model_dump_json()) == book  # stored and read back alike


def test_no_match_is_not_believed_where_each_task_has_its_own_records() -> None:
    from worldsmith.worldbook.lookup_rules import learn_lookup_rules

    log = shop_log()  # episodes 1-3 and 4-6 meet the same three users: here they are two recordings of each task
    families = {f"ep{n}": f"task{(n - 1) % 3}" for n in range(1, 8)}
    rules = {rule.id: rule for rule in learn_lookup_rules(log.items, families=families)}
    assert rules["query:find_user_id_by_email"].executable
    assert not rules["empty:find_user_id_by_email"].executable
    assert "0% of the user_id records" in rules["empty:find_user_id_by_email"].description
