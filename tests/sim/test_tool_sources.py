"""The query and precondition sources in a harness over a real build (episodes -> worldbook -> Harness)."""

from __future__ import annotations

import json
from pathlib import Path

from worldsmith.sim.harness import Harness
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.worldbook import BuildConfig, build_worldbook
from worldsmith.worldbook.templates import evidence_from_episodes

ROOT = Path(__file__).resolve().parents[2]
USERS = {
    "ann_lee_1": {"name": {"first_name": "Ann", "last_name": "Lee"}, "email": "ann@x.com"},
    "bob_ray_2": {"name": {"first_name": "Bob", "last_name": "Ray"}, "email": "bob@x.com"},
    "cy_lee_3": {"name": {"first_name": "Cy", "last_name": "Lee"}, "email": "cy@x.com"},
    "di_fox_4": {"name": {"first_name": "Di", "last_name": "Fox"}, "email": "di@x.com"},
}
ORDERS = {"#W1": "pending", "#W2": "delivered", "#W3": "pending", "#W4": "delivered"}


def _episode(index: int, calls: list[tuple[str, dict[str, object], object]]) -> Episode:
    turns = [Turn(index=i, action=Action(name=name, arguments=arguments,
                                         raw=f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"),
                  observation=Observation(text=answer if isinstance(answer, str) else json.dumps(answer)))
             for i, (name, arguments, answer) in enumerate(calls)]
    return Episode(id=f"shop-{index}", env_id="shop", task_id=f"task-{index}", turns=turns,
                   initial_observation=Observation(text="How can I help?"))


def _order(order_id: str, status: str | None = None) -> dict[str, object]:
    return {"order_id": order_id, "status": status or ORDERS[order_id], "total": 10}


def _episodes(repeats: int = 2) -> list[Episode]:
    out = []
    for index, ((user_id, user), order_id) in enumerate(zip(USERS.items(), ORDERS, strict=True)):
        for repeat in range(repeats):
            calls: list[tuple[str, dict[str, object], object]] = [
                ("find_user_id_by_email", {"email": user["email"]}, user_id),
                ("get_user_details", {"user_id": user_id}, user),
                ("get_order_details", {"order_id": order_id}, _order(order_id)),
            ]
            if ORDERS[order_id] == "pending":
                calls.append(("cancel_pending_order", {"order_id": order_id}, _order(order_id, "cancelled")))
            calls.append(("cancel_pending_order", {"order_id": order_id},
                          "Error: non-pending order cannot be cancelled"))
            calls.append(("find_user_id_by_email", {"email": f"nobody{index}{repeat}@y.org"}, "Error: user not found"))
            out.append(_episode(repeats * index + repeat, calls))
    return out


def _harness() -> Harness:
    return Harness(build_worldbook(_episodes(), name="shop", config=BuildConfig()).book)


def test_a_query_tool_is_answered_from_the_store_and_an_unmatched_one_empty() -> None:
    harness = _harness()
    demoted = {demotion.rule for demotion in harness.book.demotions}  # answer where the route table lets them
    kinds = {(rule.kind, rule.tool) for rule in harness.book.tool_rules if rule.executable or rule.id in demoted}
    assert {("query", "find_user_id_by_email"), ("empty", "find_user_id_by_email"),
            ("precondition", "cancel_pending_order")} <= kinds
    harness.start(_episode(99, []))
    found = harness.predict({"name": "find_user_id_by_email", "arguments": {"email": "di@x.com"}})
    assert found.observation == "di_fox_4" and found.audit.route == "state:query"
    assert [r["key"] for r in found.audit.records] == [["user_id", "di_fox_4"]]
    action = Action(name="find_user_id_by_email", arguments={"email": "zed@q.net"})
    proposals, _ = harness.proposals(action, action.name, dict(action.arguments))
    assert [(p.source, p.observation) for p in proposals if p.source.startswith("query")] == [
        ("query_empty", "Error: user not found")]  # judged by the route table only: a store may miss real users


def test_a_tentative_empty_answer_of_a_supported_query_is_proposed_for_the_route_table() -> None:
    """Each user met by one recording only: "no user matches" may be an unseen real user, so the empty rule stays
    tentative; it is still proposed (never trusted unmeasured), so the route table can judge it per tool."""
    harness = Harness(build_worldbook(_episodes(repeats=1), name="shop", config=BuildConfig()).book)
    rules = {(rule.kind, rule.tool): rule for rule in harness.book.tool_rules}
    assert rules[("query", "find_user_id_by_email")].executable
    assert not rules[("empty", "find_user_id_by_email")].executable
    harness.start(_episode(99, []))
    action = Action(name="find_user_id_by_email", arguments={"email": "zed@q.net"})
    proposals, _ = harness.proposals(action, action.name, dict(action.arguments))
    assert [(p.source, p.observation) for p in proposals if p.source.startswith("query")] == [
        ("query_empty", "Error: user not found")]
    # the episode answered this very call with a user: "nothing matches" is only the store's gap
    harness.start(_episode(98, [("find_user_id_by_email", {"email": "zed@q.net"}, "zed_9")]))
    proposals, _ = harness.proposals(action, action.name, dict(action.arguments))
    assert not [p for p in proposals if p.source == "query_empty"]


def test_a_precondition_answers_before_the_write_once_the_episode_shows_the_state() -> None:
    harness = _harness()
    harness.start(_episode(98, [("get_order_details", {"order_id": "#W3"}, _order("#W3")),
                                ("cancel_pending_order", {"order_id": "#W3"}, _order("#W3", "cancelled"))]))
    again = harness.predict({"name": "cancel_pending_order", "arguments": {"order_id": "#W3"}})
    assert again.observation == "Error: non-pending order cannot be cancelled"
    assert again.audit.route == "state:precondition" and again.outcome == "failure:precondition"
    assert again.audit.records[0]["key"] == ["order_id", "#W3"] and again.audit.records[0]["before"]["status"] == \
        "cancelled"  # the record the test read, for the audit
    harness.start(_episode(97, []))
    delivered = harness.predict({"name": "cancel_pending_order", "arguments": {"order_id": "#W4"}})
    assert delivered.observation == "Error: non-pending order cannot be cancelled"  # the store's initial version


def test_recorded_bfcl_episodes_learn_an_error_template_with_the_argument_slotted() -> None:
    from benchmarks.fidelity import _read

    episodes = [e for name in ("bfcl.jsonl", "bfcl_curious.jsonl")
                for e in _read(str(ROOT / "data_samples" / "collected" / name))]
    harness = Harness(build_worldbook(episodes, name="bfcl", config=BuildConfig()).book)
    rules = harness.source("lookups").preconditions.rules["cat"]
    assert rules and "{arg.file_name}" in rules[0].template
    cat = next(e for e in episodes if any(t.action.name == "cat" for t in e.turns))
    harness.start(cat.model_copy(update={"turns": []}))
    answer = harness.predict({"name": "cat", "arguments": {"file_name": "no_such_plover"}})
    assert answer.observation == '{"error": "cat: \'no_such_plover\': No such file or directory"}'
    assert len(evidence_from_episodes(episodes)) > 100


def test_recorded_toolshop_queries_answer_held_out_tasks_as_the_real_api() -> None:
    """Toolshop recordings (expert and probing), split by task: a query's answers on tasks the book never saw are
    the real answers wherever the source gives one."""
    from benchmarks.fidelity import _read, split_by_family

    episodes = [e for name in ("expert.jsonl", "probing.jsonl")
                for e in _read(str(ROOT / "data_samples" / "toolshop" / name))]
    construction, evaluation = split_by_family(episodes, 0.75)
    harness = Harness(build_worldbook(construction, name="toolshop", config=BuildConfig()).book)
    rules = {rule.id: rule for rule in harness.book.tool_rules}
    email = rules["query:find_user_id_by_email"]
    assert email.executable and email.query is not None
    assert [(m.argument, m.path) for m in email.query.matches] == [("email", ["email"])]
    answered = []
    for episode in evaluation:
        harness.start(episode.model_copy(update={"turns": []}))
        for turn in episode.turns:
            name, arguments, _ = harness.canonical(turn.action)
            answered += [(p.observation, turn.observation.text) for p in harness.proposals(turn.action, name,
                                                                                              arguments)[0]
                         if p.source == "query"]
            harness.observe(turn.action, turn.observation.text)
    assert len(answered) >= 3 and all(said == real for said, real in answered)


def _orders_world() -> list[Episode]:
    """Per task: read a user, their order, list their orders by user; a made-up user is refused by both tools."""
    out = []
    for index in range(8):
        user, order, ghost = f"u{index}x", f"#W{index}0", f"zz{index}q"
        out.append(_episode(index, [
            ("get_user", {"user_id": user}, {"user_id": user, "name": f"name {index}"}),
            ("get_order", {"order_id": order}, {"order_id": order, "user_id": user, "status": "pending"}),
            ("search_orders", {"user_id": user}, [order]),
            ("search_orders", {"user_id": ghost}, f"Error: user {ghost} not found"),
            ("get_user", {"user_id": ghost}, f"Error: user {ghost} not found"),
        ]))
    return out


def test_an_empty_answer_worded_as_the_refusal_of_a_user_the_episode_showed_is_not_proposed() -> None:
    """"nothing matches" learned as "user X not found" (the made-up users' answer) is wrong once the episode showed
    X exists: the store just lacks X's orders; a user never shown still gets it."""
    harness = Harness(build_worldbook(_orders_world(), name="orders", config=BuildConfig()).book)
    empty = next(r for r in harness.book.tool_rules if r.kind == "empty" and r.tool == "search_orders")
    assert empty.template == "Error: user {arg.user_id} not found"
    harness.start(_episode(99, [("get_user", {"user_id": "u77x"}, {"user_id": "u77x", "name": "name 77"})]))

    def empties(user: str) -> list[str]:
        action = Action(name="search_orders", arguments={"user_id": user})
        proposals, _ = harness.proposals(action, action.name, dict(action.arguments))
        return [p.observation for p in proposals if p.source == "query_empty"]

    assert empties("u77x") == []
    assert empties("zz77q") == ["Error: user zz77q not found"]
