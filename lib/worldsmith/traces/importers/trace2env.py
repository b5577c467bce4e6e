"""The Trace2Env episode layout: an instruction event, then alternating action/observation events.

    {"episode_id": "...", "environment_id": "...", "task_id": ..., "reward": ..., "metadata": {...},
     "events": [{"kind": "instruction", "content": "..."},
                {"kind": "observation", "content": "..."},          # optional initial observation
                {"kind": "context", "role": "user", "content": "..."},
                {"kind": "action", "name": "...", "arguments": {...}, "raw": "...", "call_id": "..."},
                {"kind": "observation", "content": "...", "reward": 0.0, "done": false, "info": {}}]}

One episode per JSONL line (or a JSON array of them). `type` or `role` are accepted in place of
`kind`; an action may also be given as text (`"content": "go north"`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from worldsmith.traces.actions import action_from_text, parse_arguments
from worldsmith.traces.import_report import Reject
from worldsmith.traces.importers.base import JsonRecord, ReadItem, safe_records
from worldsmith.traces.importers.episode_fields import episode_fields, fallback_episode_id, flatten_content
from worldsmith.traces.model import (
    Action,
    ContextEvent,
    Episode,
    Observation,
    Provenance,
    SourceRef,
    Turn,
    content_digest,
)

__all__ = ["Trace2EnvImporter"]

_KIND_KEYS = ("kind", "type", "role")


def _kind(event: dict[str, Any]) -> str | None:
    for key in _KIND_KEYS:
        value = event.get(key)
        if isinstance(value, str):
            return value.lower()
    return None


def _event_action(event: dict[str, Any]) -> Action:
    name = event.get("name")
    call_id = event.get("call_id") if isinstance(event.get("call_id"), str) else None
    if isinstance(name, str) and name:
        arguments, error = parse_arguments(event.get("arguments"))
        if isinstance(event.get("parse_error"), str):
            error = event["parse_error"]
        raw = event.get("raw") if isinstance(event.get("raw"), str) else None
        return Action(name=name, arguments=arguments, raw=raw, call_id=call_id, parse_error=error)
    content = event.get("content")
    if isinstance(content, str):
        return action_from_text(content, call_id=call_id)
    raise ValueError("action event has neither a name nor text content")


class Trace2EnvImporter:
    name = "trace2env"
    description = "Trace2Env episodes: an instruction event then alternating action/observation events"

    def sniff(self, path: Path, head: str) -> float:
        if head.lstrip()[:1] not in ("{", "["):
            return 0.0
        compact = head.replace(" ", "")
        if '"events":[' in compact and ('"instruction"' in compact or '"observation"' in compact):
            return 0.9
        return 0.0

    def read(self, path: Path) -> Iterator[ReadItem]:
        ordinal = 0

        def convert(record: JsonRecord) -> Iterator[ReadItem]:
            nonlocal ordinal
            ordinal += 1
            yield from self._convert(path, record, ordinal)

        return safe_records(path, convert)

    def _convert(self, path: Path, record: JsonRecord, ordinal: int) -> Iterator[ReadItem]:
        source = str(path)
        value = record.value
        if not isinstance(value, dict) or not isinstance(value.get("events"), list):
            yield record.reject(source, "not a Trace2Env episode: expected an object with an 'events' list")
            return
        fields = episode_fields(value, skip=("events",))
        metadata = fields["metadata"]
        task = fields.get("task")
        initial: Observation | None = None
        initial_info: dict[str, Any] = {}
        turns: list[Turn] = []
        context: list[ContextEvent] = []
        pending: tuple[Action, dict[str, Any], str] | None = None
        rejects: list[Reject] = []
        for position, event in enumerate(value["events"]):
            pointer = f"{record.pointer}/events/{position}"
            kind = _kind(event) if isinstance(event, dict) else None
            if kind is None:
                rejects.append(Reject(source, "event has no kind", line=record.line, pointer=pointer,
                                      raw=orjson.dumps(event).decode()))
                continue
            if kind in ("instruction", "task"):
                task = flatten_content(event.get("content"))
            elif kind == "action":
                if pending is not None:
                    rejects.append(Reject(source, "action has no observation (another action follows)",
                                          line=record.line, pointer=pending[2], raw=orjson.dumps(pending[1]).decode()))
                pending = (_event_action(event), event, pointer)
            elif kind == "observation":
                text = flatten_content(event.get("content"))
                if pending is None:
                    if not turns and initial is None:
                        initial = Observation(text=text)
                        initial_info = event.get("info") or {}
                    else:
                        rejects.append(Reject(source, "observation has no action", line=record.line,
                                              pointer=pointer, raw=orjson.dumps(event).decode()))
                    continue
                action, action_event, action_pointer = pending
                pending = None
                turns.append(Turn(
                    index=len(turns), action=action, observation=Observation(text=text),
                    reward=event.get("reward"), done=event.get("done"), info=event.get("info") or {},
                    context=context,
                    provenance=Provenance(source=source, line=record.line, pointer=action_pointer,
                                          content_hash=content_digest([action_event, event])[:16]),
                ))
                context = []
            else:
                role = event.get("role") if isinstance(event.get("role"), str) and kind == "context" else kind
                context.append(ContextEvent(role=role, content=flatten_content(event.get("content")),
                                            name=event.get("name") if isinstance(event.get("name"), str) else None))
        if pending is not None:
            rejects.append(Reject(source, "action has no observation (episode ends)", line=record.line,
                                  pointer=pending[2], raw=orjson.dumps(pending[1]).decode()))
        yield from rejects
        yield Episode(
            id=fields.get("id") or fallback_episode_id(path, ordinal),
            env_id=fields.get("env_id"), task=task, task_id=fields.get("task_id"),
            initial_observation=initial, initial_info=initial_info, turns=turns, final_context=context,
            reward=fields.get("reward"), success=fields.get("success"), split=fields.get("split"),
            family=fields.get("family"), metadata=metadata,
            source=SourceRef(format=self.name, path=source, line=record.line, pointer=record.pointer or None),
        )
