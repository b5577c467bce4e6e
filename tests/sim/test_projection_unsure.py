"""When the projection source still knows a record after a call that names it: a call whose effect rule the
record tracker applies, an argument the evidence showed leaves its record unchanged, a filter value no record can
hold; and which tools the tracker counts as changing what they name. Real `RecordTracker` and `ProjectionSource`
over hand-made rules and evidence of a small accounts API (accounts holding wallets and trips)."""

from __future__ import annotations

import json
from typing import Any

from helpers import tool_log
from worldsmith.sim.sources.base import Step
from worldsmith.sim.sources.projections import ProjectionSource
from worldsmith.sim.sources.records import RecordTracker, _effectful
from worldsmith.traces.model import Action
from worldsmith.worldbook.lookup_specs import Match, Precondition, Projection
from worldsmith.worldbook.model import Evidence, RuleStatus
from worldsmith.worldbook.projections import FieldValues
from worldsmith.worldbook.toolrules import FieldChange, Selector, ToolRule

SUPPORTED = RuleStatus.SUPPORTED


def _wallet(ident: str, amount: int) -> dict[str, Any]:
    return {"id": ident, "amount": amount}


def _account(ident: str, wallets: list[dict[str, Any]], trips: list[str] = ()) -> dict[str, Any]:
    return {"account_id": ident, "wallets": {w["id"]: w for w in wallets}, "trips": list(trips)}


ACCOUNT = _account("ac_1", [_wallet("w_1", 5), _wallet("w_2", 7)], ["tr_1", "tr_2"])



def _rules() -> list[ToolRule]:
    wallets = Projection(action="list_wallets", argument="account_id", key="account_id", path=["wallets"],
                         shape="values", unsure_after=["add_wallet", "pay"], status=SUPPORTED, support=5)
    trips = Projection(action="find_trips", argument="account_id", key="account_id", path=["trips"],
                       shape="members", child="trip_id", status=SUPPORTED, support=5,
                       filters=[Match(argument="state", path=["state"], mode="exact")])
    add = ToolRule(id="effect:add_wallet", tool="add_wallet", kind="effect", status=SUPPORTED, support=5,
                   selector=Selector(argument="account_id", key="account_id"),
                   changes=[FieldChange(path="wallets", op="upsert", status=SUPPORTED)],
                   conditions=[{"answer_form": "json:list"}])
    return [ToolRule(id="projection:list_wallets", tool="list_wallets", kind="projection", status=SUPPORTED,
                     projection=wallets),
            ToolRule(id="projection:find_trips", tool="find_trips", kind="projection", status=SUPPORTED,
                     projection=trips), add]


def _source(unchanging: set[tuple[str, str]] = frozenset(), values: FieldValues | None = None) -> ProjectionSource:
    # the evidence teaches the tracker that `get_account` selects an account by `account_id`
    evidence = tool_log([[("get_account", {"account_id": "ac_1"}, ACCOUNT)],
                          [("get_account", {"account_id": "ac_9"}, _account("ac_9", []))]])
    tracker = RecordTracker(evidence, _rules())
    return ProjectionSource(_rules(), tracker, unchanging=set(unchanging), values=values)


def _step(name: str, arguments: dict[str, Any], turn: int = 1) -> Step:
    return Step(Action(name=name, arguments=arguments), name, arguments, name, turn, {})


