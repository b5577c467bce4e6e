"""Tool rules read as one line and curated by hand: summaries of learned rules, and each edit as a patch op that
the store saves as a new, undoable version (and refuses when it does not fit the rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

import lookup_api
import tool_api
from worldsmith.worldbook import FieldChange, Patch, RuleStatus, ToolRule, Worldbook, WorldbookStore
from worldsmith.worldbook.lookup_rules import learn_lookup_rules
from worldsmith.worldbook.tool_rule_edits import change_status_op, drop_change_op, template_op, tool_rule_status_op
from worldsmith.worldbook.tool_rule_text import describe_change, describe_tool_rule
from worldsmith.worldbook.writes import apply_changes, learn_tool_rules


@pytest.fixture(scope="module")
def learned() -> dict[str, ToolRule]:
    return {rule.tool: rule for rule in learn_tool_rules(tool_api.evidence())}


@pytest.fixture(scope="module")
def lookups() -> dict[str, ToolRule]:
    """Query, empty and precondition rules learned from a shop log (`worldbook.lookup_rules`)."""
    return {rule.id: rule for rule in learn_lookup_rules(lookup_api.cancel_log().items)}


def test_a_learned_write_reads_as_its_selector_changes_and_answer(learned: dict[str, ToolRule]) -> None:
    assert describe_tool_rule(learned["cancel_order"]) == (
        "cancel_order selects order by order_id; copies reason → cancel_reason; appends payment_history entry "
        '(transaction_type, amount, payment_method_id); sets status="cancelled"; answers the updated record')
    assert describe_tool_rule(learned["modify_address"]) == (
        "modify_address selects order by order_id; builds address from address1, city, zip; "
        "answers {order_id, address}")
    assert describe_tool_rule(learned["return_items"]).endswith('; answers "Return requested."')


def test_changes_and_their_unsupported_parts_are_named() -> None:
    assert describe_change(FieldChange(path="balance", op="sub", argument="amount", status=RuleStatus.SUPPORTED)) \
        == "subtracts amount from balance"
    assert describe_change(FieldChange(path="refund", op="sum", argument="item_ids", source="items.price")) \
        == "sums items.price over item_ids → refund [tentative]"
    built = FieldChange(path="address", op="object", status=RuleStatus.SUPPORTED, fields=[
        FieldChange(path="city", op="copy", argument="city", status=RuleStatus.SUPPORTED),
        FieldChange(path="country", op="field", source="address.country", status=RuleStatus.SUPPORTED),
        FieldChange(path="kind", op="set", value="home", status=RuleStatus.SUPPORTED)])
    assert describe_change(built) == 'builds address from city, with country from address.country, kind="home"'


def test_lookup_rules_read_as_their_description_and_answer(lookups: dict[str, ToolRule]) -> None:
    assert describe_tool_rule(lookups["precondition:cancel_pending_order:2"]) == (
        "cancel_pending_order (precondition): order_id's status not in ['pending'] → "
        '"Error: non-pending order cannot be cancelled"')
    assert describe_tool_rule(lookups["empty:find_user_id_by_email"]).endswith('→ "Error: user not found"')


def test_each_edit_is_a_new_version_and_undo_restores_it(tmp_path: Path, learned: dict[str, ToolRule],
                                                        lookups: dict[str, ToolRule]) -> None:
    store = WorldbookStore(tmp_path / "worldbooks")
    refusal = lookups["precondition:cancel_pending_order:2"]
    first = store.save(Worldbook(name="shop", tool_rules=[*learned.values(), refusal])).version
    cancel = learned["cancel_order"]

    def patched(op, message: str) -> Worldbook:
        store.patch("shop", Patch(base=store.head("shop"), ops=[op], author="test", message=message))
        return store.load("shop")

    book = patched(tool_rule_status_op(cancel, "conflicted"), "refunds differ")
    assert next(r for r in book.tool_rules if r.id == cancel.id).status == RuleStatus.CONFLICTED
    book = patched(change_status_op(cancel, "cancel_reason", RuleStatus.DEPRECATED), "reason not kept")
    edited = next(r for r in book.tool_rules if r.id == cancel.id)
    assert [c.status for c in edited.changes if c.path == "cancel_reason"] == [RuleStatus.DEPRECATED]
    assert [c.path for c in edited.changes] == [c.path for c in cancel.changes]
    book = patched(drop_change_op(edited, "status"), "status is set by the warehouse")
    dropped = next(r for r in book.tool_rules if r.id == cancel.id)
    order = tool_api.initial_orders()["#W1000"]
    after = apply_changes(dropped, order, {"order_id": "#W1000", "reason": "no longer needed"})
    assert after is not None and after["status"] == "pending" and after["cancel_reason"] == "no longer needed"
    book = patched(template_op(refusal, "Error: order {arg.order_id} cannot be cancelled"), "wording")
    worded = next(r for r in book.tool_rules if r.id == refusal.id)
    assert worded.template == "Error: order {arg.order_id} cannot be cancelled"
    assert worded.precondition is not None and worded.precondition.template == worded.template  # what executes
    assert worded.precondition.test == "not_in_values" and worded.status == refusal.status
    assert len(store.history("shop")) == 5
    store.undo("shop", author="test")
    assert next(r for r in store.load("shop").tool_rules if r.id == refusal.id) == refusal
    assert next(r for r in store.load("shop", first).tool_rules if r.id == cancel.id) == cancel  # versions stay


def test_edits_that_do_not_fit_the_rule_are_refused(learned: dict[str, ToolRule],
                                                   lookups: dict[str, ToolRule]) -> None:
    cancel = learned["cancel_order"]
    with pytest.raises(ValueError, match="changes no field 'shipping'.*it changes cancel_reason"):
        drop_change_op(cancel, "shipping")
    with pytest.raises(ValueError, match="a write rule has no template"):
        template_op(cancel, "Cancelled.")
    empty = lookups["empty:find_user_id_by_email"]
    with pytest.raises(ValueError, match="the template is empty"):
        template_op(empty, "  ")
    with pytest.raises(ValueError, match="is a empty rule: it has no field changes"):
        change_status_op(empty, "x", "supported")
    with pytest.raises(ValueError):
        tool_rule_status_op(cancel, "promoted")
