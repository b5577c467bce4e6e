"""Episodes as flat rows: one tuple per episode, one per turn, JSON fields as canonical text.

This is the one place that flattens an episode. Storage writes these rows as Parquet columns,
the content hash is computed over them, and an importer that must be fast (OpenAI logs run to
millions of turns) can emit rows directly instead of building a pydantic model per turn;
`EpisodeRows.to_episode()` turns rows back into the validated model for everyone else.
JSON text is canonical (object keys sorted), so the same content always gives the same rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from worldsmith.traces.model import (
    Action,
    ContextEvent,
    Episode,
    Observation,
    Provenance,
    SourceRef,
    Turn,
    turn_id,
)

__all__ = [
    "EPISODE_COLUMNS",
    "TURN_COLUMNS",
    "EpisodeRows",
    "arguments_json",
    "canonical_json",
    "context_json",
    "episode_from_rows",
    "episode_to_rows",
    "turn_from_row",
]

EPISODE_COLUMNS = (
    "episode_id", "env_id", "task", "task_id", "n_turns", "reward", "success", "split", "family",
    "initial_observation", "initial_info", "final_context", "metadata",
    "source_format", "source_path", "source_line", "source_pointer", "initial_state",
)
TURN_COLUMNS = (
    "episode_id", "turn_index", "action_name", "action_arguments", "action_raw", "action_call_id",
    "action_parse_error", "observation", "reward", "done", "info", "context",
    "prov_source", "prov_line", "prov_pointer", "prov_hash", "state",
)
# What the content hash covers: everything but ids, positions, provenance and ground-truth state.
_EPISODE_CONTENT = slice(1, 13)
_TURN_CONTENT = slice(2, 12)
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_dumps = orjson.dumps


def canonical_json(value: Any) -> str:
    """JSON text with sorted keys: equal values give equal text."""
    try:
        return _dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # non-string keys (only from objects built in code, never from parsed JSON)
        return _dumps(value, option=_SORTED).decode()


def _json_or_none(value: Any) -> str | None:
    return canonical_json(value) if value else None


def arguments_json(arguments: Any, raw: str | None, parse_error: str | None) -> str:
    """The stored arguments: the recorded text when it is exactly these arguments, else canonical JSON.

    Keeping the recorded text saves re-serialising millions of arguments at ingest; both the fast
    importer path and `episode_to_rows` apply this same rule, so they store (and hash) the same.
    """
    if raw is not None and parse_error is None and raw[:1] in ("{", "["):
        try:
            if orjson.loads(raw) == arguments:
                return raw
        except orjson.JSONDecodeError:
            pass
    return canonical_json(arguments)


def context_json(events: list[tuple[str, str, str | None]]) -> str | None:
    """Context events as `[[role, content, name], ...]` text (None when there are none)."""
    return _dumps(events).decode() if events else None


@dataclass(slots=True)
class EpisodeRows:
    """One episode as rows in `EPISODE_COLUMNS` / `TURN_COLUMNS` order."""

    episode: tuple[Any, ...]
    turns: list[tuple[Any, ...]]

    @property
    def id(self) -> str:
        return self.episode[0]

    def content_hash(self) -> str:
        """Digest of the content without ids and provenance: equal trajectories hash equal."""
        body = (self.episode[_EPISODE_CONTENT], [turn[_TURN_CONTENT] for turn in self.turns])
        return hashlib.blake2b(_dumps(body), digest_size=16).hexdigest()

    def renamed(self, new_id: str) -> EpisodeRows:
        return EpisodeRows((new_id, *self.episode[1:]), [(new_id, *turn[1:]) for turn in self.turns])

    def to_episode(self) -> Episode:
        """The validated model (raises pydantic.ValidationError if a row is malformed)."""
        turns = [dict(zip(TURN_COLUMNS, turn, strict=True)) for turn in self.turns]
        return episode_from_rows(dict(zip(EPISODE_COLUMNS, self.episode, strict=True)), turns)


def episode_to_rows(episode: Episode) -> EpisodeRows:
    source = episode.source
    initial = episode.initial_observation
    head = (
        episode.id, episode.env_id, episode.task, episode.task_id, len(episode.turns), episode.reward,
        episode.success, episode.split, episode.family,
        initial.text if initial is not None else None,
        _json_or_none(episode.initial_info),
        context_json([(c.role, c.content, c.name) for c in episode.final_context]),
        _json_or_none(episode.metadata),
        source.format if source else None, source.path if source else None,
        source.line if source else None, source.pointer if source else None,
        _state_json(episode.initial_state),
    )
    turns = []
    for turn in episode.turns:
        action = turn.action
        provenance = turn.provenance
        turns.append((
            episode.id, turn.index, action.name, arguments_json(action.arguments, action.raw, action.parse_error),
            action.raw, action.call_id,
            action.parse_error, turn.observation.text, turn.reward, turn.done, _json_or_none(turn.info),
            context_json([(c.role, c.content, c.name) for c in turn.context]),
            provenance.source if provenance else None, provenance.line if provenance else None,
            provenance.pointer if provenance else None, provenance.content_hash if provenance else None,
            _state_json(turn.state),
        ))
    return EpisodeRows(head, turns)


def _state_json(state: dict[str, Any] | None) -> str | None:
    return None if state is None else canonical_json(state)


def _loads(text: str | None, default: Any) -> Any:
    return orjson.loads(text) if text else default


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    return value


def _context(text: str | None) -> list[ContextEvent]:
    return [ContextEvent(role=role, content=content, name=name) for role, content, name in _loads(text, [])]


def turn_from_row(row: dict[str, Any]) -> Turn:
    """A turn from a row dict (as stored, or as `dict(zip(TURN_COLUMNS, row))`)."""
    provenance = None
    if row.get("prov_source") is not None:
        provenance = Provenance(
            source=row["prov_source"], line=row.get("prov_line"), pointer=row.get("prov_pointer"),
            content_hash=row.get("prov_hash") or "",
        )
    return Turn(
        index=row["turn_index"],
        id=turn_id(row["episode_id"], row["turn_index"]),
        action=Action(
            name=row["action_name"], arguments=_loads(row["action_arguments"], {}), raw=row.get("action_raw"),
            call_id=row.get("action_call_id"), parse_error=row.get("action_parse_error"),
        ),
        observation=Observation(text=row["observation"]),
        reward=_nan_to_none(row.get("reward")),
        done=row.get("done"),
        info=_loads(row.get("info"), {}),
        context=_context(row.get("context")),
        provenance=provenance,
        state=_loads(row.get("state"), None),
    )


def episode_from_rows(row: dict[str, Any], turn_rows: list[dict[str, Any]]) -> Episode:
    """An episode from its row and turn rows (turns in any order)."""
    source = None
    if row.get("source_format") is not None:
        source = SourceRef(
            format=row["source_format"], path=row.get("source_path") or "", line=row.get("source_line"),
            pointer=row.get("source_pointer"),
        )
    initial = row.get("initial_observation")
    turns = sorted((turn_from_row(t) for t in turn_rows), key=lambda turn: turn.index)
    return Episode(
        id=row["episode_id"],
        env_id=row.get("env_id"),
        task=row.get("task"),
        task_id=row.get("task_id"),
        initial_observation=Observation(text=initial) if initial is not None else None,
        initial_info=_loads(row.get("initial_info"), {}),
        turns=turns,
        final_context=_context(row.get("final_context")),
        reward=_nan_to_none(row.get("reward")),
        success=row.get("success"),
        split=row.get("split"),
        family=row.get("family"),
        metadata=_loads(row.get("metadata"), {}),
        source=source,
        initial_state=_loads(row.get("initial_state"), None),
    )