def _observe(source: ProjectionSource, name: str, arguments: dict[str, Any], answer: Any) -> None:
    """Tell both the tracker and the projection source a committed call, as the harness does."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    source.tracker.observe(name, arguments, text)
    source.observe(_step(name, arguments), text)


def _answer(source: ProjectionSource, name: str, arguments: dict[str, Any]) -> str | None:
    proposals = source.propose(_step(name, arguments))
    return proposals[0].observation if proposals else None


def test_after_a_call_whose_effect_rule_applied_the_record_is_answered_with_the_change() -> None:
    source = _source()
    source.tracker.reset(), source.reset()
    _observe(source, "get_account", {"account_id": "ac_1"}, ACCOUNT)
    new_list = [_wallet("w_1", 5), _wallet("w_2", 7), _wallet("w_3", 0)]
    _observe(source, "add_wallet", {"account_id": "ac_1", "kind": "coin"}, new_list)
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) == json.dumps(new_list)


def test_a_refused_call_of_an_effect_tool_leaves_its_record_unsure() -> None:
    source = _source()
    source.tracker.reset(), source.reset()
    _observe(source, "get_account", {"account_id": "ac_1"}, ACCOUNT)
    _observe(source, "add_wallet", {"account_id": "ac_1", "kind": "coin"}, "Error: too many wallets")
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) is None


def test_an_unchanging_argument_leaves_the_record_it_names_known_and_another_does_not() -> None:
    source = _source(unchanging={("pay", "from_id")})
    source.tracker.reset(), source.reset()
    _observe(source, "get_account", {"account_id": "ac_1"}, ACCOUNT)
    _observe(source, "pay", {"from_id": "w_1", "amount": 3}, "Paid.")  # w_1 sits in ac_1: still known
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) == json.dumps(list(ACCOUNT["wallets"].values()))
    _observe(source, "pay", {"from_id": "w_1", "to_id": "w_2"}, "Paid.")  # w_2 may have changed
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) is None
    # without the evidence that `from_id` leaves its wallet as it was, the first payment already makes ac_1 unsure
    plain = _source()
    plain.tracker.reset(), plain.reset()
    _observe(plain, "get_account", {"account_id": "ac_1"}, ACCOUNT)
    _observe(plain, "pay", {"from_id": "w_1", "amount": 3}, "Paid.")
    assert _answer(plain, "list_wallets", {"account_id": "ac_1"}) is None


def test_records_an_unsure_tool_shows_in_its_answer_are_known_again() -> None:
    source = _source()
    source.tracker.reset(), source.reset()
    _observe(source, "get_account", {"account_id": "ac_1"}, ACCOUNT)
    _observe(source, "pay", {"from_id": "w_1", "to_id": "w_2"}, "Paid.")
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) is None
    # `add_wallet` is itself a tool after which answers go wrong, but its answer shows both wallets as they are
    # and its effect rule sets them in the account
    now = [_wallet("w_1", 2), _wallet("w_2", 10), _wallet("w_3", 0)]
    _observe(source, "add_wallet", {"account_id": "ac_1", "kind": "coin"}, now)
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) == json.dumps(now)


def test_a_record_whose_nested_record_was_shown_since_in_another_version_is_not_answered() -> None:
    source = _source()
    source.tracker.reset(), source.reset()
    _observe(source, "get_account", {"account_id": "ac_1"}, ACCOUNT)
    _observe(source, "get_wallet", {"wallet_id": "w_2"}, _wallet("w_2", 7))  # the same: the account stays known
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) == json.dumps(list(ACCOUNT["wallets"].values()))
    _observe(source, "get_wallet", {"wallet_id": "w_2"}, _wallet("w_2", 99))  # the account's copy is older
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) is None
    changed = _account("ac_1", [_wallet("w_1", 5), _wallet("w_2", 99)])
    _observe(source, "get_account", {"account_id": "ac_1"}, changed)
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) == json.dumps(list(changed["wallets"].values()))


def test_a_filter_value_no_trip_holds_answers_an_empty_list_though_the_trips_are_unknown() -> None:
    states = ["booked", "done", "booked", "done"]
    values = FieldValues(tool_log([[("get_trip", {"trip_id": f"tr_{i + 5}"},
                                      {"trip_id": f"tr_{i + 5}", "state": s})] for i, s in enumerate(states)]))
    source = _source(values=values)
    source.tracker.reset(), source.reset()
    _observe(source, "get_account", {"account_id": "ac_1"}, ACCOUNT)  # its trips tr_1, tr_2 never shown
    assert _answer(source, "find_trips", {"account_id": "ac_1", "state": "lost"}) == "[]"
    assert _answer(source, "find_trips", {"account_id": "ac_1", "state": "done"}) is None
    assert _answer(source, "find_trips", {"account_id": "ac_1"}) == json.dumps(["tr_1", "tr_2"])
    # a state this episode's own trip shows is one a trip can hold
    _observe(source, "get_trip", {"trip_id": "tr_1"}, {"trip_id": "tr_1", "state": "lost"})
    assert _answer(source, "find_trips", {"account_id": "ac_1", "state": "lost"}) is None


def _change_log(between: list[tuple[str, dict[str, Any], Any]]) -> list[Evidence]:
    """Two episodes: an account shown, the calls `between`, the account shown again with a new wallet."""
    before = _account("ac_1", [_wallet("w_1", 5)])
    after = _account("ac_1", [_wallet("w_1", 5), _wallet("w_2", 0)])
    calls = [("get_account", {"account_id": "ac_1"}, before), *between, ("get_account", {"account_id": "ac_1"}, after)]
    return tool_log([calls, calls])


def test_a_change_is_laid_to_the_one_call_that_named_the_record_since_it_was_shown() -> None:
    write = ("open_wallet", {"account_id": "ac_1"}, "Done.")
    look = ("count_wallets", {"account_id": "ac_1"}, "1")
    assert _effectful(_change_log([write]), known={"get_account"}, reads={"get_account"}) == {"open_wallet"}
    # a look between the write and the next read: neither is blamed on that evidence alone
    assert _effectful(_change_log([write, look]), known={"get_account"}, reads={"get_account"}) == set()
    # a call naming a wallet inside the account also named the account: the look is not blamed
    nested = ("touch_wallet", {"wallet_id": "w_1"}, "Done.")
    assert _effectful(_change_log([look, nested]), known={"get_account"}, reads={"get_account"}) == set()
    # a write whose own answer shows the changed account shares the blame with the look before it
    shown = ("open_wallet", {"account_id": "ac_1"}, _account("ac_1", [_wallet("w_1", 5), _wallet("w_2", 0)]))
    log = tool_log([[("get_account", {"account_id": "ac_1"}, _account("ac_1", [_wallet("w_1", 5)])), look, shown]] * 2)
    assert _effectful(log, known={"get_account"}, reads={"get_account"}) == set()


def test_a_call_refused_with_its_learned_precondition_error_leaves_its_record_known() -> None:
    """Preconditions are checked before effects: a call answered with one of its tool's learned precondition
    errors changed nothing (an unlearned error text still makes the record unsure, as above)."""
    template = "Error: wallet {arg.from_id} is empty"
    refusal = ToolRule(id="precondition:pay:1", tool="pay", kind="precondition", status=SUPPORTED, support=5,
                       template=template, precondition=Precondition(
                           action="pay", test="less_than", argument="from_id", path=["amount"], other="amount",
                           template=template, status=SUPPORTED, support=5))
    evidence = tool_log([[("get_account", {"account_id": "ac_1"}, ACCOUNT)],
                          [("get_account", {"account_id": "ac_9"}, _account("ac_9", []))]])
    source = ProjectionSource(_rules(), RecordTracker(evidence, _rules()), refusals=[*_rules(), refusal])
    source.tracker.reset(), source.reset()
    _observe(source, "get_account", {"account_id": "ac_1"}, ACCOUNT)
    _observe(source, "pay", {"from_id": "w_1", "amount": 3}, "Error: wallet w_1 is empty")
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) == json.dumps(list(ACCOUNT["wallets"].values()))
    _observe(source, "pay", {"from_id": "w_1", "amount": 3}, "Error: wallet w_1 is frozen")  # not learned
    assert _answer(source, "list_wallets", {"account_id": "ac_1"}) is None
