"""The toolshop environment: its seeded database, tools, tasks and expert (real env, in-process, fast)."""

from __future__ import annotations

import json
import random

import pytest

from worldsmith.envs import (
    EnvError,
    ExpertPolicy,
    ProbingPolicy,
    UnknownTaskError,
    check_env,
    make,
    make_policy,
    record_episode,
)
from worldsmith.envs.toolshop import ToolshopEnv, base_db, is_error_text, task_book, tool_schemas
from worldsmith.envs.toolshop.db import Store
from worldsmith.envs.toolshop.tools import run_tool
from worldsmith.traces.model import Action


@pytest.fixture(scope="module")
def env() -> ToolshopEnv:
    environment = make("toolshop")
    assert isinstance(environment, ToolshopEnv)
    return environment


def _task_of_kind(kind: str, db: int = 0, **said: object) -> tuple[str, object]:
    """The first single-goal task of a kind (whose goal says `said`, where given)."""
    book = task_book(db)
    for index in range(2000):
        spec = book.spec(index)
        if [goal.kind for goal in spec.goals] == [kind] and said.items() <= spec.goals[0].said.items():
            return f"db={db}:task={index}", spec
    raise AssertionError(f"no single-goal {kind} task in the first 2000")


def _user_with(predicate) -> dict:
    return next(user for user in base_db(0).users.values() if predicate(user))


def test_check_env_passes(env: ToolshopEnv) -> None:
    check_env(env, "db=0:task=5")


def test_database_is_determined_by_its_seed() -> None:
    again = base_db.__wrapped__(0)  # built anew, not the cached one
    assert again == base_db(0)
    other = base_db(1)
    assert set(other.users) != set(base_db(0).users)
    db = base_db(0)
    assert len(db.users) == 300 and 2 * len(db.users) <= len(db.orders) <= 3 * len(db.users)
    assert len(db.products) >= 30 and len(db.tickets) >= 100
    statuses = {order["status"] for order in db.orders.values()}
    assert {"pending", "processed", "shipped", "delivered", "cancelled", "return requested"} <= statuses
    kinds = {method["kind"] for user in db.users.values() for method in user["payment_methods"].values()}
    assert kinds == {"card", "gift_card", "paypal"}


def test_tasks_are_many_distinct_and_stable(env: ToolshopEnv) -> None:
    tasks = env.tasks()
    assert len(tasks) == len(set(tasks)) == 20_000 and tasks[0] == "db=0:task=0"
    book = task_book(0)
    specs = [book.spec(index) for index in range(3000)]
    assert len({spec.signature() for spec in specs}) == 3000
    kinds = {goal.kind for spec in specs for goal in spec.goals}
    assert len(kinds) == 14 and any(len(spec.goals) == 2 for spec in specs)
    first, _ = env.reset("db=0:task=17")
    second, _ = ToolshopEnv().reset("db=0:task=17")
    assert first.text == second.text
    assert ToolshopEnv(dbs=[0, 3], tasks_per_db=5).tasks()[5] == "db=3:task=0"
    with pytest.raises(UnknownTaskError, match="db=0:task=123"):
        env.reset("task=5")
    with pytest.raises(UnknownTaskError, match="beyond"):
        env.reset("db=0:task=20000")


def test_expert_wins_every_sampled_task(env: ToolshopEnv) -> None:
    rng = random.Random(7)
    tasks = [f"db={db}:task={rng.randrange(size)}" for db, size in ((0, 20_000), (1, 2_000)) for _ in range(100)]
    lost, refused = [], []
    for task in tasks:
        episode = record_episode(env, ExpertPolicy(), task, max_steps=40)
        if not episode.success:
            lost.append((task, episode.metadata))
        names = [turn.action.name for turn in episode.turns]
        assert names[0].startswith("find_user_id_by_") and names[1] == "get_user"  # query, read, then the rest
        refused.extend(turn.observation.text for turn in episode.turns if turn.info["error"])
    assert lost == []
    # the only failures an expert meets: customers asking for what the shop refuses (and the gold is no change)
    assert set(refused) <= {"Error: non-pending order cannot be cancelled", "Error: gift card balance is not enough"}


def test_an_episode_is_reproducible(env: ToolshopEnv) -> None:
    one = record_episode(env, ExpertPolicy(), "db=0:task=40")
    two = record_episode(env, ExpertPolicy(), "db=0:task=40")
    assert [(t.action.name, t.observation.text, t.state) for t in one.turns] == \
           [(t.action.name, t.observation.text, t.state) for t in two.turns]


