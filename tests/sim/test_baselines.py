"""Baselines on real ALFWorld and BFCL episodes: protocol conformance, adaptation, fallbacks, the tiny model."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sim_support import book_from, opening

from worldsmith.llm import Completion, ContextOverflowError, LLMBase
from worldsmith.sim import (
    DirectPrompting,
    HistoryItem,
    NearestEvidence,
    Prediction,
    TraceRAG,
    WorldbookPrompting,
    WorldModel,
)
from worldsmith.sim.base import NothingToCommitError
from worldsmith.sim.prompts import parse_observation, render_worldbook, simulator_messages
from worldsmith.sim.retrieval import EvidenceScorer
from worldsmith.traces import Action, Episode
from worldsmith.worldbook import Worldbook
from worldsmith.worldbook.templates import evidence_from_episodes

# ------------------------------------------------------------------ prompts and parsing


def test_parse_observation_strips_what_models_add() -> None:
    assert parse_observation("Observation: You open the drawer 1.") == "You open the drawer 1."
    assert parse_observation('"You see nothing."') == "You see nothing."
    assert parse_observation("```json\n{\"a\": 1}\n```") == '{"a": 1}'
    assert parse_observation("Environment: env: It is dark.\n> go north\nYou are in a cave.") == "It is dark."
    assert parse_observation("Done.<|im_end|>\n<|im_start|>user\nlook") == "Done."
    assert parse_observation('He said "hi" and "bye"') == 'He said "hi" and "bye"'  # inner quotes stay
    assert parse_observation("   ") == ""


def test_simulator_messages_keep_the_newest_steps_within_budget() -> None:
    history = [HistoryItem(action=Action(name="go", raw=f"go to room {i}"), observation=f"You are in room {i}." * 5)
               for i in range(30)]
    messages = simulator_messages(env="rooms", task="explore", initial_observation="Start.", history=history,
                                  action="look", history_chars=600)
    assert messages[0]["role"] == "system" and "rooms" in messages[0]["content"]
    assert "earlier steps are not shown" in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "look"}
    assert messages[-2]["content"].startswith("You are in room 29.")  # the newest step is kept
    assert sum(len(m["content"]) for m in messages[1:-1]) <= 600
    full = simulator_messages(env="rooms", task=None, initial_observation="Start.", history=history[:2],
                              action="look")
    assert [m["content"] for m in full[1:3]] == ["(start)", "Start."] and len(full) == 1 + 2 + 4 + 1


def test_render_worldbook_shows_rules_and_is_bounded(alfworld: list[Episode]) -> None:
    book = book_from(alfworld, "alfworld")
    text = render_worldbook(book)
    assert "You pick up the {arg.object} from the {arg.source}." in text and text.startswith("Environment:")
    short = render_worldbook(book, max_chars=60)
    assert len(short) < 120 and "more lines left out" in short


# ------------------------------------------------------------------ nearest evidence


def _play(model: WorldModel, episode: Episode, prefix_turns: int = 0) -> list[Prediction]:
    model.start(opening(episode, prefix_turns))
    out = []
    for turn in episode.turns[prefix_turns:]:
        prediction = model.predict(turn.action)
        model.commit()
        out.append(prediction)
    return out


@pytest.mark.parametrize("env", ["alfworld", "bfcl"])
def test_nearest_evidence_plays_every_turn_held_out(env: str, request: pytest.FixtureRequest) -> None:
    episodes: list[Episode] = request.getfixturevalue(env)
    exact = total = 0
    for held_out in range(len(episodes)):
        rest = episodes[:held_out] + episodes[held_out + 1:]
        model = NearestEvidence(book_from(rest, env))
        assert isinstance(model, WorldModel)
        episode = episodes[held_out]
        predictions = _play(model, episode)
        assert len(model.history) == len(episode.turns)
        for prediction, turn in zip(predictions, episode.turns, strict=True):
            assert prediction.audit.route == "fallback:nearest_evidence" and prediction.audit.model_calls == 0
            if prediction.outcome != "failure:unknown_action":
                assert prediction.audit.retrieved and prediction.audit.retrieved[0]["action"] == turn.action.name
            exact += prediction.observation == turn.observation.text
            total += 1
    assert total == sum(len(e.turns) for e in episodes)
    assert exact >= 3, f"only {exact} of {total} held-out observations reproduced"


def test_nearest_evidence_adapts_the_template_to_new_arguments(alfworld: list[Episode], bfcl: list[Episode]) -> None:
    model = NearestEvidence(book_from(alfworld, "alfworld"))
    model.start("You are in a room.")
    assert model.predict("take mug 3 from shelf 2").observation == "You pick up the mug 3 from the shelf 2."
    tools = NearestEvidence(evidence_from_episodes(bfcl))
    tools.start("user request")
    prediction = tools.predict(Action(name="cd", arguments={"folder": "pictures"}))
    assert prediction.observation == '{"current_working_directory": "pictures"}' and prediction.outcome == "success"


def test_predict_is_side_effect_free_and_commit_takes_the_last(alfworld: list[Episode]) -> None:
    model = NearestEvidence(book_from(alfworld, "alfworld"))
    model.start(opening(alfworld[0], 1))
    assert len(model.history) == 1
    first = model.predict("go to desk 1")
    second = model.predict("go to bed 1")
    assert first.observation != second.observation and len(model.history) == 1
    model.commit()
    assert model.history[-1].action.raw == "go to bed 1" and model.history[-1].observation == second.observation
    with pytest.raises(NothingToCommitError):
        model.commit()


def test_malformed_and_unknown_actions_get_clear_outcomes(alfworld: list[Episode]) -> None:
    model = NearestEvidence(book_from(alfworld, "alfworld"))
    with pytest.raises(RuntimeError, match="start"):
        model.predict("look")
    model.start("A room.")
    for malformed in ({"no_name": 1}, "", 42):
        prediction = model.predict(malformed)  # type: ignore[arg-type]
        assert prediction.outcome == "failure:invalid_action" and prediction.audit.route == "rejected"
        assert prediction.audit.notes and prediction.audit.notes[0].startswith("malformed action")
    unknown = model.predict("xyzzy plugh")
    assert unknown.outcome == "failure:unknown_action" and "no evidence for action 'xyzzy'" in unknown.audit.notes
    model.commit()  # a clear outcome can be committed like any other
    assert model.history[-1].action.name == "xyzzy"


def test_unknown_action_gets_the_shared_failure_text() -> None:
    from worldsmith.worldbook import Evidence

    evidence = [Evidence(turn_id=f"e#{i}", action=name, action_text=f"{name} thing", observation=text,
                         outcome=outcome)
                for i, (name, text, outcome) in enumerate([("open", "Nothing happens.", "failure"),
                                                          ("close", "Nothing happens.", "failure"),
                                                          ("open", "You open the thing.", "success")])]
    model = NearestEvidence(evidence)
    model.start("")
    assert model.predict("dance wildly").observation == "Nothing happens."


def test_nearest_evidence_prefers_an_action_of_the_same_shape() -> None:
    """The harness's fallback answers `take X from Y` like other takes from a place, not like the take sharing
    the rare word."""
    from worldsmith.worldbook import Evidence

    rows = [("take latchkey", {"object": "latchkey"}, "You pick up the latchkey from the ground."),
            ("take worm from bench", {"object": "worm", "source": "bench"}, "You take the worm from the bench.")]
    evidence = [Evidence(turn_id=f"e#{i}", action="take", arguments=arguments, action_text=text, observation=observation)
                for i, (text, arguments, observation) in enumerate(rows)]
    model = NearestEvidence(evidence, same_shape_first=True)
    model.start("")
    assert (model.predict("take rectangular latchkey from bed stand").observation
            == "You take the rectangular latchkey from the bed stand.")
    assert model.predict("take rectangular latchkey").observation == "You pick up the rectangular latchkey from the ground."
    plain = NearestEvidence(evidence)  # the baseline: the rare shared word wins
    plain.start("")
    assert plain.predict("take rectangular latchkey from bed stand").observation.startswith("You pick up")


def test_evidence_scorer_prefers_shared_rare_words() -> None:
    from worldsmith.worldbook import Evidence

    items = [Evidence(turn_id=f"e#{i}", action="go", action_text=text, observation=text)
             for i, text in enumerate(["go to desk 1", "go to bed 1", "go to sidetable 2"])]
    hits = EvidenceScorer(items).search("go to bed 2", 2)
    assert hits[0].evidence.action_text == "go to bed 1"
    assert EvidenceScorer(items).search("go to bed 1", 5, action="take") == []


def test_evidence_scorer_search_by_action_is_the_full_ranking_filtered() -> None:
    """The per-action index reads only the action's items: the same hits, scores and order as ranking every item
    and keeping that action's."""
    from worldsmith.worldbook import Evidence

    rows = [("go", "go to desk 1"), ("take", "take mug 1 from desk 1"), ("go", "go to bed 1 1"),
            ("take", "take key from bed 1"), ("go", "go to desk 2"), ("open", "open drawer 1")]
    items = [Evidence(turn_id=f"e#{i}", action=action, action_text=text, observation=text)
             for i, (action, text) in enumerate(rows)]
    scorer = EvidenceScorer(items)
    assert scorer.actions() == {"go", "take", "open"}
    for query in ("go to desk 1", "take key from desk 1", "bed 1 1 1", "nothing shared"):
        everything = scorer.search(query, None)
        assert [hit.id for hit in everything] and all(hit.extra >= 0 for hit in everything)
        for action in ("go", "take", "open", "look"):
            assert scorer.search(query, None, action=action) == [h for h in everything if h.evidence.action == action]
    assert [hit.extra for hit in scorer.search("go to bed 1", None, action="go")] == [0, 1, 2]  # words the query lacks


