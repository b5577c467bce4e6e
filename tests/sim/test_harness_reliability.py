"""Harness reliability: a harness playing through a session in a worker SIGKILLed mid-commit, and bad inputs.

After every kill the reopened session must be consistent (turns, revisions, mirrors), and a fresh
harness rebuilt from the session's prefix must hold exactly the stored state and give the stored
answer to each stored action. Bad input — malformed or unknown actions, a model submitting effects
outside the state schema or effects that do not apply, submissions that never validate — must give a
clear outcome with the reason in the audit, be stored like any turn, and leave the state unchanged.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import reliability_support
from sim_support import SAMPLES, opening

from worldsmith.llm import Completion, LLMBase
from worldsmith.sim import Session
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.sim.session import AUDIT_FILE, STATE_FILE
from worldsmith.traces import Action, Episode, trajectory_family
from worldsmith.worldbook import Worldbook


@pytest.fixture(scope="module")
def alfworld_split() -> tuple[Worldbook, list[Episode]]:
    """A book built on 3/4 of the ALFWorld trajectory families, and the episodes of the other quarter."""
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in (SAMPLES / "alfworld_expert.jsonl").read_bytes().splitlines()]
    families = sorted({trajectory_family(e) for e in episodes})
    held_families = {f for i, f in enumerate(families) if i % 4 == 0}
    train = [e for e in episodes if trajectory_family(e) not in held_families]
    held = [e for e in episodes if trajectory_family(e) in held_families]
    return build_simulator_book(train, name="alfworld").book, held


def _cycle(episode: Episode) -> list[Any]:
    """The episode's actions, then an unknown and a malformed action: what the workers play round and round."""
    return [turn.action.model_dump(mode="json") for turn in episode.turns] + ["fly to the moon", "   "]


def _session(tmp_path: Path, book: Worldbook, episode: Episode) -> Path:
    reliability_support.write_inputs(tmp_path, book.model_dump_json(), _cycle(episode))
    Session.create(tmp_path / "s", book_ref="alfworld", model="harness", task=episode.task,
                   initial_observation=episode.initial_observation.text).close()
    return tmp_path / "s"


def _assert_consistent(session: Session) -> None:
    turns = session.turns()
    assert [t.index for t in turns] == list(range(len(turns)))
    assert [t.revision for t in turns] == list(range(1, len(turns) + 1)) and session.revision == len(turns)
    state = orjson.loads((session.directory / STATE_FILE).read_bytes())
    audit = [orjson.loads(line) for line in (session.directory / AUDIT_FILE).read_bytes().splitlines()]
    assert state["revision"] == len(turns) and state["state"] == session.state
    assert [line["turn"] for line in audit] == list(range(len(turns)))
    assert session.mirrors_current()


def _assert_harness_agrees(book: Worldbook, session: Session,
                           config: HarnessConfig | None = None) -> Counter[str]:
    """A fresh harness started on each stored prefix holds the stored state and repeats the stored answer."""
    routes: Counter[str] = Counter()
    initial = session.meta["initial_state"]
    for turn in session.turns():
        rebuilt = Harness(book, config=config or HarnessConfig())
        rebuilt.start(session.prefix(turn.index), initial)
        assert rebuilt.state == session.state_at(turn.index), f"state rebuilt before turn {turn.index}"
        again = rebuilt.predict(turn.action)
        stored = turn.prediction
        assert (again.observation, again.outcome, again.audit.route) == (
            stored.observation, stored.outcome, stored.audit.route), f"turn {turn.index}"
        rebuilt.commit()
        assert rebuilt.state == turn.state, f"state after turn {turn.index} ({stored.audit.route})"
        routes[stored.audit.route] += 1
    attached = Harness(book)
    session.attach(attached)
    assert attached.state == session.state and len(attached.history) == len(session)
    return routes


def _spawn(target, directory: Path) -> multiprocessing.Process:
    process = multiprocessing.get_context("spawn").Process(target=target, args=(str(directory),))
    process.start()
    return process


def _run_to_death(target, directory: Path) -> int:
    process = _spawn(target, directory)
    process.join(120)
    assert not process.is_alive(), "the worker should have died"
    return process.exitcode


