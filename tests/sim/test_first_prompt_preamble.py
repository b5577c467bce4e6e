"""Every model-backed method's prompt carries the log's system prompt and tool schemas from the FIRST step of an
episode (issue 42): an OpenAI conversation declares its system prompt in the first turn's context, which the
prefix of turn 0 (and every open-loop start) holds none of. Run on a real toolshop conversation with the bundled
tiny model, teacher forced (next-obs) and open loop (drift); the audit's `prompt_fit` says at every step how much
of the system prompt was carried."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from worldsmith.evals.protocols import Scorer, drift_records, next_obs_records
from worldsmith.llm import summarize_system
from worldsmith.llm.base import Message
from worldsmith.sim import DirectPrompting, TraceRAG, WorldbookPrompting
from worldsmith.sim.prompts import episode_preamble, prefix_before
from worldsmith.traces import Episode
from worldsmith.traces.importers.openai_chat import OpenAIChatImporter
from worldsmith.worldbook import build_worldbook

REPO = Path(__file__).resolve().parents[2]
TOOLSHOP = REPO / "data_samples" / "toolshop" / "conversations.openai.jsonl"
TURNS = 3


class Recording:
    """The real model, with every conversation it was sent kept (what the prompt carried, verbatim)."""

    def __init__(self, llm: Any) -> None:
        self.llm, self.sent = llm, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.llm, name)

    def chat(self, messages: Sequence[Message], **params: Any) -> Any:
        self.sent.append(list(messages))
        return self.llm.chat(messages, **params)


class WindowUnknown:
    """The real model behind a wrapper that says nothing of its window (as an HTTP backend): no budget is known."""

    def __init__(self, llm: Any) -> None:
        self.model = llm

    def chat(self, messages: Sequence[Message], **params: Any) -> Any:
        return self.model.chat(messages, **params)


@pytest.fixture(scope="module")
def conversations() -> list[Episode]:
    if not TOOLSHOP.exists():
        pytest.fail(f"sample missing: {TOOLSHOP}")
    return list(OpenAIChatImporter().read(TOOLSHOP))


def test_a_prefix_of_no_turns_still_declares_the_system_prompt(conversations: list[Episode]) -> None:
    episode = conversations[0]
    system = episode_preamble(episode).system_prompt
    assert system.startswith("You are the customer-service agent of Toolshop")
    assert episode_preamble(episode.model_copy(update={"turns": []})).system_prompt == ""  # why it was lost
    for turn in (0, 1, len(episode.turns)):
        prefix = prefix_before(episode, turn)
        assert len(prefix.turns) == turn and episode_preamble(prefix).system_prompt == system
        assert len(episode_preamble(prefix).tools) == len(episode.metadata["tools"])
    assert prefix_before(episode.model_copy(update={"turns": []}), 0).metadata == episode.metadata  # none declared


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["next-obs", "drift"])
@pytest.mark.parametrize("method", ["direct", "trace_rag", "worldbook"])
def test_the_first_prompt_carries_the_system_prompt(tiny_llm, conversations: list[Episode], protocol: str,
                                                    method: str) -> None:
    episode = next(e for e in conversations if len(e.turns) >= TURNS)
    system = episode_preamble(episode).system_prompt
    llm = Recording(tiny_llm)
    book = build_worldbook([e for e in conversations if e.id != episode.id], name="shop").book
    model = {"direct": lambda: DirectPrompting(llm, max_tokens=8),
             "trace_rag": lambda: TraceRAG(llm, book, k=2, max_tokens=8),
             "worldbook": lambda: WorldbookPrompting(llm, book, book_chars=600, max_tokens=8)}[method]()
    run = next_obs_records if protocol == "next-obs" else drift_records
    records = run(model, episode, Scorer(), max_turns=TURNS)
    assert [r.error for r in records] == [None] * TURNS and len(llm.sent) == TURNS
    for step, messages in enumerate(llm.sent):
        shown = messages[0]["content"]
        assert system[:40] in shown, f"step {step}'s prompt carries none of the system prompt"
    first = model.fitted(episode.turns[0].action)[2] if protocol == "drift" else None
    assert first is None or first.system_prompt_chars == len(system)


@pytest.mark.integration
def test_the_audit_says_what_each_step_carried(tiny_llm, conversations: list[Episode]) -> None:
    episode = next(e for e in conversations if len(e.turns) >= TURNS)
    system = episode_preamble(episode).system_prompt
    model = DirectPrompting(tiny_llm, max_tokens=8)
    model.start(prefix_before(episode, 0))
    for turn in episode.turns[:TURNS]:
        prediction = model.predict(turn.action)
        fit = prediction.audit.prompt_fit
        assert fit is not None and fit["system_prompt_chars"] == len(system)
        assert fit["tools"] == len(episode.metadata["tools"]) and fit["system_prompt_level"] != "none"
        sent = model.fitted(turn.action)[0][0]["content"]
        assert summarize_system(system, fit["system_prompt_level"]) in sent
        model.commit()
    unknown = DirectPrompting(WindowUnknown(tiny_llm), max_tokens=8)
    unknown.start(prefix_before(episode, 0))
    assert unknown.budget is None
    fit = unknown.predict(episode.turns[0].action).audit.prompt_fit
    assert fit is not None and fit["limit"] is None and fit["system_prompt_chars"] == len(system)
    assert fit["system_prompt_level"] == "full" and fit["preamble_chars_shown"] == fit["preamble_chars"] > 0


def test_sessions_and_side_by_side_start_with_the_system_prompt(conversations: list[Episode], tmp_path: Path) -> None:
    """A session opened on a recorded conversation, and the side-by-side view stepping one, hand their models a
    prefix that still declares the log's system prompt at step 0 (and after steps of their own)."""
    from worldsmith.sim import NearestEvidence, Session
    from worldsmith.sim.sidebyside import SideBySide

    episode = conversations[0]
    system = episode_preamble(episode).system_prompt
    with Session.from_episode(tmp_path / "s", episode) as session:
        assert episode_preamble(session.prefix()).system_prompt == system
    book = build_worldbook(conversations[1:], name="shop").book
    view = SideBySide(book, {"nearest": NearestEvidence(book)}, episode)
    assert episode_preamble(view._prefix(0)).system_prompt == system
    assert episode_preamble(view._prefix(0, history=[])).system_prompt == system