@pytest.mark.parametrize("candidates", [64, 1, 2, 5])
@pytest.mark.parametrize("same_shape_first", [False, True])
def test_nearest_evidence_grouped_ranking_is_the_full_sort(same_shape_first: bool, candidates: int,
                                                          alfworld: list[Episode], bfcl: list[Episode]) -> None:
    """The lazy ranking (items with the same words and shape scored once, the best-scored `candidates` groups merged
    first, then every group) orders every item exactly as sorting all of them by the documented key did: same
    positions, scores and extra words, in the same order, however few groups are merged first."""
    from worldsmith.sim.baselines import _query
    from worldsmith.sim.retrieval import action_arguments

    for episodes, env in ((alfworld, "alfworld"), (bfcl, "bfcl")):
        model = NearestEvidence(book_from(episodes, env), same_shape_first=same_shape_first)
        model.candidates = candidates
        roles, support = model._roles_at, model._support_at
        for turn in [t for e in episodes for t in e.turns][::3]:
            action = turn.action
            shape = frozenset(action_arguments(action)) if same_shape_first else None
            full = sorted(model.scorer.rank(_query(action), action.name), key=lambda hit: (
                shape is not None and roles[hit[0]] != shape, -round(hit[1], 6), -support[hit[0]], hit[2], -hit[1],
                hit[0]))
            assert list(model._ranked(_query(action), action.name, shape)) == full
        assert list(model._ranked("anything", "no-such-action", None)) == []