def test_harness_killed_at_random_points_of_its_commits(alfworld_split: tuple[Worldbook, list[Episode]],
                                                        tmp_path: Path) -> None:
    book, held = alfworld_split
    episode = max(held, key=lambda e: len(e.turns))
    directory = _session(tmp_path, book, episode)
    routes: Counter[str] = Counter()
    for round_number in range(3):
        with Session.open(directory) as watcher:
            target = watcher.revision + 9 + 5 * round_number
            process = _spawn(reliability_support.play_forever, directory)
            deadline = time.monotonic() + 120
            try:
                while watcher.revision < target:
                    assert process.is_alive(), f"the worker died on its own (exit {process.exitcode})"
                    assert time.monotonic() < deadline, "the worker made no progress"
                    time.sleep(0.002)
            finally:
                process.kill()
                process.join(60)
            assert process.exitcode == -signal.SIGKILL
        session = Session.open(directory)
        _assert_consistent(session)
        routes = _assert_harness_agrees(book, session)
        session.close()
    assert routes["fast_path"] >= len(episode.turns)  # rules answered, and revisits render from the state
    assert routes["rejected"] and routes["fallback:nearest_evidence"] + routes["fallback:episode_memory"]
    outcomes = {t.action.raw: t.prediction.outcome for t in Session.open(directory).turns()}
    assert outcomes["fly to the moon"] == "failure:unknown_action" and outcomes["   "] == "failure:invalid_action"


@pytest.mark.parametrize("worker, committed", [
    (reliability_support.play_and_die_in_transaction, False),
    (reliability_support.play_and_die_writing_mirrors, True),
], ids=["in_transaction", "writing_mirrors"])
def test_harness_killed_inside_one_commit(alfworld_split: tuple[Worldbook, list[Episode]], tmp_path: Path,
                                          worker, committed: bool) -> None:
    book, held = alfworld_split
    episode = held[0]
    directory = _session(tmp_path, book, episode)
    with Session.open(directory) as session:
        harness = Harness(book)
        session.attach(harness)
        for turn in episode.turns[:2]:
            session.play(harness, turn.action)
        before = session.state
    assert _run_to_death(worker, directory) == -signal.SIGKILL
    session = Session.open(directory)
    _assert_consistent(session)  # open rewrote the mirrors the writer left behind
    assert len(session) == (3 if committed else 2)
    if not committed:
        assert session.state == before
    _assert_harness_agrees(book, session)
    resumed = Harness(book)  # and play goes on from where SQLite is
    session.attach(resumed)
    stored = session.play(resumed, episode.turns[len(session)].action)
    assert stored.index == len(session) - 1 and stored.prediction.audit.route
    _assert_consistent(session)
    _assert_harness_agrees(book, session)
    session.close()


# ------------------------------------------------------------------ bad input


class Scripted(LLMBase):
    """Replies with the given texts in order (a unit test of the harness's handling of model output)."""

    model = "scripted"

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.seen: list[list[Any]] = []

    def generate(self, conversations: Sequence[Sequence[Any]], params: Any) -> list[list[Completion]]:
        out = []
        for messages in conversations:
            self.seen.append(list(messages))
            text = self.replies.pop(0) if self.replies else "{}"
            out.append([Completion(text=text, model="scripted", prompt_tokens=10, completion_tokens=5)])
        return out


def _submit(observation: str, effects: list[dict[str, Any]], outcome: str = "success") -> str:
    return orjson.dumps({"tool": "submit", "args": {"observation": observation, "outcome": outcome,
                                                    "effects": effects}}).decode()


OBSERVATION = "You arrive at the place. Nothing special here."


def _agent_turn(book: Worldbook, episode: Episode, replies: list[str], **config: Any) -> tuple[Harness, Any]:
    """The harness on the episode's first action (a first visit: no rule renders it), answered by `replies`."""
    harness = Harness(book, llm=Scripted(replies), config=HarnessConfig(**config))
    harness.start(opening(episode, 0))
    return harness, harness.predict(episode.turns[0].action)


