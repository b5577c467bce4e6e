"""OpenAI chat messages with `tool_calls` and `tool` results.

Accepted shapes: a JSON array of conversations, a JSONL file with one conversation per line,
or a single conversation; a conversation is an object whose messages sit under `messages`,
`traj`, `conversation` or `conversations` (sibling keys give the id, task id, reward, ...), or a
bare list of messages. Each tool call becomes a turn; its result is found by `tool_call_id`
(ids may be reused within a conversation: the earliest open call with that id wins), else by
adjacency (the earliest open call). System, user and assistant text is kept as turn context.
Legacy `function_call` / `function` messages are read too.

Logs of this format run to millions of turns, so the importer builds flat `EpisodeRows`
(`read_rows`, what ingest uses) instead of a pydantic object per turn; `read()` turns the same
rows into validated `Episode`s.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from worldsmith.traces.actions import parse_arguments
from worldsmith.traces.import_report import Reject
from worldsmith.traces.importers.base import (
    JsonRecord,
    ReadItem,
    format_validation_error,
    iter_json_records,
    safe_records,
)
from worldsmith.traces.importers.episode_fields import episode_fields, fallback_episode_id, flatten_content
from worldsmith.traces.rows import EPISODE_COLUMNS, EpisodeRows, arguments_json, canonical_json, context_json

__all__ = ["OpenAIChatImporter", "MESSAGE_KEYS"]

MESSAGE_KEYS = ("messages", "traj", "conversation", "conversations", "trajectory")
CONTAINER_KEYS = ("simulations", "episodes", "trajectories", "results", "data", "items", "records", "conversations")
# Results documents whose conversation lists are streamed rather than loaded (unambiguous keys only).
_STREAMED_CONTAINERS = frozenset({"simulations", "episodes", "trajectories"})
_RESULT_ROLES = ("tool", "function", "ipython")
_EXPORT_KEY = "worldsmith"
_STANDARD_RESULT_KEYS = frozenset({"role", "content", "tool_call_id", "name"})


def _digest(*parts: str) -> str:
    """Fingerprint of a turn's source text (change detection, not security): md5 is the cheapest here."""
    return hashlib.md5("\x1f".join(parts).encode(), usedforsecurity=False).hexdigest()[:16]


def _float_or_none(value: Any, what: str) -> float | None:
    if value is None or isinstance(value, (int, float)):
        return None if value is None else float(value)
    raise ValueError(f"{what} must be a number, not {type(value).__name__}")


def _bool_or_none(value: Any, what: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"{what} must be true or false, not {type(value).__name__}")