def test_nearest_evidence_remembers_a_look_up_but_not_its_audit(bfcl: list[Episode]) -> None:
    """A repeated look-up is answered from memory: the same prediction, in a new audit a caller may edit."""
    model = NearestEvidence(evidence_from_episodes(bfcl))
    model.start("user request")
    action = Action(name="cd", arguments={"folder": "pictures"})
    first = model.predict(action)
    first.audit.notes.append("edited by a caller")
    first.audit.retrieved[0]["score"] = -1
    again = model.predict(action)
    fresh = NearestEvidence(evidence_from_episodes(bfcl))
    fresh.start("user request")
    def seen(prediction: Prediction) -> dict[str, Any]:
        return prediction.model_dump(exclude={"audit": {"latency_s"}})

    assert seen(again) == seen(fresh.predict(action)) and len(model._answers) == 1
    assert seen(model.predict(Action(name="cd", arguments={"folder": "docs"}))) != seen(again)
    assert len(model._answers) == 2


# ------------------------------------------------------------------ model baselines on scripted replies


class ScriptedLLM(LLMBase):
    """Answers with fixed replies (or raises): unit tests of the baselines' parsing and fallback logic."""

    spec = "scripted:test"

    def __init__(self, replies: Sequence[str | Exception]) -> None:
        self.replies = list(replies)
        self.prompts: list[list[dict[str, Any]]] = []

    def generate(self, conversations, params):
        out = []
        for messages in conversations:
            self.prompts.append(messages)
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            out.append([Completion(text=reply, prompt_tokens=50, completion_tokens=7, finish_reason="stop")])
        return out


def test_model_reply_is_parsed_and_counted(alfworld: list[Episode]) -> None:
    llm = ScriptedLLM(['Observation: "You open the drawer 1."'])
    model = DirectPrompting(llm)
    model.start(opening(alfworld[0], 2))
    prediction = model.predict("open drawer 1")
    assert prediction.observation == "You open the drawer 1." and prediction.audit.route == "model"
    assert (prediction.audit.model_calls, prediction.audit.tokens) == (1, 57)
    sent = llm.prompts[0]
    assert sent[-1] == {"role": "user", "content": "open drawer 1"}
    assert sent[-2]["content"] == alfworld[0].turns[1].observation.text  # the history is in the prompt