@pytest.mark.parametrize("effect, why", [
    ({"op": "set", "path": "world.secret.{arg.target}", "value": 1}, "no state path of the schema matches"),
    ({"op": "set", "path": "world.status.{arg.nowhere}", "value": "open"}, "names an argument the action does not have"),
    ({"op": "increment", "path": "world.go.loc.{arg.target}", "value": "lots"}, "is not a number"),
], ids=["outside_schema", "unknown_argument", "does_not_apply"])
def test_model_effects_that_fail_validation_are_rejected(alfworld_split: tuple[Worldbook, list[Episode]],
                                                         tmp_path: Path, effect: dict[str, Any], why: str) -> None:
    book, held = alfworld_split
    episode = held[0]
    assert episode.turns[0].action.name == "go"
    _, plain = _agent_turn(book, episode, [_submit(OBSERVATION, [])], trust_policy="schema_checked", max_tool_steps=0)
    harness, prediction = _agent_turn(book, episode, [_submit(OBSERVATION, [effect])],
                                      trust_policy="schema_checked", max_tool_steps=0)
    audit = prediction.audit
    assert audit.route == "agent" and prediction.observation == OBSERVATION and prediction.outcome == "success"
    assert prediction.effects == [] and len(audit.rejected_effects) == 1
    assert audit.rejected_effects[0]["effect"]["path"] == effect["path"]
    assert all(isinstance(reason, str) and reason for reason in audit.rejected_effects[0]["why"])
    assert why in " ".join(audit.rejected_effects[0]["why"])
    assert "effects rejected: observation only, state unchanged by them" in audit.notes
    assert prediction.state == plain.state and "secret" not in prediction.state.get("world", {})

    session = Session.create(tmp_path / "s", initial_observation=episode.initial_observation.text)
    harness.start(session.prefix(), session.state)
    harness.llm = Scripted([_submit(OBSERVATION, [effect])])
    stored = session.play(harness, episode.turns[0].action)
    assert stored.state == plain.state and harness.state == plain.state
    line = orjson.loads((tmp_path / "s" / AUDIT_FILE).read_bytes().splitlines()[0])
    assert line["audit"]["rejected_effects"][0]["effect"]["path"] == effect["path"] and line["effects"] == []
    _assert_consistent(session)
    rebuilt = Harness(book)  # the stored state is what the observation alone gives
    rebuilt.start(session.prefix(), None)
    assert rebuilt.state == session.state
    session.close()


def test_submissions_that_never_validate_fall_back_with_the_reasons(
        alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    book, held = alfworld_split
    episode = held[0]
    replies = [_submit(OBSERVATION, [{"op": "explode", "path": "world.status.{arg.target}"}]),
               _submit("", []),  # an empty observation is not a transition
               _submit(OBSERVATION, [], outcome="success")]  # never asked for: the budget is spent
    harness, prediction = _agent_turn(book, episode, replies, max_tool_steps=0)
    audit = prediction.audit
    assert audit.model_calls == 2 and audit.tokens == 30 and [c["tool"] for c in audit.tool_calls] == ["submit"] * 2
    assert "agent: no valid submission within the budget" in audit.notes
    assert audit.route == "fallback:nearest_evidence" and prediction.observation and prediction.effects == []
    repair = harness.llm.seen[1][-1]["content"]
    assert repair.startswith("submit was invalid") and "explode" in repair
    without_model = Harness(book)  # the junk changed nothing: the same answer and state as no model at all
    without_model.start(opening(episode, 0))
    plain = without_model.predict(episode.turns[0].action)
    assert (prediction.observation, prediction.state) == (plain.observation, plain.state)


def test_an_invalid_outcome_from_the_model_is_read_as_unknown(alfworld_split: tuple[Worldbook, list[Episode]]) -> None:
    book, held = alfworld_split
    _, prediction = _agent_turn(book, held[0], [_submit(OBSERVATION, [], outcome="victory!")], max_tool_steps=0)
    assert prediction.audit.route == "agent" and prediction.outcome == "unknown"


@pytest.mark.parametrize("action, outcome, note", [
    ("", "failure:invalid_action", "malformed action: empty action"),
    (42, "failure:invalid_action", "not int"),
    ({"arguments": {"object": "mug 1"}}, "failure:invalid_action", "not dict"),
    ("take", "failure:invalid_arguments", "missing required argument 'object'"),
    (Action(name="take", arguments={"object": "mug 1"}), "failure:invalid_arguments",
     "missing required argument 'source'"),
    ("fly to the moon", "failure:unknown_action", "unknown action 'fly'"),
], ids=["empty", "not_text", "no_name", "no_arguments", "missing_argument", "unknown"])
def test_bad_actions_are_stored_with_clear_outcomes(alfworld_split: tuple[Worldbook, list[Episode]], tmp_path: Path,
                                                    action: Any, outcome: str, note: str) -> None:
    book, held = alfworld_split
    episode = held[0]
    session = Session.create(tmp_path / "s", initial_observation=episode.initial_observation.text)
    strict = HarnessConfig(strict_schema=True)  # missing arguments refused, not noted
    harness = Harness(book, config=strict)
    session.attach(harness)
    for turn in episode.turns[:2]:
        session.play(harness, turn.action)
    before = session.state
    stored = session.play(harness, action)
    assert stored.prediction.outcome == outcome and any(note in n for n in stored.prediction.audit.notes)
    assert stored.prediction.effects == [] and session.state == before and harness.state == before
    _assert_consistent(session)
    _assert_harness_agrees(book, session, strict)
    session.close()
