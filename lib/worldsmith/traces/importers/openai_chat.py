"""OpenAI chat messages with `tool_calls` and `tool` results.

Accepted shapes: a JSON array of conversations, a JSONL file with one conversation per line,
or a single conversation; a conversation is an object whose messages sit under `messages`,
`traj`, `conversation` or `conversations` (sibling keys give the id, task id, reward, ...), or a
bare list of messages. Each tool call becomes a turn; its result is found by `tool_call_id`
(ids may be reused within a conversation: the earliest open call with that id wins), else by
adjacency (the earliest open call). System, user and assistant text is kept as turn context.
Legacy `function_call` / `function` messages are read too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from worldsmith.traces.actions import parse_arguments
from worldsmith.traces.importers.base import JsonRecord, ReadItem, safe_records
from worldsmith.traces.importers.fields import episode_fields, fallback_episode_id, flatten_content
from worldsmith.traces.model import Action, ContextEvent, Episode, Observation, Provenance, SourceRef, Turn
from worldsmith.traces.report import Reject

__all__ = ["OpenAIChatImporter", "MESSAGE_KEYS"]

MESSAGE_KEYS = ("messages", "traj", "conversation", "conversations", "trajectory")
_RESULT_ROLES = ("tool", "function", "ipython")
_CONTEXT_ROLES = ("system", "developer", "user")
_EXPORT_KEY = "worldsmith"


def _digest(*parts: Any) -> str:
    return hashlib.blake2b(orjson.dumps(parts), digest_size=8).hexdigest()


@dataclass(slots=True)
class _Call:
    action: Action
    pointer: str
    message: dict[str, Any]
    call: dict[str, Any]
    context: list[ContextEvent]
    result: dict[str, Any] | None = None
    result_pointer: str | None = None


@dataclass(slots=True)
class _Conversation:
    """Aligns the calls and results of one conversation."""

    source: str
    line: int
    calls: list[_Call] = field(default_factory=list)
    open_calls: list[_Call] = field(default_factory=list)
    buffer: list[ContextEvent] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    def reject(self, reason: str, pointer: str, raw: Any) -> None:
        self.rejects.append(
            Reject(self.source, reason, line=self.line, pointer=pointer, raw=orjson.dumps(raw).decode())
        )

    def add_call(self, action: Action, pointer: str, message: dict[str, Any], call: dict[str, Any]) -> None:
        slot = _Call(action, pointer, message, call, self.buffer)
        self.calls.append(slot)
        self.open_calls.append(slot)
        self.buffer = []

    def add_result(self, message: dict[str, Any], pointer: str) -> None:
        call_id = message.get("tool_call_id")
        name = message.get("name")
        slot = None
        if isinstance(call_id, str) and call_id:
            slot = next((c for c in self.open_calls if c.action.call_id == call_id), None)
            if slot is None:  # the call was recorded without an id: fall back to adjacency
                slot = next((c for c in self.open_calls if c.action.call_id is None), None)
        else:
            slot = next((c for c in self.open_calls if name and c.action.name == name), None)
            if slot is None and self.open_calls:
                slot = self.open_calls[0]
        if slot is None:
            reason = "tool result has no matching call"
            if isinstance(call_id, str) and call_id:
                reason += f" (tool_call_id {call_id!r} was never called or already answered)"
            self.reject(reason, pointer, message)
            return
        slot.result = message
        slot.result_pointer = pointer
        self.open_calls.remove(slot)

    def turns(self) -> list[Turn]:
        turns: list[Turn] = []
        carried: list[ContextEvent] = []
        for call in self.calls:
            if call.result is None:
                suffix = f" (id {call.action.call_id!r})" if call.action.call_id else ""
                self.reject(f"tool call {call.action.name!r} has no result{suffix}", call.pointer, call.call)
                carried.extend(call.context)
                continue
            turns.append(self._turn(len(turns), call, carried + call.context))
            carried = []
        self.buffer = carried + self.buffer
        return turns

    def _turn(self, index: int, call: _Call, context: list[ContextEvent]) -> Turn:
        result = call.result or {}
        extra = result.get(_EXPORT_KEY) if isinstance(result.get(_EXPORT_KEY), dict) else {}
        observation = Observation(text=flatten_content(result.get("content")))
        info = dict(extra.get("info") or {})
        for key, value in result.items():
            if key not in ("role", "content", "tool_call_id", "name", _EXPORT_KEY):
                info[key] = value
        action = call.action
        restored = {key: extra[key] for key in ("raw", "call_id") if key in extra}
        if restored:
            action = action.model_copy(update=restored)
        return Turn(
            index=index,
            action=action,
            observation=observation,
            reward=extra.get("reward"),
            done=extra.get("done"),
            info=info,
            context=context,
            provenance=Provenance(
                source=self.source,
                line=self.line,
                pointer=call.pointer,
                content_hash=_digest(call.call, result),
            ),
        )


def _first_user_text(turns: list[Turn], trailing: list[ContextEvent]) -> str | None:
    for events in [turn.context for turn in turns] + [trailing]:
        for event in events:
            if event.role == "user" and event.content:
                return event.content
    return None


def _action_from_call(call: dict[str, Any]) -> Action | None:
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return None
    raw_arguments = function.get("arguments", function.get("input"))
    arguments, error = parse_arguments(raw_arguments)
    call_id = call.get("id")
    return Action(
        name=name,
        arguments=arguments,
        raw=raw_arguments if isinstance(raw_arguments, str) else None,
        call_id=call_id if isinstance(call_id, str) and call_id else None,
        parse_error=error,
    )


def conversation_messages(value: Any) -> tuple[str | None, list[Any]] | None:
    """The messages of a conversation record and the key holding them (None for a bare list)."""
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value[:3]):
        return None, value
    if isinstance(value, dict):
        for key in MESSAGE_KEYS:
            messages = value.get(key)
            if isinstance(messages, list):
                return key, messages
    return None


class OpenAIChatImporter:
    name = "openai"
    description = "OpenAI chat messages with tool_calls/tool results (JSON array, JSONL or one conversation)"

    _role = re.compile(r'"role"\s*:\s*"(assistant|tool|user|system|function)"')
    _keys = re.compile(r'"(messages|traj|conversation|conversations|trajectory)"\s*:\s*\[')

    def sniff(self, path: Path, head: str) -> float:
        if head.lstrip()[:1] not in ("[", "{"):
            return 0.0
        score = 0.0
        if self._role.search(head):
            score = 0.5
            if self._keys.search(head) or head.lstrip().startswith("[{\"role\"") or re.match(r"\s*\[\s*\[", head):
                score = 0.8
            if '"tool_calls"' in head or '"tool_call_id"' in head or '"function_call"' in head:
                score += 0.1
        elif self._keys.search(head):
            score = 0.4
        return min(score, 0.95)

    def read(self, path: Path) -> Iterator[ReadItem]:
        ordinal = 0

        def convert(record: JsonRecord) -> Iterator[ReadItem]:
            nonlocal ordinal
            ordinal += 1
            yield from self._convert(path, record, ordinal)

        return safe_records(path, convert)

    def _convert(self, path: Path, record: JsonRecord, ordinal: int) -> Iterator[ReadItem]:
        source = str(path)
        found = conversation_messages(record.value)
        if found is None:
            yield record.reject(
                source,
                "not a conversation: expected an object with a message list under one of "
                f"{', '.join(MESSAGE_KEYS)}, or a list of messages",
            )
            return
        key, messages = found
        fields = episode_fields(record.value, skip=(key,)) if isinstance(record.value, dict) else {"metadata": {}}
        base = f"{record.pointer}/{key}" if key else record.pointer
        conversation = _Conversation(source=source, line=record.line)
        for position, message in enumerate(messages):
            pointer = f"{base}/{position}"
            if not isinstance(message, dict):
                conversation.reject(f"message is a {type(message).__name__}, not an object", pointer, message)
                continue
            self._message(conversation, message, pointer)
        turns = conversation.turns()
        meta = fields.get("metadata", {})
        exported = meta.pop(_EXPORT_KEY, None) if isinstance(meta.get(_EXPORT_KEY), dict) else None
        task = fields.get("task")
        if task is None and exported is None:  # our own exports say the task was absent
            task = _first_user_text(turns, conversation.buffer)
        initial = None
        if exported and exported.get("initial_observation") is not None:
            initial = Observation(text=exported["initial_observation"])
        episode = Episode(
            id=fields.get("id") or fallback_episode_id(path, ordinal),
            env_id=fields.get("env_id"),
            task=task,
            task_id=fields.get("task_id"),
            initial_observation=initial,
            turns=turns,
            final_context=conversation.buffer,
            reward=fields.get("reward"),
            success=fields.get("success"),
            split=fields.get("split"),
            family=fields.get("family"),
            metadata=meta,
            source=SourceRef(format=self.name, path=source, line=record.line, pointer=record.pointer or None),
        )
        yield from conversation.rejects
        yield episode

    def _message(self, conversation: _Conversation, message: dict[str, Any], pointer: str) -> None:
        role = message.get("role")
        if role in _RESULT_ROLES:
            conversation.add_result(message, pointer)
            return
        if role == "assistant":
            for reasoning_key in ("reasoning_content", "reasoning"):
                if isinstance(message.get(reasoning_key), str) and message[reasoning_key]:
                    conversation.buffer.append(ContextEvent(role="reasoning", content=message[reasoning_key]))
            text = flatten_content(message.get("content"))
            if text:
                conversation.buffer.append(ContextEvent(role="assistant", content=text, name=_name(message)))
            calls = message.get("tool_calls")
            located = [(f"{pointer}/tool_calls/{i}", c) for i, c in enumerate(calls)] if isinstance(calls, list) else []
            if isinstance(message.get("function_call"), dict):
                located.append((f"{pointer}/function_call", message["function_call"]))
            for call_pointer, call in located:
                action = _action_from_call(call) if isinstance(call, dict) else None
                if action is None:
                    conversation.reject("tool call is not an object with a function name", call_pointer, call)
                else:
                    conversation.add_call(action, call_pointer, message, call)
            return
        if isinstance(role, str) and role:
            conversation.buffer.append(
                ContextEvent(role=role, content=flatten_content(message.get("content")), name=_name(message))
            )
            return
        conversation.reject("message has no role", pointer, message)


def _name(message: dict[str, Any]) -> str | None:
    name = message.get("name")
    return name if isinstance(name, str) and name else None
