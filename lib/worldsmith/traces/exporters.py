"""Writers for the native, OpenAI-messages and Trace2Env layouts.

Every exporter keeps all of an episode's content, so export followed by import gives back an
equal episode (`Episode.content()`); fields a format has no place for travel under a
`worldsmith` key that OpenAI-compatible readers ignore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from worldsmith.traces.importers.native import FORMAT_TAG
from worldsmith.traces.model import Action, ContextEvent, Episode, Turn
from worldsmith.util.atomic import atomic_write
from worldsmith.util.registry import NotRegisteredError, Registry

__all__ = ["ENTRY_POINT_GROUP", "EXPORTERS", "Exporter", "UnknownExportFormatError", "episode_to_native", "episode_to_openai", "episode_to_trace2env",
           "export_episodes", "register_exporter"]

_EXPORT_KEY = "worldsmith"


def episode_to_native(episode: Episode) -> dict[str, Any]:
    return {"format": FORMAT_TAG, **episode.model_dump(mode="json", exclude_none=False)}


def _episode_fields(episode: Episode) -> dict[str, Any]:
    fields: dict[str, Any] = {"id": episode.id}
    for key in ("env_id", "task", "task_id", "reward", "success", "split", "family"):
        value = getattr(episode, key)
        if value is not None:
            fields[key] = value
    if episode.metadata:
        fields["metadata"] = episode.metadata
    return fields


def _outcome(turn: Turn) -> dict[str, Any]:
    """The turn's reward, done and info, only those that are set."""
    outcome: dict[str, Any] = {}
    if turn.reward is not None:
        outcome["reward"] = turn.reward
    if turn.done is not None:
        outcome["done"] = turn.done
    if turn.info:
        outcome["info"] = turn.info
    return outcome


def _message(event: ContextEvent) -> dict[str, Any]:
    message: dict[str, Any] = {"role": event.role, "content": event.content}
    if event.name:
        message["name"] = event.name
    return message


def episode_to_openai(episode: Episode) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for turn in episode.turns:
        messages.extend(_message(event) for event in turn.context)
        action = turn.action
        call_id = action.call_id or f"call_{turn.index}"
        arguments = _arguments_text(action)
        messages.append({
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": action.name, "arguments": arguments}}],
        })
        extra = _outcome(turn)
        if action.raw != (arguments if action.raw is not None else None):
            extra["raw"] = action.raw
        if action.call_id is None:
            extra["call_id"] = None  # the id above was made up for the export
        tool: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "name": action.name, "content": turn.observation.text}
        if extra:
            tool[_EXPORT_KEY] = extra
        messages.append(tool)
    messages.extend(_message(event) for event in episode.final_context)
    record = _episode_fields(episode)
    initial = episode.initial_observation.text if episode.initial_observation is not None else None
    record[_EXPORT_KEY] = {"initial_observation": initial}
    if episode.initial_info:
        record[_EXPORT_KEY]["initial_info"] = episode.initial_info
    record["messages"] = messages
    return record


def _arguments_text(action: Action) -> str:
    """The recorded arguments string when it still says the same (or was malformed), else JSON."""
    if action.raw is not None and (action.parse_error is not None or _same_json(action.raw, action.arguments)):
        return action.raw
    return orjson.dumps(action.arguments).decode()


def _same_json(text: str, value: Any) -> bool:
    try:
        return orjson.loads(text) == value
    except orjson.JSONDecodeError:
        return False


def episode_to_trace2env(episode: Episode) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    if episode.task is not None:
        events.append({"kind": "instruction", "content": episode.task})
    if episode.initial_observation is not None:
        initial: dict[str, Any] = {"kind": "observation", "content": episode.initial_observation.text}
        if episode.initial_info:
            initial["info"] = episode.initial_info
        events.append(initial)
    for turn in episode.turns:
        events.extend(_context_event(event) for event in turn.context)
        action: dict[str, Any] = {"kind": "action", "name": turn.action.name, "arguments": turn.action.arguments}
        if turn.action.raw is not None:
            action["raw"] = turn.action.raw
        if turn.action.call_id is not None:
            action["call_id"] = turn.action.call_id
        if turn.action.parse_error is not None:
            action["parse_error"] = turn.action.parse_error
        events.append(action)
        events.append({"kind": "observation", "content": turn.observation.text, **_outcome(turn)})
    events.extend(_context_event(event) for event in episode.final_context)
    fields = _episode_fields(episode)
    fields["episode_id"] = fields.pop("id")
    if "env_id" in fields:
        fields["environment_id"] = fields.pop("env_id")
    fields.pop("task", None)
    return {**fields, "events": events}


def _context_event(event: ContextEvent) -> dict[str, Any]:
    item: dict[str, Any] = {"kind": "context", "role": event.role, "content": event.content}
    if event.name:
        item["name"] = event.name
    return item


Exporter = Callable[[Episode], dict[str, Any]]  # one episode -> one JSON line of the format


class UnknownExportFormatError(NotRegisteredError, ValueError):
    """No exporter writes this format (a ValueError, as `export_episodes`' error always was)."""


ENTRY_POINT_GROUP = "worldsmith.exporters"
# Every export format by name; a third-party format plugs in with `register_exporter` (also a decorator), or as an
# installed package's `worldsmith.exporters` entry point (an Exporter function, or a module that registers one).
EXPORTERS: Registry[Exporter] = Registry("export format", entry_point_group=ENTRY_POINT_GROUP,
                                         not_found=UnknownExportFormatError, known_label="choose one of:")


def register_exporter(name: str, convert: Exporter | None = None, *,
                      replace: bool = False) -> Exporter | Callable[[Exporter], Exporter]:
    """Add `convert` as export format `name` (refused if taken, unless `replace`); without it, a decorator."""
    if convert is None:
        return EXPORTERS.register(name, replace=replace)
    return EXPORTERS.register(name, convert, replace=replace)


for _name, _convert in (("jsonl", episode_to_native), ("native", episode_to_native), ("openai", episode_to_openai),
                        ("trace2env", episode_to_trace2env)):
    EXPORTERS.register(_name, _convert)


def export_episodes(episodes: Iterable[Episode], format: str, out: Path) -> int:
    """Write episodes as JSONL in `format`, atomically; returns the number written."""
    convert = EXPORTERS.get(format)
    count = 0
    with atomic_write(Path(out)) as handle:
        for episode in episodes:
            handle.write(orjson.dumps(convert(episode), option=orjson.OPT_APPEND_NEWLINE))
            count += 1
    return count