def _dict_or_empty(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise ValueError(f"{what} must be an object, not {type(value).__name__}")


@dataclass(slots=True)
class _Call:
    """One tool call waiting for (or matched with) its result; `action` is an Action dict."""

    action: dict[str, Any]
    arguments_text: str
    pointer: str
    call: dict[str, Any]
    context: list[tuple[str, str, str | None]]
    requestor: str = "assistant"
    raw_is_arguments: bool = False  # `arguments` were parsed from `raw` exactly
    result: dict[str, Any] | None = None


@dataclass(slots=True)
class _Conversation:
    """Aligns the calls and results of one conversation and builds its turn rows.

    Untrusted values are type-checked here (the rows skip pydantic on the ingest path);
    `EpisodeRows.to_episode()` validates the same rows for API callers.
    """

    source: str
    line: int
    calls: list[_Call] = field(default_factory=list)
    open_calls: list[_Call] = field(default_factory=list)
    buffer: list[tuple[str, str, str | None]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    def reject(self, reason: str, pointer: str, raw: Any) -> None:
        self.rejects.append(
            Reject(self.source, reason, line=self.line, pointer=pointer, raw=orjson.dumps(raw).decode())
        )

    def add_call(self, call: dict[str, Any], pointer: str, requestor: str = "assistant") -> None:
        function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
        name = function.get("name")
        if not isinstance(name, str) or not name:
            self.reject("tool call is not an object with a function name", pointer, call)
            return
        raw = function.get("arguments")
        if raw is None:
            raw = function.get("input")
        raw_is_arguments = False
        if isinstance(raw, str) and raw[:1] in ("{", "["):
            try:
                arguments, error = orjson.loads(raw), None
                raw_is_arguments = True
            except orjson.JSONDecodeError:
                arguments, error = parse_arguments(raw)
        else:
            arguments, error = parse_arguments(raw)
        call_id = call.get("id")
        action = {
            "name": name, "arguments": arguments, "raw": raw if isinstance(raw, str) else None,
            "call_id": call_id if isinstance(call_id, str) and call_id else None, "parse_error": error,
        }
        slot = _Call(action, raw if isinstance(raw, str) else orjson.dumps(raw).decode(), pointer, call, self.buffer,
                     requestor, raw_is_arguments)
        self.calls.append(slot)
        self.open_calls.append(slot)
        self.buffer = []

    def add_result(self, message: dict[str, Any], base: str, position: int) -> None:
        call_id = message.get("tool_call_id") or message.get("id")  # tau2-bench tool messages carry `id`
        name = message.get("name")
        open_calls = self.open_calls
        slot = None
        if open_calls and open_calls[0].action["call_id"] == call_id and call_id:
            slot = open_calls[0]  # the common case: results come back in call order
        elif isinstance(call_id, str) and call_id:
            slot = next((c for c in open_calls if c.action["call_id"] == call_id), None)
            if slot is None:  # the call was recorded without an id: fall back to adjacency
                slot = next((c for c in open_calls if c.action["call_id"] is None), None)
        else:
            slot = next((c for c in open_calls if name and c.action["name"] == name), None)
            if slot is None and open_calls:
                slot = open_calls[0]
        if slot is None:
            reason = "tool result has no matching call"
            if isinstance(call_id, str) and call_id:
                reason += f" (tool_call_id {call_id!r} was never called or already answered)"
            self.reject(reason, f"{base}/{position}", message)
            return
        slot.result = message
        open_calls.remove(slot)

    def turns(self, episode_id: str) -> list[tuple[Any, ...]]:
        """Matched calls as rows in `TURN_COLUMNS` order; unanswered calls become rejects."""
        turns: list[tuple[Any, ...]] = []
        carried: list[tuple[str, str, str | None]] = []
        for call in self.calls:
            if call.result is None:
                suffix = f" (id {call.action['call_id']!r})" if call.action["call_id"] else ""
                self.reject(f"tool call {call.action['name']!r} has no result{suffix}", call.pointer, call.call)
                carried.extend(call.context)
                continue
            turns.append(self._turn(episode_id, len(turns), call, carried + call.context if carried else call.context))
            carried = []
        self.buffer = carried + self.buffer
        return turns

    def _turn(
        self, episode_id: str, index: int, call: _Call, context: list[tuple[str, str, str | None]]
    ) -> tuple[Any, ...]:
        result = call.result or {}
        content = result.get("content")
        text = content if isinstance(content, str) else flatten_content(content)
        action = call.action
        reward = done = info = None
        if not result.keys() <= _STANDARD_RESULT_KEYS:  # extra fields: per-turn reward/done/info
            extra = _dict_or_empty(result.get(_EXPORT_KEY), f"{call.pointer}: '{_EXPORT_KEY}'")
            info = dict(_dict_or_empty(extra.get("info"), "info"))
            for key, value in result.items():
                if key not in _STANDARD_RESULT_KEYS and key != _EXPORT_KEY and not (key == "id" and value == action["call_id"]):
                    info[key] = value
            reward = _float_or_none(extra.get("reward"), "reward")
            done = _bool_or_none(extra.get("done"), "done")
            if "raw" in extra or "call_id" in extra:
                action = {**action, **{key: extra[key] for key in ("raw", "call_id") if key in extra}}
        if call.requestor != "assistant":  # e.g. a simulated user acting on the environment
            info = {**(info or {}), "requestor": call.requestor}
        return (
            episode_id, index, action["name"],
            # arguments parsed from this very text: store the text (what arguments_json would choose)
            action["raw"] if action is call.action and call.raw_is_arguments
            else arguments_json(action["arguments"], action["raw"], action["parse_error"]),
            action["raw"], action["call_id"],
            action["parse_error"], text, reward, done, canonical_json(info) if info else None, context_json(context),
            self.source, self.line, call.pointer, _digest(action["name"], call.arguments_text, text), None,
        )


def _first_user_text(calls: list[_Call], trailing: list[tuple[str, str, str | None]]) -> str | None:
    for events in [call.context for call in calls] + [trailing]:
        for role, content, _ in events:
            if role == "user" and content:
                return content
    return None


def _group_bare_messages(records: Iterator[JsonRecord]) -> Iterator[JsonRecord]:
    """A document that is one bare list of messages streams as message records: regroup them."""
    group: list[JsonRecord] = []
    for record in records:
        value = record.value
        if record.error is None and isinstance(value, dict) and "role" in value and conversation_messages(value) is None:
            group.append(record)
            continue
        if group:
            yield _merged(group)
            group = []
        yield record
    if group:
        yield _merged(group)


def _merged(group: list[JsonRecord]) -> JsonRecord:
    return JsonRecord(line=group[0].line, pointer="", raw=None, value=[record.value for record in group])


def _container_key(value: Any) -> str | None:
    """The key of a list of conversations inside a results document (tau2-bench `simulations`, ...)."""
    if not isinstance(value, dict) or conversation_messages(value) is not None:
        return None
    for key in CONTAINER_KEYS:
        items = value.get(key)
        if isinstance(items, list) and items and conversation_messages(items[0]) is not None:
            return key
    return None


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
    _keys = re.compile(r'"(messages|traj|conversation|conversations|trajectory|simulations)"\s*:\s*\[')

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
        source = str(path)
        for item in self.read_rows(path):
            if isinstance(item, Reject):
                yield item
                continue
            try:
                yield item.to_episode()
            except ValidationError as error:  # the rows were checked while built: a bug if it happens
                yield Reject(source, f"invalid record: {format_validation_error(error)}", pointer=item.episode[EPISODE_COLUMNS.index("source_pointer")])

    def read_rows(self, path: Path) -> Iterator[EpisodeRows | Reject]:
        """Episodes as flat rows, without a pydantic object per turn (the ingest fast path)."""
        ordinal = 0
        source = str(path)

        def convert(record: JsonRecord) -> Iterator[EpisodeRows | Reject]:
            nonlocal ordinal
            if record.envelope:  # what is left of a results document once its conversations streamed out
                return
            container = _container_key(record.value)
            if container is None:
                ordinal += 1
                yield from self._convert(path, record, ordinal)
                return
            for index, item in enumerate(record.value[container]):  # e.g. {"simulations": [...]}
                ordinal += 1
                sub = JsonRecord(line=record.line, pointer=f"{record.pointer}/{container}/{index}", raw=None, value=item)
                try:
                    yield from self._convert(path, sub, ordinal)
                except ValidationError as error:
                    yield sub.reject(source, f"invalid record: {format_validation_error(error)}")
                except (ValueError, TypeError, KeyError, AttributeError) as error:
                    yield sub.reject(source, f"invalid record: {error}")

        return safe_records(path, convert, _group_bare_messages(iter_json_records(path, _STREAMED_CONTAINERS)))

    def _convert(self, path: Path, record: JsonRecord, ordinal: int) -> Iterator[EpisodeRows | Reject]:
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
        fields = episode_fields(record.value, skip=(key,) if key else ()) if isinstance(record.value, dict) \
            else {"metadata": {}}
        episode_id = fields.get("id") or fallback_episode_id(path, ordinal)
        base = f"{record.pointer}/{key}" if key else record.pointer
        conversation = _Conversation(source=source, line=record.line)
        open_calls = conversation.open_calls
        for position, message in enumerate(messages):
            if not isinstance(message, dict):
                conversation.reject(f"message is a {type(message).__name__}, not an object", f"{base}/{position}", message)
                continue
            # The common case inline (a result answering the oldest open call by its id): this
            # loop runs twice per turn over millions of turns.
            if message.get("role") == "tool" and open_calls:
                call_id = message.get("tool_call_id")
                if call_id and open_calls[0].action["call_id"] == call_id:
                    open_calls.pop(0).result = message
                    continue
            self._message(conversation, message, base, position)
        task_from_user = _first_user_text(conversation.calls, conversation.buffer)
        turns = conversation.turns(episode_id)
        meta = fields.get("metadata", {})
        exported = meta.pop(_EXPORT_KEY, None) if isinstance(meta.get(_EXPORT_KEY), dict) else None
        task = fields.get("task")
        if task is None and exported is None:  # our own exports say the task was absent
            task = task_from_user
        initial = initial_info = None
        if exported is not None:
            initial = exported.get("initial_observation")
            if initial is not None and not isinstance(initial, str):
                raise ValueError(f"'{_EXPORT_KEY}.initial_observation' must be text")
            initial_info = _dict_or_empty(exported.get("initial_info"), f"'{_EXPORT_KEY}.initial_info'")
        rows = EpisodeRows(
            (
                episode_id, fields.get("env_id"), task, fields.get("task_id"), len(turns), fields.get("reward"),
                fields.get("success"), fields.get("split"), fields.get("family"), initial,
                canonical_json(initial_info) if initial_info else None, context_json(conversation.buffer),
                canonical_json(meta) if meta else None, self.name, source, record.line, record.pointer or None,
                None,
            ),
            turns,
        )
        yield from conversation.rejects
        yield rows

    def _message(self, conversation: _Conversation, message: dict[str, Any], base: str, position: int) -> None:
        role = message.get("role")
        if role in _RESULT_ROLES:
            conversation.add_result(message, base, position)
            return
        if not isinstance(role, str) or not role:
            conversation.reject("message has no role", f"{base}/{position}", message)
            return
        if "reasoning_content" in message or "reasoning" in message:
            for reasoning_key in ("reasoning_content", "reasoning"):
                reasoning = message.get(reasoning_key)
                if isinstance(reasoning, str) and reasoning:
                    conversation.buffer.append(("reasoning", reasoning, None))
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else flatten_content(content))
        calls = message.get("tool_calls")
        if text or (role != "assistant" and not calls):
            name = message.get("name")
            conversation.buffer.append((role, text, name if isinstance(name, str) and name else None))
        if calls:  # usually the assistant; a simulated user may call tools too (tau2-bench telecom)
            if not isinstance(calls, list):
                calls = [calls]
            for index, call in enumerate(calls):
                pointer = f"{base}/{position}/tool_calls/{index}"
                if isinstance(call, dict):
                    conversation.add_call(call, pointer, role)
                else:
                    conversation.reject("tool call is not an object with a function name", pointer, call)
        if "function_call" in message and isinstance(message["function_call"], dict):
            conversation.add_call(message["function_call"], f"{base}/{position}/function_call", role)


