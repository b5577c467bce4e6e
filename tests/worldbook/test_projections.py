"""Projection reads learned from hand-made evidence of a small API: a field's values, filtered child ids."""

from __future__ import annotations

import json
from typing import Any

from worldsmith.worldbook.lookup_rules import learn_lookup_rules
from worldsmith.worldbook.model import Evidence, RuleStatus
from worldsmith.worldbook.projections import learn_projections, render_projection
from worldsmith.worldbook.record_store import RecordStore
from worldsmith.worldbook.tool_rule_text import describe_tool_rule

WALLETS = {
    "ac_1": {"w_11": {"id": "w_11", "kind": "coin", "amount": 3}, "w_12": {"id": "w_12", "kind": "bill", "amount": 9}},
    "ac_2": {"w_21": {"id": "w_21", "kind": "coin", "amount": 5}},
    "ac_3": {"w_31": {"id": "w_31", "kind": "bill", "amount": 1}, "w_32": {"id": "w_32", "kind": "coin", "amount": 2}},
}
TRIPS = {"tr_1": "booked", "tr_2": "done", "tr_3": "booked", "tr_4": "done", "tr_5": "booked"}
OWNED = {"ac_1": ["tr_1", "tr_2"], "ac_2": ["tr_3"], "ac_3": ["tr_4", "tr_5"]}


def _account(account: str) -> dict[str, Any]:
    return {"account_id": account, "label": account.upper(), "wallets": WALLETS[account], "trips": OWNED[account]}


def _trip(trip: str) -> dict[str, Any]:
    return {"trip_id": trip, "state": TRIPS[trip], "seats": 2}


def _log(episodes: list[list[tuple[str, dict[str, Any], Any]]]) -> list[Evidence]:
    out = []
    for number, calls in enumerate(episodes):
        for index, (tool, arguments, answer) in enumerate(calls):
            text = answer if isinstance(answer, str) else json.dumps(answer)
            out.append(Evidence(turn_id=f"ep{number}#{index}", action=tool,
                                action_text=f"{tool}({arguments})", observation=text,
                                arguments=arguments))
    return out


def _episodes() -> list[list[tuple[str, dict[str, Any], Any]]]:
    """Per account: the account read, then its wallets and its trips (all, and by state) in another episode."""
    out: list[list[tuple[str, dict[str, Any], Any]]] = []
    for account in WALLETS:
        out.append([("get_account", {"account_id": account}, _account(account))]
                   + [("get_trip", {"trip_id": t}, _trip(t)) for t in OWNED[account]])
        for state in ("booked", "done"):
            out.append([
                ("list_wallets", {"account_id": account}, list(WALLETS[account].values())),
                ("trip_ids", {"account_id": account}, OWNED[account]),
                ("trip_ids", {"account_id": account, "state": state},
                 [t for t in OWNED[account] if TRIPS[t] == state]),
            ])
    return out


def test_values_of_an_object_field_and_filtered_child_ids_are_learned_with_support() -> None:
    evidence = _log(_episodes())
    rules = {r.action: r for r in learn_projections(evidence)}
    wallets, trips = rules["list_wallets"], rules["trip_ids"]
    assert (wallets.argument, wallets.key, wallets.path, wallets.shape) == ("account_id", "account_id", ["wallets"],
                                                                            "values")
    assert wallets.status == RuleStatus.SUPPORTED and wallets.support == 6 and wallets.contradicting == 0
    assert wallets.layout == (", ", ": ", False)
    assert (trips.path, trips.shape, trips.child) == (["trips"], "members", "trip_id")
    assert [(m.argument, m.path) for m in trips.filters] == [("state", ["state"])]
    assert trips.status == RuleStatus.SUPPORTED and trips.support == 12
    assert "get_account" not in rules and "get_trip" not in rules  # a whole record is a read, not a projection


def test_rendering_follows_the_record_the_children_and_the_arguments() -> None:
    evidence = _log(_episodes())
    rules = {r.action: r for r in learn_projections(evidence)}
    account = {**_account("ac_3"), "wallets": {"w_9": {"id": "w_9", "kind": "coin", "amount": 7}}}
    children = {"tr_4": _trip("tr_4"), "tr_5": {**_trip("tr_5"), "state": "done"}}

    def child(key: str, ident: str) -> dict[str, Any] | None:
        return children.get(ident) if key == "trip_id" else None

    assert render_projection(rules["list_wallets"], account, child, {"account_id": "ac_3"}) == \
        '[{"id": "w_9", "kind": "coin", "amount": 7}]'
    assert render_projection(rules["trip_ids"], account, child, {"account_id": "ac_3", "state": "done"}) == \
        '["tr_4", "tr_5"]'
    assert render_projection(rules["trip_ids"], account, child, {"account_id": "ac_3"}) == '["tr_4", "tr_5"]'
    children.pop("tr_5")  # a child the filter must test is unknown: no answer
    assert render_projection(rules["trip_ids"], account, child, {"account_id": "ac_3", "state": "done"}) is None


def test_answers_that_disagree_with_the_record_make_no_supported_rule() -> None:
    episodes = _episodes()
    for calls in episodes:  # every wallets answer leaves one wallet out: not what the record holds
        calls[:] = [(tool, arguments, answer[1:] if tool == "list_wallets" and len(answer) > 1 else answer)
                    for tool, arguments, answer in calls]
    rules = {r.action: r for r in learn_projections(_log(episodes))}
    assert "list_wallets" not in rules or rules["list_wallets"].status != RuleStatus.SUPPORTED


def test_a_tool_after_which_answers_go_wrong_leaves_the_record_unknown() -> None:
    """`add_wallet` changes the account's wallets and answers only "ok": the reads after it are not judged, and
    the rule names it, so a harness does not answer from the record until it is shown again."""
    episodes = _episodes()
    for account, wallets in WALLETS.items():
        grown = [*wallets.values(), {"id": f"w_{account}_new", "kind": "coin", "amount": 1}]
        episodes.append([("get_account", {"account_id": account}, _account(account)),
                         ("add_wallet", {"account_id": account, "kind": "coin"}, "ok"),
                         ("list_wallets", {"account_id": account}, grown)])
    rules = {r.action: r for r in learn_projections(_log(episodes))}
    wallets = rules["list_wallets"]
    assert wallets.status == RuleStatus.SUPPORTED and wallets.unsure_after == ["add_wallet"]
    assert wallets.contradicting == 0


def test_projection_rules_are_tool_rules_with_status_and_provenance() -> None:
    evidence = _log(_episodes())
    rules = [r for r in learn_lookup_rules(evidence, store=RecordStore.from_evidence(evidence))
             if r.kind == "projection"]
    by_tool = {r.tool: r for r in rules}
    rule = by_tool["list_wallets"]
    assert rule.id == "projection:list_wallets" and rule.executable and rule.projection is not None
    assert rule.provenance.supporting[:1] == ["ep1#0"] and rule.support == 6
    assert "values of its wallets" in rule.description
    assert describe_tool_rule(rule).startswith("list_wallets (projection): the account_id record named by account_id")