def test_unusable_model_output_falls_back_to_evidence(alfworld: list[Episode]) -> None:
    book = book_from(alfworld, "alfworld")
    llm = ScriptedLLM(["  ", ContextOverflowError("prompt too long")])
    model = DirectPrompting(llm, evidence=book)
    model.start("A room.")
    empty = model.predict("take mug 3 from shelf 2")
    assert empty.audit.route == "fallback:nearest_evidence" and empty.observation == "You pick up the mug 3 from the shelf 2."
    assert "the model's reply holds no observation" in empty.audit.notes and empty.audit.model_calls == 1
    failed = model.predict("take mug 3 from shelf 2")
    assert failed.audit.route == "fallback:nearest_evidence"
    assert any(note.startswith("model call failed: ContextOverflowError") for note in failed.audit.notes)
    without = DirectPrompting(ScriptedLLM([""]))
    without.start("A room.")
    nothing = without.predict("look")
    assert nothing.observation == "" and nothing.outcome == "unknown" and "no evidence to fall back on" in nothing.audit.notes


def test_trace_rag_puts_retrieved_transitions_in_the_prompt(alfworld: list[Episode]) -> None:
    book = book_from(alfworld, "alfworld")
    llm = ScriptedLLM(["You pick up the mug 3 from the shelf 2."])
    model = TraceRAG(llm, book, k=2)
    model.start("A room.")
    prediction = model.predict("take mug 3 from shelf 2")
    assert len(prediction.audit.retrieved) == 2
    system = llm.prompts[0][0]["content"]
    assert "Recorded transitions" in system and "> take " in system and "You pick up the" in system


class _Hit:
    def __init__(self, id: str, text: str, score: float) -> None:
        self.id, self.text, self.score = id, text, score


class _Index:
    """The duck-typed search interface TraceRAG accepts (`search(query, k)` -> items with id/text)."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, int]] = []

    def search(self, query: str, k: int = 10) -> list[_Hit]:
        self.queries.append((query, k))
        return [_Hit("x#1", "> open box\nThe box is open.", 2.0)]


def test_trace_rag_accepts_any_search_object() -> None:
    index, llm = _Index(), ScriptedLLM(["The crate is open."])
    model = TraceRAG(llm, index, k=3)
    model.start("A room.")
    prediction = model.predict("open crate")
    assert index.queries == [("open crate crate", 3)]
    assert prediction.audit.retrieved == [{"id": "x#1", "score": 2.0}]
    assert "The box is open." in llm.prompts[0][0]["content"]


@pytest.mark.skipif(importlib.util.find_spec("worldsmith.worldbook.index") is None,
                    reason="worldsmith.worldbook.index is not there yet")
def test_trace_rag_on_the_worldbook_index(alfworld: list[Episode], tmp_path: Path) -> None:
    from worldsmith.worldbook.index import WorldbookIndex

    book = book_from(alfworld, "alfworld")
    index = WorldbookIndex.build(book, tmp_path / "index", dense=False)
    llm = ScriptedLLM(["ok"])
    model = TraceRAG(llm, index, k=3, evidence=book)
    model.start("A room.")
    prediction = model.predict("take book 1 from bed 1")
    turn_ids = {e.turn_id for e in book.evidence}
    assert prediction.audit.retrieved and all(item["id"] in turn_ids for item in prediction.audit.retrieved)
    assert "> take book 1 from bed 1" in llm.prompts[0][0]["content"]


def test_worldbook_prompting_renders_the_book(alfworld: list[Episode]) -> None:
    book = book_from(alfworld, "alfworld")
    llm = ScriptedLLM(["You pick up the mug 3 from the shelf 2."])
    model = WorldbookPrompting(llm, book)
    model.start("A room.")
    model.predict("take mug 3 from shelf 2")
    assert "You pick up the {arg.object} from the {arg.source}." in llm.prompts[0][0]["content"]


# ------------------------------------------------------------------ the tiny model, for real


@pytest.mark.integration
@pytest.mark.parametrize("env", ["alfworld", "bfcl"])
def test_model_baselines_on_the_tiny_model(env: str, request: pytest.FixtureRequest, tiny_llm) -> None:
    episodes: list[Episode] = request.getfixturevalue(env)
    book: Worldbook = book_from(episodes[1:], env)
    episode = min(episodes[:1], key=lambda e: len(e.turns))
    models = [DirectPrompting(tiny_llm, max_tokens=12, evidence=book),
              TraceRAG(tiny_llm, book, k=2, max_tokens=12, evidence_chars=800, history_chars=1500),
              WorldbookPrompting(tiny_llm, book, max_tokens=12, book_chars=1200, history_chars=1500)]
    for model in models:
        predictions = _play(model, episode, prefix_turns=1)
        assert len(model.history) == len(episode.turns)
        for prediction in predictions:
            assert prediction.audit.route in ("model", "fallback:nearest_evidence")
            assert prediction.audit.model_calls == 1 and prediction.audit.tokens > 0
            assert prediction.audit.route == "fallback:nearest_evidence" or prediction.observation
    assert tiny_llm.model_calls >= 1  # real calls went through the tracked model (the rest from its cache)