def test_a_write_changes_state_a_reread_shows_it_and_the_next_episode_starts_fresh(env: ToolshopEnv) -> None:
    task, spec = _task_of_kind("cancel", pending=True)
    order_id = spec.goals[0].gold["order_id"]
    env.reset(task)
    before = json.loads(env.step(Action(name="get_order", arguments={"order_id": order_id})).observation.text)
    assert before["status"] == "pending"
    written = env.step(Action(name="cancel_order", arguments={"order_id": order_id, "reason": "no longer needed"}))
    assert written.info == {"tool": "cancel_order", "write": True, "error": False}
    after = json.loads(written.observation.text)
    assert after["status"] == "cancelled" and after["cancel_reason"] == "no longer needed"
    charged = sum(p["amount"] for p in before["payments"] if p["kind"] == "charge")
    assert sum(p["amount"] for p in after["payments"] if p["kind"] == "refund") == pytest.approx(charged)
    assert json.loads(env.step(f"get_order(order_id='{order_id}')").observation.text) == after
    assert env.step(f"get_order_status('{order_id}')").observation.text == \
        f'{{"order_id":"{order_id}","status":"cancelled"}}'
    state = env.state()
    assert state["changed"]["orders"][order_id]["status"] == "cancelled"
    state["changed"]["orders"][order_id]["status"] = "tampered"
    state["user"]["email"] = "tampered"
    assert env.state()["changed"]["orders"][order_id]["status"] == "cancelled"  # a copy, not the store's records
    assert "tampered" not in json.dumps(env.state())
    again = env.step(Action(name="cancel_order", arguments={"order_id": order_id, "reason": "no longer needed"}))
    assert again.observation.text == "Error: non-pending order cannot be cancelled" and again.info["error"] is True
    env.reset(task)
    assert json.loads(env.step(f"get_order('{order_id}')").observation.text)["status"] == "pending"
    assert base_db(0).orders[order_id]["status"] == "pending"  # the shared database never changes


def test_gift_card_arithmetic_and_balance_errors() -> None:
    user = _user_with(lambda u: any(m["kind"] == "gift_card" for m in u["payment_methods"].values())
                      and any(m["kind"] == "card" for m in u["payment_methods"].values()))
    gift = next(m for m in user["payment_methods"].values() if m["kind"] == "gift_card")
    card = next(m for m in user["payment_methods"].values() if m["kind"] == "card")
    store = Store(base_db(0))
    topped = json.loads(run_tool(store, "top_up_gift_card", {"user_id": user["user_id"], "gift_card_id": gift["id"],
                                                             "amount": 12.5, "source_payment_method_id": card["id"]}))
    assert topped["balance"] == round(gift["balance"] + 12.5, 2)
    expensive = max((v for p in base_db(0).products.values() for v in p["variants"].values() if v["available"]),
                    key=lambda v: v["price"])
    if expensive["price"] > topped["balance"]:
        text = run_tool(store, "place_order", {"user_id": user["user_id"], "item_ids": [expensive["item_id"]],
                                               "payment_method_id": gift["id"]})
        assert text == "Error: gift card balance is not enough"
    too_much = run_tool(store, "top_up_gift_card", {"user_id": user["user_id"], "gift_card_id": gift["id"],
                                                    "amount": 501, "source_payment_method_id": card["id"]})
    assert too_much == "Error: amount must be between 1 and 500"
    by_gift = run_tool(store, "top_up_gift_card", {"user_id": user["user_id"], "gift_card_id": gift["id"],
                                                   "amount": 5, "source_payment_method_id": gift["id"]})
    assert by_gift == "Error: top-ups must be paid by card"


def test_failures_have_their_documented_texts() -> None:
    store = Store(base_db(0))
    user = next(iter(base_db(0).users.values()))
    delivered = next(o for o in base_db(0).orders.values() if o["status"] == "delivered")
    cases = {
        ("get_order", '{"order_id": "#O1"}'): "Error: order #O1 not found",
        ("get_user", '{"user_id": "cu_nobody"}'): "Error: user cu_nobody not found",
        ("get_item", '{"item_id": "123"}'): "Error: item 123 not found",
        ("find_user_id_by_email", '{"email": "nobody@nowhere.test"}'): "Error: user not found",
        ("cancel_order", json.dumps({"order_id": delivered["order_id"], "reason": "ordered by mistake"})):
            "Error: non-pending order cannot be cancelled",
        ("return_order_items", json.dumps({"order_id": delivered["order_id"], "item_ids": [delivered["items"][0]["item_id"]],
                                           "payment_method_id": "pm_none"})): "payment method not found",
        ("return_order_items", json.dumps({"order_id": delivered["order_id"], "item_ids": ["00000000"],
                                           "payment_method_id": "pm_none"})):
            f"Error: item 00000000 not in order {delivered['order_id']}",
        ("remove_payment_method", json.dumps({"user_id": user["user_id"], "payment_method_id": "pm_x"})):
            "payment method not found",
        ("frobnicate", "{}"): "Error: unknown tool 'frobnicate'",
        ("get_order", "{}"): "Error: missing argument 'order_id'",
        ("get_order", '{"order_id": 5}'): "Error: argument 'order_id' must be a string",
        ("get_order", '{"order_id": "#O1", "verbose": true}'): "Error: unexpected argument 'verbose'",
    }
    for (name, arguments), expected in cases.items():
        text = run_tool(store, name, json.loads(arguments))
        assert text == expected, (name, arguments)
        assert is_error_text(text)
    assert not any(store.changed.values())  # no failed call changed anything


