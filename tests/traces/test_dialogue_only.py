"""Dialogue-only episodes (a conversation in which the agent called no tool): every importer keeps their messages,
every exporter writes them so that importing again gives an equal episode, and the one exclusion helper counts them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import tool_call, write_json, write_jsonl
from worldsmith.traces import (
    ContextEvent,
    Episode,
    Reject,
    add_exclusions,
    detect_format,
    exclude_dialogue_only,
    export_episodes,
    read_traces,
)

TALK = {"id": "talk", "task_id": "t9", "reward": 0.0, "success": False, "metadata": {"agent": "v2"}, "messages": [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "my booking vanished"},
    {"role": "assistant", "content": "I am sorry, I cannot look bookings up.", "reasoning_content": "no tool fits"},
    {"role": "user", "content": "useless"}]}
TOOLS = {"id": "tools", "messages": [
    {"role": "user", "content": "find u1"},
    {"role": "assistant", "tool_calls": [tool_call("k0", "get_user", {"user_id": "u1"})]},
    {"role": "tool", "tool_call_id": "k0", "content": "{\"name\": \"Mia\"}"}]}


def _read(path: Path, format: str | None = None) -> tuple[dict[str, Episode], list[Reject]]:
    items = list(read_traces([path], format=format))
    return ({i.id: i for i in items if isinstance(i, Episode)}, [i for i in items if isinstance(i, Reject)])


def test_an_openai_conversation_without_tool_calls_is_a_dialogue_only_episode(tmp_path: Path) -> None:
    episodes, rejects = _read(write_jsonl(tmp_path / "chats.jsonl", [TOOLS, TALK]))
    assert rejects == [] and list(episodes) == ["tools", "talk"]
    talk = episodes["talk"]
    assert talk.dialogue_only and not episodes["tools"].dialogue_only
    assert talk.turns == [] and talk.task == "my booking vanished" and talk.task_id == "t9"
    assert talk.reward == 0.0 and talk.success is False and talk.metadata == {"agent": "v2"}
    assert [(c.role, c.content) for c in talk.final_context] == [
        ("system", "You are a support agent."), ("user", "my booking vanished"), ("reasoning", "no tool fits"),
        ("assistant", "I am sorry, I cannot look bookings up."), ("user", "useless")]


@pytest.mark.parametrize("format", ["jsonl", "openai", "trace2env"])
def test_export_then_import_gives_an_equal_dialogue_only_episode(tmp_path: Path, format: str) -> None:
    originals = list(_read(write_jsonl(tmp_path / "chats.jsonl", [TALK, TOOLS]))[0].values())
    made = Episode(id="made", env_id="airline", task="help",
                   final_context=[ContextEvent(role="user", content="hi"),
                                  ContextEvent(role="assistant", content="hello", name="agent")])
    originals.append(made)
    out = tmp_path / f"out.{format}.jsonl"
    assert export_episodes(originals, format, out) == 3
    again, rejects = _read(out)
    assert rejects == []
    assert [e.content() for e in again.values()] == [e.content() for e in originals]
    assert [e.dialogue_only for e in again.values()] == [True, False, True]


def test_every_text_and_event_importer_keeps_a_conversation_without_actions(tmp_path: Path) -> None:
    role_prefixed = tmp_path / "chat.txt"
    role_prefixed.write_text("Task: Manage the ledger.\nUser: what is my balance?\nAssistant: I cannot tell.\n")
    (episode,) = _read(role_prefixed, "role_prefixed")[0].values()
    assert episode.dialogue_only and episode.task == "Manage the ledger."
    assert [(c.role, c.content) for c in episode.final_context] == [("user", "what is my balance?"),
                                                                     ("assistant", "I cannot tell.")]
    trace2env = write_jsonl(tmp_path / "t2e.jsonl", [{"episode_id": "e1", "events": [
        {"kind": "instruction", "content": "Win."}, {"kind": "context", "role": "user", "content": "hello?"}]}])
    (episode,) = _read(trace2env)[0].values()
    assert episode.dialogue_only and [c.content for c in episode.final_context] == ["hello?"]
    native = tmp_path / "native.jsonl"
    native.write_text(json.dumps({"format": "worldsmith.episode/v1", "id": "n1", "turns": [],
                                  "final_context": [{"role": "user", "content": "hi"}]}) + "\n")
    (episode,) = _read(native, "native")[0].values()
    assert episode.dialogue_only and episode.final_context[0].content == "hi"
    untagged = tmp_path / "untagged.jsonl"  # no format tag, no action nor observation: still told apart as native
    untagged.write_text(Episode(id="n2", final_context=[ContextEvent(role="user", content="hi")]).model_dump_json())
    assert detect_format(untagged).importer.name == "native"


def _attribute(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def test_an_otel_conversation_with_chat_spans_only_is_dialogue_only(tmp_path: Path) -> None:
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat model",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": [
                _attribute("gen_ai.operation.name", "chat"), _attribute("gen_ai.conversation.id", "talk-otel"),
                _attribute("gen_ai.input.messages", json.dumps([{"role": "user", "content": "refund me"}])),
                _attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "content": "no"}]))]}
    path = write_json(tmp_path / "spans.json", {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    episodes, rejects = _read(path, "otel")
    assert rejects == [] and list(episodes) == ["talk-otel"]
    episode = episodes["talk-otel"]
    assert episode.dialogue_only and episode.task == "refund me"
    assert [(c.role, c.content) for c in episode.final_context] == [("user", "refund me"), ("assistant", "no")]


def test_the_exclusion_helper_keeps_tool_episodes_and_counts_the_rest(tmp_path: Path) -> None:
    episodes = list(_read(write_jsonl(tmp_path / "chats.jsonl", [TALK, TOOLS]))[0].values())
    kept, excluded = exclude_dialogue_only(iter(episodes))
    assert [e.id for e in kept] == ["tools"] and excluded == {"dialogue_only": 1}
    assert exclude_dialogue_only(kept) == (kept, {"dialogue_only": 0})
    assert add_exclusions(excluded, {"dialogue_only": 2}) == {"dialogue_only": 3}
    assert add_exclusions() == {"dialogue_only": 0}
