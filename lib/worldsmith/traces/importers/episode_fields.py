"""Episode-level fields found beside the turns in a record (id, task, reward, ...).

Harnesses name these differently (`task_id`, `instance_id`; `reward`, `score`); one table of
accepted keys keeps every importer consistent. Keys not understood go to `metadata` verbatim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

__all__ = ["EpisodeFields", "episode_fields", "fallback_episode_id", "flatten_content"]

ID_KEYS = ("id", "episode_id", "conversation_id", "trajectory_id", "session_id", "uuid", "run_id")
TASK_ID_KEYS = ("task_id", "instance_id", "problem_id", "task_index", "sample_id")
TASK_KEYS = ("task", "instruction", "goal", "query", "question", "objective")
ENV_KEYS = ("env_id", "environment_id", "environment", "env", "domain")
REWARD_KEYS = ("reward", "score", "total_reward", "return")
SUCCESS_KEYS = ("success", "succeeded", "resolved", "passed", "won", "solved")
SPLIT_KEYS = ("split",)
FAMILY_KEYS = ("family", "trajectory_family", "group", "group_id")

EpisodeFields = dict[str, Any]


def _first(record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for key in keys:
        value = record.get(key)
        if value is not None and value != "":
            return key, value
    return None, None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _nested_instruction(record: dict[str, Any]) -> str | None:
    """`info.task.instruction` and similar nestings used by tool-agent benchmarks."""
    for outer in ("info", "metadata", "task"):
        holder = record.get(outer)
        if isinstance(holder, dict):
            for inner in ("instruction", "goal", "query", "description"):
                if isinstance(holder.get(inner), str):
                    return holder[inner]
            task = holder.get("task")
            if isinstance(task, dict):
                for inner in ("instruction", "goal", "query", "description"):
                    if isinstance(task.get(inner), str):
                        return task[inner]
    return None


def episode_fields(record: dict[str, Any], *, skip: tuple[str, ...] = ()) -> EpisodeFields:
    """Pick the episode-level fields out of a record; every other key becomes metadata.

    `skip` names keys that hold the turns themselves (never copied to metadata). A key is
    consumed only when its value became a field, so nothing in the record is lost.
    """
    used: set[str] = set()

    def take(keys: tuple[str, ...], convert: Any) -> Any:
        key, value = _first(record, keys)
        converted = convert(value)
        if key is not None and converted is not None:
            used.add(key)
        return converted

    fields: EpisodeFields = {
        "id": take(ID_KEYS, _as_text),
        "task_id": take(TASK_ID_KEYS, _as_text),
        "task": take(TASK_KEYS, lambda v: v if isinstance(v, str) else None),
        "env_id": take(ENV_KEYS, _as_text),
        "reward": take(REWARD_KEYS, _as_float),
        "success": take(SUCCESS_KEYS, lambda v: bool(v) if isinstance(v, (bool, int, float)) else None),
        "split": take(SPLIT_KEYS, _as_text),
        "family": take(FAMILY_KEYS, _as_text),
    }
    if fields["task"] is None:
        fields["task"] = _nested_instruction(record)
    if fields["reward"] is None and isinstance(record.get("reward_info"), dict):  # tau2-bench
        fields["reward"] = _as_float(record["reward_info"].get("reward"))
    metadata = {key: value for key, value in record.items() if key not in used and key not in skip}
    if isinstance(metadata.get("metadata"), dict):  # a record's own metadata object is merged in
        metadata = {**metadata.pop("metadata"), **metadata}
    fields["metadata"] = metadata
    return fields


def fallback_episode_id(path: Path, ordinal: int) -> str:
    """An id for a record that carries none: `<file stem>-<ordinal>` (stable for a given file)."""
    return f"{path.stem}-{ordinal}"


def flatten_content(content: Any) -> str:
    """Message content as text: strings as-is, content-part lists joined, other JSON serialised."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") in ("image_url", "image", "input_image"):
                    parts.append("[image]")
                elif isinstance(part.get("content"), (str, list)):
                    parts.append(flatten_content(part["content"]))
                else:
                    parts.append(orjson.dumps(part).decode())
        return "\n".join(parts)
    return orjson.dumps(content).decode()