def test_queries_find_nothing_as_empty_lists_or_not_found() -> None:
    store = Store(base_db(0))
    user = next(iter(base_db(0).users.values()))
    assert run_tool(store, "search_orders", {"user_id": user["user_id"], "status": "exchange requested"}) == "[]"
    assert run_tool(store, "search_products", {"query": "flux capacitor"}) == "[]"
    assert run_tool(store, "search_products", {"min_price": 10_000}) == "[]"
    lamps = json.loads(run_tool(store, "search_products", {"query": "lamp", "max_price": 100}))
    assert [p["name"] for p in lamps] == ["Desk Lamp"]
    found = run_tool(store, "find_user_id_by_name_zip", {"first_name": user["name"]["first"].upper(),
                                                         "last_name": user["name"]["last"], "zip": user["address"]["zip"]})
    assert found == user["user_id"]
    assert run_tool(store, "find_user_id_by_name_zip", {"first_name": user["name"]["first"],
                                                        "last_name": user["name"]["last"], "zip": "00000"}) == \
        "Error: user not found"
    moved = {"line1": "1 Test St", "line2": "", "city": "Reno", "state": "NV", "zip": "89501"}
    run_tool(store, "modify_user_address", {"user_id": user["user_id"], **moved})
    assert run_tool(store, "find_user_id_by_name_zip", {"first_name": user["name"]["first"],
                                                        "last_name": user["name"]["last"], "zip": "89501"}) == user["user_id"]


def test_a_reply_without_the_work_loses_and_ends_the_episode(env: ToolshopEnv) -> None:
    task, _ = _task_of_kind("top_up")
    env.reset(task)
    result = env.step(Action(name="respond", arguments={"text": "Done!"}))
    assert result.terminated and result.reward == 0.0 and result.info["won"] is False
    assert result.info["record"] is False and result.info["wrong_records"]
    with pytest.raises(EnvError, match="is over"):
        env.step("get_user('x')")
    task, spec = _task_of_kind("gift_balance")
    env.reset(task)
    result = env.step(Action(name="respond", arguments={"text": "Your balance is $1,000,000."}))
    assert result.info["won"] is False and result.info["missing_answers"]


def test_tools_have_openai_schemas() -> None:
    schemas = tool_schemas()
    assert 18 <= len(schemas) <= 25
    for schema in schemas:
        function = schema["function"]
        assert schema["type"] == "function" and function["description"]
        assert set(function["parameters"]["required"]) <= set(function["parameters"]["properties"])
    schemas[0]["function"]["parameters"]["properties"].clear()
    assert tool_schemas()[0]["function"]["parameters"]["properties"]  # a copy each time


# --------------------------------------------------------------------------------------------
# The probing policy
# --------------------------------------------------------------------------------------------

_BAD_STATE = ("Error: non-pending order cannot be cancelled", "Error: non-delivered order cannot be",
              "is already closed", "payment method not found", "Error: card already on file",
              "Error: amount must be between", "Error: gift card balance is not enough")


def _probe(env, tasks: list[str], max_steps: int) -> tuple[list, list[list[str]]]:
    episodes, choices = [], []
    for task in tasks:
        policy = make_policy("probing", seed=0)
        episodes.append(record_episode(env, policy, task, max_steps=max_steps))
        choices.append(list(policy.choices))
    return episodes, choices


def _rereads(episode) -> int:
    """Successful writes followed within three calls by a read of what the write named or answered."""
    count = 0
    for position, write in enumerate(episode.turns):
        if not write.info.get("write") or write.info["error"]:
            continue
        named = set(map(str, write.action.arguments.values())) | set(map(str, _fields(write.observation.text)))
        count += any(after.action.name.startswith(("get_", "search_", "list_")) and after.action.arguments
                     and set(map(str, after.action.arguments.values())) <= named
                     for after in episode.turns[position + 1:position + 4])
    return count


def _fields(text: str) -> list:
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [item for item in value.values() if isinstance(item, str)] if isinstance(value, dict) else []


