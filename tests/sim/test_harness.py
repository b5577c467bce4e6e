"""The harness on real ALFWorld and BFCL trajectories outside the construction set: rules, state, fallbacks, agent."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from sim_support import opening

from helpers import sample_episodes, split_by_family
from worldsmith.llm import Completion, LLMBase
from worldsmith.sim import Session
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook


@pytest.fixture(scope="module")
def alfworld_split() -> tuple[Worldbook, list[Episode]]:
    episodes = sample_episodes("alfworld_expert")
    train, held = split_by_family(episodes)
    return build_simulator_book(train, name="alfworld").book, held


@pytest.mark.parametrize("config", [HarnessConfig(), HarnessConfig(knowledge=False)], ids=["book", "schema_only"])
def test_every_held_out_alfworld_turn_is_answered(alfworld_split: tuple[Worldbook, list[Episode]],
                                                  config: HarnessConfig) -> None:
    book, held = alfworld_split
    harness = Harness(book, config=config)
    routes: Counter[str] = Counter()
    exact = 0
    for episode in held:
        for index, turn in enumerate(episode.turns):
            harness.start(opening(episode, index))
            prediction = harness.predict(turn.action)
            routes[prediction.audit.route] += 1
            exact += prediction.observation == turn.observation.text
    turns = sum(routes.values())
    assert turns == sum(len(e.turns) for e in held)
    if config.knowledge:
        assert routes["fast_path"] > turns / 3 and exact > turns / 3, routes
    else:
        assert routes["fast_path"] == 0  # no rules without worldbook knowledge


def test_state_carries_consequences_across_turns(alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    book, held = alfworld_split
    take = book.rule(next(r.id for r in book.supported_rules("take")))
    assert [e.op for e in take.effects] == ["remove"], "the take rule should move the object out of its receptacle"
    episode = next(e for e in held if any(t.action.name == "take" for t in e.turns))
    harness = Harness(book)
    harness.start(opening(episode, 0))
    for turn in episode.turns:
        harness.predict(turn.action)
        harness.commit()
        if turn.action.name == "take":
            break
    taken = turn.action.raw.split(" from ")[0].removeprefix("take ")
    source = turn.action.raw.split(" from ")[1]
    assert taken not in harness.state["world"]["contents"][source]
    back = harness.predict(f"go to {source}")
    assert back.audit.route == "fast_path" and taken not in back.observation, back


def test_observed_prefix_rebuilds_state_and_observed_outputs_win(alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    book, held = alfworld_split
    episode = held[0]
    harness = Harness(book)
    harness.start(opening(episode, len(episode.turns)))
    first_go = next(t for t in episode.turns if t.action.name == "go")
    target = first_go.action.raw.removeprefix("go to ")
    assert target in harness.state["world"]["contents"] or target in harness.state["world"].get("status", {})
    repeat = harness.predict(first_go.action)
    assert repeat.observation.startswith(first_go.observation.text.split(".")[0])  # the loc it was observed at


def test_bfcl_trajectories_run_turn_by_turn() -> None:
    episodes = sample_episodes("bfcl")
    train, held = episodes[:4], episodes[4:]
    book = build_simulator_book(train, name="bfcl").book
    harness = Harness(book)
    for episode in held:
        harness.start(opening(episode, 0))
        for turn in episode.turns:
            prediction = harness.predict(turn.action)
            assert prediction.outcome in ("success", "unknown") or prediction.outcome.startswith("failure")
            harness.commit()
        assert len(harness.history) == len(episode.turns)


def test_bad_actions_get_clear_outcomes_and_leave_state(alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    book, held = alfworld_split
    harness = Harness(book)
    harness.start(opening(held[0], 3))
    before = harness.state
    assert harness.predict({"name": ""}).outcome == "failure:invalid_action"
    unknown = harness.predict("fly to the moon")
    assert unknown.outcome == "failure:unknown_action" and unknown.state in (None, before)
    lenient = harness.predict({"name": "take", "arguments": {}})  # a learned schema may be incomplete
    assert lenient.observation and any("missing required argument" in note for note in lenient.audit.notes)
    strict = Harness(book, config=HarnessConfig(strict_schema=True))
    strict.start(opening(held[0], 3))
    missing = strict.predict({"name": "take", "arguments": {}})
    assert missing.outcome == "failure:invalid_arguments" and "missing required argument" in missing.audit.notes[0]
    assert harness.state == before and strict.state == before


class Scripted(LLMBase):
    """Replies with the given texts in order (a unit test of the tool loop's logic only)."""

    model = "scripted"

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    def generate(self, conversations: Sequence[Sequence[Any]], params: Any) -> list[list[Completion]]:
        out = []
        for messages in conversations:
            self.seen.append(list(messages))
            text = self.replies.pop(0) if self.replies else "{}"
            out.append([Completion(text=text, model="scripted", prompt_tokens=10, completion_tokens=5)])
        return out


def _first_visit(book: Worldbook, held: list[Episode]) -> tuple[Episode, Any]:
    episode = held[0]
    return episode, episode.turns[0].action  # a first visit: no rule can render it


def test_agent_route_reads_state_then_submits(alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    book, held = alfworld_split
    episode, action = _first_visit(book, held)
    effect = {"op": "set", "path": "world.status.{arg.target}", "value": "closed"}
    replies = ['{"tool": "read_state", "args": {"path": ""}}',
               '{"tool": "search", "args": {"query": "go to"}}',
               orjson.dumps({"tool": "submit", "args": {"observation": "You arrive at loc 9. The x is closed.",
                                                        "outcome": "success", "effects": [effect],
                                                        "cited": ["go.r1", "nope"]}}).decode()]
    for policy, accepted in (("rules_only", False), ("schema_checked", True)):
        llm = Scripted(list(replies))
        harness = Harness(book, llm=llm, config=HarnessConfig(trust_policy=policy))
        harness.start(opening(episode, 0))
        prediction = harness.predict(action)
        audit = prediction.audit
        assert audit.route == "agent" and audit.source == "model" and audit.model_calls == 3 and audit.tokens == 45
        assert [call["tool"] for call in audit.tool_calls] == ["read_state", "search", "submit"]
        assert prediction.observation == "You arrive at loc 9. The x is closed."
        assert any("cited items the worldbook does not have" in note for note in audit.notes)
        assert bool(prediction.effects) is accepted and bool(audit.rejected_effects) is not accepted


def test_agent_route_falls_back_when_the_model_never_submits(alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    book, held = alfworld_split
    episode, action = _first_visit(book, held)
    harness = Harness(book, llm=Scripted(["not json"] * 20), config=HarnessConfig(max_tool_steps=2))
    harness.start(opening(episode, 0))
    prediction = harness.predict(action)
    assert prediction.audit.route == "fallback:nearest_evidence" and prediction.observation
    assert prediction.audit.source == "nearest_evidence"
    assert prediction.audit.model_calls == 4 and "no valid submission" in " ".join(prediction.audit.notes)


def test_tiny_model_agent_route_runs_and_falls_back_cleanly(alfworld_split: tuple[Worldbook, list[Episode]],
                                                            tiny_llm: Any) -> None:
    book, held = alfworld_split
    episode, action = _first_visit(book, held)
    harness = Harness(book, llm=tiny_llm, config=HarnessConfig(max_tool_steps=1, max_tokens=48))
    harness.start(opening(episode, 0))
    prediction = harness.predict(action)
    assert prediction.audit.model_calls >= 1 and prediction.observation


def test_harness_in_a_persistent_session(alfworld_split: tuple[Worldbook, list[Episode]], tmp_path: Path) -> None:
    book, held = alfworld_split
    episode = held[0]
    session = Session.create(tmp_path / "s", book_ref="alfworld", model="harness",
                             initial_observation=episode.initial_observation.text)
    harness = Harness(book)
    session.attach(harness)
    for turn in episode.turns[:3]:
        session.play(harness, turn.action)
    state = session.state
    session.close()
    reopened = Session.open(tmp_path / "s")
    again = Harness(book)
    reopened.attach(again)
    assert again.state == state and len(reopened) == 3
    reopened.close()


class Windowed(Scripted):
    """A scripted model with a small context window (the budget estimates its tokens from characters)."""

    context_window = 0


def test_agent_route_drops_the_oldest_tool_exchanges_to_fit_the_window(
        alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    from worldsmith.llm.budget import estimate_tokens, prompt_budget

    book, held = alfworld_split
    episode, action = _first_visit(book, held)
    replies = ['{"tool": "search", "args": {"query": "go to"}}'] * 5 + [orjson.dumps(
        {"tool": "submit", "args": {"observation": "You arrive.", "outcome": "success"}}).decode()]
    probe = Scripted(['{"tool": "submit", "args": {"observation": "x", "outcome": "success"}}'])
    first = Harness(book, llm=probe, config=HarnessConfig(max_tool_steps=6, max_tokens=32))
    first.start(opening(episode, 0))
    first.predict(action)
    llm = Windowed(replies)
    llm.context_window = estimate_tokens(probe.seen[0]) + 32 + 250  # the brief, the action and a few exchanges
    harness = Harness(book, llm=llm, config=HarnessConfig(max_tool_steps=6, max_tokens=32))
    harness.start(opening(episode, 0))
    prediction = harness.predict(action)
    limit = prompt_budget(llm, reply_tokens=32).limit
    assert all(estimate_tokens(messages) <= limit for messages in llm.seen)  # never sent over the window
    fit = prediction.audit.prompt_fit
    assert fit is not None and fit["exchanges_dropped"] > 0 and fit["fits"]
    assert any("earlier tool exchanges dropped to fit" in note for note in prediction.audit.notes)
    assert all(messages[1]["content"].startswith("Action: ") for messages in llm.seen)  # the action always stays
