"""Tool rules: records, selectors, the entity store, write-effect learning, and tool rules on disk and in patches."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic import ValidationError

import tool_api
from worldsmith.worldbook import FieldChange, Patch, PatchOp, RuleStatus, ToolRule, Worldbook, WorldbookStore
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.record_store import EpisodeRecords, RecordStore, learn_selectors, own_records
from worldsmith.worldbook.writes import (
    apply_changes,
    learn_tool_rules,
    learn_writes,
    path_keys,
    path_of,
    render_response,
)


def _ev(episode: str, index: int, tool: str, arguments: dict[str, Any], observation: Any) -> Evidence:
    text = observation if isinstance(observation, str) else json.dumps(observation)
    return Evidence(turn_id=f"{episode}#{index}", action=tool, arguments=arguments,
                    action_text=f"{tool}({json.dumps(arguments)})", observation=text)


def _rules(evidence: list[Evidence]) -> dict[str, ToolRule]:
    return {rule.tool: rule for rule in learn_tool_rules(evidence) if rule.kind == "write"}  # look-ups apart


def _change(rule: ToolRule, path: str) -> FieldChange:
    return next(c for c in rule.changes if c.path == path)


# ------------------------------------------------------------------------------------------------ records
def test_own_records_key_each_object_by_its_first_identifier() -> None:
    value = {"order_id": "#W1", "user_id": "u1", "items": [{"item_id": "a", "price": 1}]}
    found = {(key, ident) for key, ident, _ in own_records(value)}
    assert found == {("order_id", "#W1"), ("item_id", "a")}


def test_selectors_from_answers_and_from_records_shown_before() -> None:
    evidence = tool_api.evidence(8)
    selectors = learn_selectors(evidence)
    assert selectors["get_order"] == ("order_id", "order_id")
    assert selectors["modify_address"] == ("order_id", "order_id")  # answered with {"order_id", "address"}
    assert selectors["return_items"] == ("order_id", "order_id")  # a text answer: the id the episode showed


def test_store_keeps_initial_versions_and_marks_disagreeing_fields_unstable() -> None:
    evidence = [
        _ev("a", 0, "get_user", {"user_id": "u1"}, {"user_id": "u1", "name": "Ann", "balance": 10}),
        _ev("a", 1, "pay", {"user_id": "u1", "amount": 4}, {"user_id": "u1", "name": "Ann", "balance": 6}),
        _ev("a", 2, "get_user", {"user_id": "u1"}, {"user_id": "u1", "name": "Ann", "balance": 6}),
        _ev("b", 0, "get_user", {"user_id": "u1"}, {"user_id": "u1", "name": "Ann", "balance": 10}),
        _ev("b", 1, "get_user", {"user_id": "u2"}, {"user_id": "u2", "name": "Bo", "tier": "gold"}),
        _ev("c", 0, "get_user", {"user_id": "u2"}, {"user_id": "u2", "name": "Bo", "tier": "silver"}),
    ]
    store = RecordStore.from_evidence(evidence, readers={"get_user"})
    assert store.get("user_id", "u1") == {"user_id": "u1", "name": "Ann", "balance": 10}  # not the paid 6
    assert store.records[("user_id", "u1")].episodes == ["a", "b"]
    assert store.get("user_id", "u2") is None  # tier differs across episodes
    assert store.get("user_id", "u2", stable_only=False) == {"user_id": "u2", "name": "Bo"}
    assert store.records[("user_id", "u2")].unstable == {"tier"}
    assert store.get("user_id", "nobody") is None


def test_store_skips_sightings_after_a_write_named_the_record() -> None:
    evidence = [_ev("a", 0, "pay", {"user_id": "u1", "amount": 4}, "ok"),
                _ev("a", 1, "get_user", {"user_id": "u1"}, {"user_id": "u1", "balance": 6}),
                _ev("b", 0, "get_user", {"user_id": "u1"}, {"user_id": "u1", "balance": 10})]
    store = RecordStore.from_evidence(evidence, readers={"get_user"})
    assert store.get("user_id", "u1") == {"user_id": "u1", "balance": 10}
    assert store.records[("user_id", "u1")].episodes == ["b"]


def test_one_pass_reads_an_answer_by_own_identifier_and_by_entity_kind() -> None:
    """A `name` first is the record's own identifier for writes, an attribute for look-ups; a whole answer with
    no id of its own is the entity its id-like argument selected (look-ups only); both keep families."""
    evidence = [
        _ev("a", 0, "get_tag", {"tag_id": "t1"}, {"name": "red", "tag_id": "t1"}),
        _ev("a", 1, "get_profile", {"user_id": "u1"}, {"email": "a@x", "zip": "1"}),
        _ev("b", 0, "get_tag", {"tag_id": "t1"}, {"name": "red", "tag_id": "t1"}),
    ]
    store = RecordStore.from_evidence(evidence, readers={"get_tag", "get_profile"}, families={"a": "f", "b": "g"})
    assert store.get("name", "red") == {"name": "red", "tag_id": "t1"} and store.get("tag_id", "t1") is None
    assert store.entity("tag_id", "t1") == {"name": "red", "tag_id": "t1"} and store.entity("name", "red") is None
    assert store.entity("user_id", "u1") == {"email": "a@x", "zip": "1"} and store.keys_for("u1") == []
    assert store.coverage("tag_id", ["t1"]) == 1.0 and store.coverage("user_id", ["u1"]) == 0.0
    assert store.records[("name", "red")].families == {"f", "g"}
    view = EpisodeRecords(store)
    view.observe({"tag_id": "t2"}, json.dumps({"name": "blue", "tag_id": "t2"}))
    assert [ident for ident, _ in view.all("tag_id")] == ["t1", "t2"]


# ------------------------------------------------------------------------------------------------ relations
def test_whole_record_answer_set_copy_and_append_built_from_prior_fields() -> None:
    rule = _rules(tool_api.evidence(30))["cancel_order"]
    assert rule.status == RuleStatus.SUPPORTED and rule.response and rule.response.kind == "record"
    assert _change(rule, "status").op == "set" and _change(rule, "status").value == "cancelled"
    assert _change(rule, "cancel_reason").op == "copy" and _change(rule, "cancel_reason").argument == "reason"
    history = _change(rule, "payment_history")
    assert history.op == "append" and history.status == RuleStatus.SUPPORTED
    built = {p.path: p for p in history.fields}
    assert built["transaction_type"].op == "set" and built["transaction_type"].value == "refund"
    assert built["amount"].op == "field" and built["amount"].source == "payment_history.0.amount"
    assert rule.provenance.supporting and not rule.counterexamples


def test_fields_answer_with_an_object_built_from_arguments() -> None:
    rule = _rules(tool_api.evidence(30))["modify_address"]
    assert rule.response and rule.response.kind == "fields" and rule.response.keys == ["order_id", "address"]
    address = _change(rule, "address")
    assert address.op == "object" and address.status == RuleStatus.SUPPORTED
    assert {(p.path, p.op, p.argument) for p in address.fields} == {
        ("address1", "copy", "address1"), ("city", "copy", "city"), ("zip", "copy", "zip")}


def test_text_answer_effects_learned_from_the_next_read() -> None:
    rule = _rules(tool_api.evidence(30))["return_items"]
    assert rule.response and rule.response.kind == "text" and rule.response.text == "Return requested."
    moved = _change(rule, "return_items")
    assert (moved.op, moved.argument, moved.source) == ("move", "item_ids", "items")
    assert _change(rule, "status").value == "return requested"


def test_a_field_that_changes_randomly_gets_no_supported_relation() -> None:
    rules = _rules(tool_api.evidence(30))
    touch = rules.get("touch_order")
    assert touch is None or all(c.status != RuleStatus.SUPPORTED for c in touch.changes if c.path == "stamp")
    assert "touch_order" not in learn_writes(tool_api.evidence(30))[1]


def test_random_values_beside_a_learned_relation_make_the_rule_conflicted() -> None:
    rng = random.Random(3)
    evidence = []
    for e in range(6):
        record = {"ticket_id": f"t{e}", "status": "open", "note": "x"}
        evidence.append(_ev(f"e{e}", 0, "get_ticket", {"ticket_id": f"t{e}"}, record))
        closed = {**record, "status": "closed", "note": f"n{rng.randint(0, 10**6)}"}
        evidence.append(_ev(f"e{e}", 1, "close_ticket", {"ticket_id": f"t{e}"}, closed))
    rule = _rules(evidence)["close_ticket"]
    assert _change(rule, "status").status == RuleStatus.SUPPORTED
    assert _change(rule, "note").status == RuleStatus.CONFLICTED
    assert rule.status == RuleStatus.CONFLICTED and not rule.executable


def test_numbers_lists_and_sorted_arguments() -> None:
    evidence = []
    for e in range(4):
        before = {"account_id": f"a{e}", "balance": 100 + e, "tags": ["x", "y", "z"], "picked": []}
        evidence.append(_ev(f"e{e}", 0, "get_account", {"account_id": f"a{e}"}, before))
        after = {**before, "balance": before["balance"] - 7 * e - 1, "tags": ["x", "z"], "picked": ["b", "c"]}
        evidence.append(_ev(f"e{e}", 1, "spend", {"account_id": f"a{e}", "amount": 7 * e + 1, "tag": "y",
                                                   "choice": ["c", "b"]}, after))
    rule = _rules(evidence)["spend"]
    assert (_change(rule, "balance").op, _change(rule, "balance").argument) == ("sub", "amount")
    assert (_change(rule, "tags").op, _change(rule, "tags").argument) == ("remove", "tag")
    assert (_change(rule, "picked").op, _change(rule, "picked").argument) == ("sorted_arg", "choice")


def test_one_turn_is_tentative() -> None:
    evidence = [_ev("e", 0, "get_ticket", {"ticket_id": "t"}, {"ticket_id": "t", "status": "open"}),
                _ev("e", 1, "close_ticket", {"ticket_id": "t"}, {"ticket_id": "t", "status": "closed"}),
                _ev("f", 0, "get_ticket", {"ticket_id": "u"}, {"ticket_id": "u", "status": "open"}),
                _ev("f", 1, "close_ticket", {"ticket_id": "u"}, {"ticket_id": "u", "status": "closed"})]
    assert _rules(evidence)["close_ticket"].status == RuleStatus.SUPPORTED
    assert "close_ticket" not in _rules(evidence[:2])  # one change: not even a write yet


# ------------------------------------------------------------------------------------------------ applying
def test_apply_and_render_reproduce_held_out_answers() -> None:
    rules = _rules(tool_api.evidence(30))
    orders = tool_api.initial_orders()
    exact = total = 0
    for items in tool_api.episodes(10, seed=99, prefix="held"):
        shown = {k: json.loads(json.dumps(v)) for k, v in orders.items()}
        for item in items:
            rule = rules.get(item.action)
            order_id = item.arguments["order_id"]
            if rule is not None:
                after = apply_changes(rule, shown[order_id], item.arguments)
                assert after is not None
                total += 1
                exact += render_response(rule, shown[order_id], after, item.arguments) == item.observation
                shown[order_id] = after
            elif item.action == "get_order":
                assert json.dumps(shown[order_id]) == item.observation  # reads see the applied changes
            else:
                shown[order_id] = json.loads(item.observation)  # touch_order: not a learned write
    assert total > 10 and exact == total


def test_paths_round_trip() -> None:
    for keys in (["a"], ["address", "city"], ["odd.key", "x[1]"]):
        assert path_keys(path_of(keys)) == keys


# ------------------------------------------------------------------------------------------------ model and store
def test_tool_rule_validation_names_the_field() -> None:
    with pytest.raises(ValidationError, match="names the argument"):
        FieldChange(path="status", op="copy")
    with pytest.raises(ValidationError, match="selector and its response"):
        ToolRule(id="write:x", tool="x", kind="write")


def test_tool_rules_on_disk_and_patched(tmp_path: Any) -> None:
    store = WorldbookStore(tmp_path)
    old = store.save(Worldbook(name="plain"), parent=None)
    assert not (tmp_path / "plain" / "versions" / old.version / "tool_rules.jsonl").exists()
    rules = learn_tool_rules(tool_api.evidence(20))
    book = Worldbook(name="shop", tool_rules=rules)
    first = store.save(book, parent=None)
    loaded = store.load("shop")
    assert loaded.tool_rules == book.canonical().tool_rules
    patched = store.patch("shop", Patch(base=first.version, ops=[
        PatchOp(op="update_tool_rule", id="write:cancel_order", fields={"status": "deprecated"})]))
    again = store.load("shop", patched.version)
    assert next(r for r in again.tool_rules if r.tool == "cancel_order").status == RuleStatus.DEPRECATED
    with pytest.raises(ValueError, match="unknown fields"):
        store.patch("shop", Patch(base=patched.version, ops=[
            PatchOp(op="update_tool_rule", id="write:cancel_order", fields={"bogus": 1})]))
    assert Worldbook(name="plain").model_dump(mode="json").get("tool_rules") is None


def test_a_refund_summed_over_the_items_an_argument_names_and_refusals_ignored() -> None:
    evidence = []
    for e in range(5):
        items = [{"item_id": f"i{e}{k}", "price": 1.5 * (k + 1) + e} for k in range(3)]
        order = {"order_id": f"o{e}", "status": "delivered", "items": items, "payments": []}
        picked = [items[0]["item_id"], items[e % 2 + 1]["item_id"]]
        evidence.append(_ev(f"e{e}", 0, "get_order", {"order_id": f"o{e}"}, order))
        refund = round(items[0]["price"] + items[e % 2 + 1]["price"], 6)
        returned = {**order, "status": "returned", "payments": [{"kind": "refund", "amount": refund}]}
        evidence.append(_ev(f"e{e}", 1, "return_items", {"order_id": f"o{e}", "item_ids": picked}, returned))
        evidence.append(_ev(f"e{e}", 2, "return_items", {"order_id": f"o{e}", "item_ids": picked},
                            "Error: the order was returned already"))
    rule = _rules(evidence)["return_items"]
    assert rule.status == RuleStatus.SUPPORTED and rule.response and rule.response.kind == "record"
    [amount] = [p for p in _change(rule, "payments").fields if p.path == "amount"]
    assert (amount.op, amount.argument, amount.source) == ("sum", "item_ids", "items.price")
    before = json.loads(evidence[0].observation)
    after = apply_changes(rule, before, evidence[1].arguments)
    assert render_response(rule, before, after or {}, evidence[1].arguments) == evidence[1].observation
