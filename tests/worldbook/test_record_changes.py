"""What calls leave unchanged (`learn_unchanging`) and which filter values no record can match (`FieldValues`),
learned from hand-made evidence of a small API: accounts holding wallets and trips."""

from __future__ import annotations

from typing import Any

from helpers import tool_log
from worldsmith.worldbook.lookup_specs import Match, Projection
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.projections import FieldValues, project, render_projection
from worldsmith.worldbook.record_store import learn_unchanging


def _wallet(ident: str, amount: int) -> dict[str, Any]:
    return {"id": ident, "amount": amount}


def _pay_episode(source: str, target: str, before: int, after: int) -> list[tuple[str, dict[str, Any], Any]]:
    """Show both wallets, pay from `source` into `target`, show both again: the source stays, the target grows."""
    return [("get_wallet", {"wallet_id": source}, _wallet(source, 50)),
            ("get_wallet", {"wallet_id": target}, _wallet(target, before)),
            ("pay", {"from_id": source, "to_id": target}, "Paid."),
            ("get_wallet", {"wallet_id": source}, _wallet(source, 50)),
            ("get_wallet", {"wallet_id": target}, _wallet(target, after))]


def test_an_argument_whose_record_is_shown_the_same_after_the_call_is_unchanging() -> None:
    evidence = tool_log([_pay_episode("w_1", "w_2", 5, 15), _pay_episode("w_3", "w_4", 1, 11)])
    unchanging = learn_unchanging(evidence, readers={"get_wallet"})
    assert ("pay", "from_id") in unchanging  # the source wallet was shown unchanged after both payments
    assert ("pay", "to_id") not in unchanging  # the target changed
    assert ("get_wallet", "wallet_id") not in unchanging  # its own answer shows the record: nothing to vouch for


def test_one_sighting_is_not_enough_and_a_change_with_another_call_in_between_blames_neither() -> None:
    one = tool_log([_pay_episode("w_1", "w_2", 5, 15)])
    assert ("pay", "from_id") not in learn_unchanging(one, readers={"get_wallet"})  # once is not `min_support`
    assert ("pay", "from_id") in learn_unchanging(one, min_support=1, readers={"get_wallet"})
    # were the next call not a read, it could have changed what its own answer shows: no credit
    assert ("pay", "from_id") not in learn_unchanging(one, min_support=1, readers=set())
    # A look at the wallet between the payment and the next read: the change is not laid to either call, nor is
    # either credited with leaving it unchanged.
    mixed = [("get_wallet", {"wallet_id": "w_2"}, _wallet("w_2", 5)),
             ("pay", {"from_id": "w_1", "to_id": "w_2"}, "Paid."),
             ("audit", {"wallet_id": "w_2"}, "ok"),
             ("get_wallet", {"wallet_id": "w_2"}, _wallet("w_2", 15))]
    unchanging = learn_unchanging(tool_log([mixed, mixed]), readers={"get_wallet"})
    assert ("audit", "wallet_id") not in unchanging and ("pay", "to_id") not in unchanging


TRIP_STATES = ["booked", "done", "booked", "done", "cancelled", "cancelled"]


def _trips_evidence() -> list[Evidence]:
    """Six trips shown, each state held by two trips or more (a closed set), each with a unique code (open)."""
    return tool_log([[("get_trip", {"trip_id": f"tr_{i}"}, {"trip_id": f"tr_{i}", "state": state, "code": f"C{i}"})]
                 for i, state in enumerate(TRIP_STATES)])


def test_a_filter_value_outside_a_closed_set_of_field_values_matches_no_record() -> None:
    values = FieldValues(_trips_evidence())
    state = Match(argument="state", path=["state"], mode="exact")
    assert values.values("trip_id", ["state"]) is not None
    assert values.unmatchable("trip_id", state, "no_such_state")
    assert not values.unmatchable("trip_id", state, "booked")
    assert not values.unmatchable("trip_id", state, "lost", also=["lost"])  # this episode's record holds it
    code = Match(argument="code", path=["code"], mode="exact")
    assert values.values("trip_id", ["code"]) is None  # every code held once: the set may be open
    assert not values.unmatchable("trip_id", code, "C99")


def test_a_members_projection_leaves_out_unknown_children_no_record_could_match() -> None:
    rule = Projection(action="list_trips", argument="account_id", key="account_id", path=["trips"],
                      shape="members", child="trip_id",
                      filters=[Match(argument="state", path=["state"], mode="exact")])
    account = {"account_id": "ac_1", "trips": ["tr_8", "tr_9"]}
    known = {"tr_8": {"trip_id": "tr_8", "state": "booked"}}

    def child_of(key: str, ident: str) -> dict[str, Any] | None:
        return known.get(ident) if key == "trip_id" else None

    values = FieldValues(_trips_evidence())

    def unmatchable(key: str, match: Match, given: Any) -> bool:
        return values.unmatchable(key, match, given)

    # tr_9 is unknown: a state some trip may have leaves the answer untold, one no trip has is answered
    assert project(rule, account, child_of, {"account_id": "ac_1", "state": "done"}, unmatchable) is None
    assert project(rule, account, child_of, {"account_id": "ac_1", "state": "nope"}, unmatchable) == []
    assert project(rule, account, child_of, {"account_id": "ac_1", "state": "nope"}) is None  # no domain given
    assert render_projection(rule, account, child_of, {"account_id": "ac_1"}, unmatchable) == '["tr_8", "tr_9"]'
