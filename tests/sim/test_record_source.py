"""The tool-API record source in the harness: writes answered from the selected record with the learned changes,
reads of a changed record answered with the change, first reads from the entity store; on a small order backend
and on BFCL's real TradingBot backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tool_api
from worldsmith.sim import build_simulator_book
from worldsmith.sim.harness import Harness
from worldsmith.sim.sources.records import RecordTracker
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.worldbook import Worldbook
from worldsmith.worldbook.record_store import RecordStore
from worldsmith.worldbook.writes import learn_tool_rules


def _book(episodes: int = 30) -> Worldbook:
    evidence = tool_api.evidence(episodes)
    return Worldbook(name="shop", evidence=evidence, tool_rules=learn_tool_rules(evidence))


def _prefix(turns: list[tuple[str, dict, str]], task: str = "t") -> Episode:
    return Episode(id="live", task_id=task, initial_observation=Observation(text=""),
                   turns=[Turn(index=i, action=Action(name=n, arguments=a), observation=Observation(text=o))
                          for i, (n, a, o) in enumerate(turns)])


def test_write_answered_from_the_record_with_the_learned_changes() -> None:
    harness = Harness(_book())
    order = tool_api.initial_orders()["#W1003"]
    harness.start(_prefix([("get_order", {"order_id": "#W1003"}, json.dumps(order))]))
    prediction = harness.predict(Action(name="cancel_order", arguments={"order_id": "#W1003", "reason": "why not"}))
    answer = json.loads(prediction.observation)
    assert answer["status"] == "cancelled" and answer["cancel_reason"] == "why not"
    assert answer["payment_history"][-1] == {"transaction_type": "refund", "amount": 18.0,
                                             "payment_method_id": "card_0"}
    assert prediction.audit.route == "state:record_write"
    assert prediction.audit.records[0]["key"] == "order_id=#W1003"
    assert prediction.audit.records[0]["before"]["status"] == "pending"
    assert prediction.audit.records[0]["after"]["status"] == "cancelled"


def test_read_after_a_text_answered_write_shows_the_change() -> None:
    harness = Harness(_book())
    order = tool_api.initial_orders()["#W1005"]
    harness.start(_prefix([("get_order", {"order_id": "#W1005"}, json.dumps(order)),
                           ("return_items", {"order_id": "#W1005", "item_ids": ["it5a"]}, "Return requested.")]))
    prediction = harness.predict(Action(name="get_order", arguments={"order_id": "#W1005"}))
    shown = json.loads(prediction.observation)
    assert shown["status"] == "return requested" and shown["return_items"] == [order["items"][0]]
    assert prediction.audit.route == "state:record_read"


def test_records_and_lookups_share_one_store_built_once_per_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    book = _book()
    built: list[RecordStore] = []
    original = RecordStore.from_evidence.__func__  # type: ignore[attr-defined]

    def counting(cls: type[RecordStore], *args: Any, **kwargs: Any) -> RecordStore:
        built.append(original(cls, *args, **kwargs))
        return built[-1]

    monkeypatch.setattr(RecordStore, "from_evidence", classmethod(counting))
    harness = Harness(book)
    lookups = harness.source("lookups")
    assert len(built) == 1 and harness.source("records").tracker.store is built[0]
    assert lookups.queries.view.store is built[0] is lookups.preconditions.view.store


def test_first_read_from_the_store_and_a_refused_write_changes_nothing() -> None:
    tracker = RecordTracker(tool_api.evidence(30), learn_tool_rules(tool_api.evidence(30)))
    tracker.reset()
    [proposal] = tracker.propose("get_order", {"order_id": "#W1002"})
    stored = json.loads(proposal.observation)
    assert proposal.source == "record_store" and stored["order_id"] == "#W1002" and stored["status"] == "pending"
    tracker.observe("return_items", {"order_id": "#W1002", "item_ids": ["it2a"]}, "Error: order not delivered")
    [again] = tracker.propose("get_order", {"order_id": "#W1002"})
    assert json.loads(again.observation)["status"] == "pending"
    [unseen] = tracker.propose("get_order", {"order_id": "#nobody"})  # never shown, and no evidence of absent ids
    assert unseen.source == "record_invented" and json.loads(unseen.observation)["order_id"] == "#nobody"
    assert unseen.records[0]["origin"] == "invented"


# TradingBot entries whose curious recordings cancel orders (the policy reads again after writes)
TRADING = ["multi_turn_base_102", "multi_turn_base_107", "multi_turn_base_108", "multi_turn_base_109",
           "multi_turn_base_110", "multi_turn_base_112", "multi_turn_base_118", "multi_turn_base_119",
           "multi_turn_base_120", "multi_turn_base_122", "multi_turn_base_123", "multi_turn_base_124"]


@pytest.mark.integration
def test_bfcl_recorded_cancel_is_learned_and_answers_the_real_backend() -> None:
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed")
    pytest.importorskip("mpmath", reason="bfcl-eval's MathAPI needs mpmath")
    from worldsmith.envs import make, record_episode
    from worldsmith.envs.policies import CuriousPolicy

    env = make("bfcl")
    recorded = [record_episode(env, CuriousPolicy(seed=seed, read_after_write=0.4), task, seed=seed,
                               episode_id=f"{task}-curious-{seed}") for task in TRADING for seed in (0, 1)]
    book = build_simulator_book(recorded, name="bfcl", route_folds=3).book
    [cancel] = [rule for rule in book.tool_rules if rule.tool == "cancel_order"]
    assert cancel.executable and cancel.response is not None and cancel.response.kind == "fields"
    assert {c.path: (c.op, c.value) for c in cancel.changes}["status"] == ("set", "Cancelled")
    env.reset("multi_turn_base_102")  # a new order on a task's backend: values no recording showed
    calls = [("place_order", {"order_type": "Buy", "symbol": "NVDA", "price": 210.5, "amount": 7}),
             ("get_order_details", {"order_id": 12446}), ("cancel_order", {"order_id": 12446}),
             ("get_order_details", {"order_id": 12446})]
    real = [(name, arguments, env.step(Action(name=name, arguments=arguments)).observation.text)
            for name, arguments in calls]
    assert json.loads(real[3][2])["status"] == "Cancelled"
    harness = Harness(book)
    harness.start(_prefix(real[:2], task="multi_turn_base_102"))
    action = Action(name="cancel_order", arguments={"order_id": 12446})
    proposals, _ = harness.proposals(action, "cancel_order", {"order_id": 12446})
    [write] = [p for p in proposals if p.source == "record_write"]
    assert write.observation == real[2][2] == harness.predict(action).observation  # a rule's template may answer
    assert write.records[0]["before"]["status"] == "Open" and write.records[0]["after"]["status"] == "Cancelled"
    harness.start(_prefix(real[:3], task="multi_turn_base_102"))  # the read of the record the write changed
    prediction = harness.predict(Action(name="get_order_details", arguments={"order_id": 12446}))
    assert prediction.observation == real[3][2], prediction.audit
    assert prediction.audit.route == "state:record_read"
    assert prediction.audit.records and prediction.audit.records[0]["after"]["symbol"] == "NVDA"


def test_no_read_from_a_record_a_call_of_unknown_effect_named_since() -> None:
    evidence = []
    for e in range(4):
        order = {"order_id": f"o{e}", "note": "-"}
        evidence += [_ev_text(f"e{e}", 0, "get_order", {"order_id": f"o{e}"}, json.dumps(order)),
                     _ev_text(f"e{e}", 1, "scribble", {"order_id": f"o{e}"}, "ok"),
                     _ev_text(f"e{e}", 2, "get_order", {"order_id": f"o{e}"}, json.dumps({**order, "note": f"x{e * 7}"}))]
    tracker = RecordTracker(evidence, learn_tool_rules(evidence))
    assert "scribble" in tracker.effectful and not tracker.executable
    tracker.reset()
    tracker.observe("get_order", {"order_id": "o9"}, json.dumps({"order_id": "o9", "note": "-"}))
    assert [p.source for p in tracker.propose("get_order", {"order_id": "o9"})] == ["record_read"]
    tracker.observe("scribble", {"order_id": "o9"}, "ok")
    assert tracker.propose("get_order", {"order_id": "o9"}) == []


def _ev_text(episode: str, index: int, tool: str, arguments: dict, observation: str) -> Any:
    from worldsmith.worldbook.model import Evidence

    return Evidence(turn_id=f"{episode}#{index}", action=tool, arguments=arguments,
                    action_text=f"{tool}({json.dumps(arguments)})", observation=observation)