def test_probing_on_toolshop_rereads_finds_nothing_and_fails(env: ToolshopEnv) -> None:
    episodes, choices = _probe(env, [f"db=0:task={index}" for index in range(60)], 40)
    assert {choice for run in choices for choice in run} == {"expert", "reread", "query", "fail"}
    texts = [turn.observation.text for episode in episodes for turn in episode.turns]
    assert sum(_rereads(episode) for episode in episodes) >= 20
    assert texts.count("[]") >= 10
    assert sum("not found" in text for text in texts) >= 30
    bad_state = [text for text in texts if any(marker in text for marker in _BAD_STATE)]
    assert len(bad_state) >= 10 and len({text[:30] for text in bad_state}) >= 3
    assert all(episode.metadata.get("error") is None for episode in episodes)
    assert all(episode.metadata["terminated"] for episode in episodes)  # every one ends with the reply
    assert sum(bool(episode.success) for episode in episodes) >= 50  # probes rarely spoil the goal
    again, _ = _probe(env, ["db=0:task=3"], 40)
    assert [t.action for t in again[0].turns] == [t.action for t in episodes[3].turns]  # seeded


def test_probing_policy_options() -> None:
    policy = make_policy("probing", seed=1, options={"fail": 0.5, "probes_before_respond": 4})
    assert isinstance(policy, ProbingPolicy) and policy.weights["fail"] == 0.5
    with pytest.raises(ValueError, match="probing policy"):
        make_policy("probing", options={"curiosity": 1})
    with pytest.raises(ValueError, match=">= 0"):
        ProbingPolicy(expert=-1)


def test_probing_on_bfcl_rereads_and_fails() -> None:
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed")
    pytest.importorskip("mpmath")
    bfcl = make("bfcl")
    tasks = ["multi_turn_base_1", "multi_turn_base_15", "multi_turn_base_51", "multi_turn_base_102",
             "multi_turn_base_151"]
    episodes, choices = _probe(bfcl, tasks, 100)
    assert {"expert", "reread", "query", "fail"} <= {choice for run in choices for choice in run}
    errors = [turn for episode in episodes for turn in episode.turns if turn.info["error"]]
    assert len(errors) >= 10
    assert any("No such file or directory" in turn.observation.text for turn in errors)  # a missing name
    assert any("missing" in turn.observation.text and "required" in turn.observation.text for turn in errors)
    assert all(episode.metadata["terminated"] for episode in episodes)  # the expert's hand-overs still come


# --------------------------------------------------------------------------------------------
# Conversations and samples
# --------------------------------------------------------------------------------------------


def test_conversations_are_agent_transcripts_that_ingest(tmp_path, capsys) -> None:
    from worldsmith.cli.main import main
    from worldsmith.envs.toolshop.conversations import conversations
    from worldsmith.workspace import Workspace

    records = conversations(20, db=0, seed=3, toolless_rate=0.1)
    assert records == conversations(20, db=0, seed=3, toolless_rate=0.1)  # deterministic
    toolless = [r for r in records if not any(m.get("tool_calls") for m in r["messages"])]
    assert len(toolless) == 2
    for record in records:
        messages = record["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[-1]["role"] == "assistant"
        calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        results = [m for m in messages if m["role"] == "tool"]
        assert [c["id"] for c in calls] == [m["tool_call_id"] for m in results]
        for call in calls:
            assert call["function"]["name"] in {t["function"]["name"] for t in record["tools"]}
            json.loads(call["function"]["arguments"])
    path = tmp_path / "shop.openai.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    root = str(tmp_path / "ws")
    assert main(["ingest", str(path), "--dataset", "shop", "--workspace", root, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["files"][0]["format"] == "openai"
    assert summary["episodes"] >= 18  # the tool-less two may be rejected until dialogue-only episodes import
    with_tools = {r["id"]: r for r in records if r not in toolless}
    dataset = Workspace(tmp_path / "ws").dataset("shop")
    for episode in dataset.iter_episodes():
        if episode.id in with_tools:
            record = with_tools[episode.id]
            tool_texts = [m["content"] for m in record["messages"] if m["role"] == "tool"]
            assert [turn.observation.text for turn in episode.turns] == tool_texts
    assert {e.id for e in dataset.iter_episodes()} >= set(with_tools)


def test_committed_samples_are_small_and_regenerable() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "data_samples"
    for name, lines in (("toolshop/expert.jsonl", 30), ("toolshop/probing.jsonl", 30),
                        ("toolshop/conversations.openai.jsonl", 40)):
        path = root / name
        assert path.stat().st_size < 800_000, name
        assert len(path.read_text().splitlines()) == lines, name
    expert = [json.loads(line) for line in (root / "toolshop/expert.jsonl").read_text().splitlines()]
    assert all(episode["success"] for episode in expert)
    first = expert[0]
    again = record_episode(make("toolshop"), ExpertPolicy(), first["task_id"])
    assert [t.observation.text for t in again.turns] == [t["observation"]["text"] for t in first["turns"]]
