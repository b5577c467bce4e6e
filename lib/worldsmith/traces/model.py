"""The one trace model every importer produces and every later stage consumes.

An `Episode` is a sequence of `Turn`s; a turn is one action sent to the environment and the
observation that came back, plus the context (user messages, agent text) seen since the
previous turn. Every turn carries a stable id (`<episode_id>#<index>`) and a `Provenance`
record so a worldbook rule can always cite the exact place in the source file it came from.
An episode without turns is *dialogue only* (a conversation in which the agent called no tool):
its messages are its `final_context`; it is kept for failure analysis, and building and
evaluation leave it out (`traces.dialogue.exclude_dialogue_only`).
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from worldsmith.util.errors import BadInputError

__all__ = [
    "Action",
    "ContextEvent",
    "Episode",
    "Observation",
    "Provenance",
    "SourceRef",
    "Turn",
    "content_digest",
    "parse_json_text",
    "split_turn_id",
    "turn_id",
]

_MODEL_CONFIG = ConfigDict(extra="forbid", validate_assignment=False)


def turn_id(episode_id: str, index: int) -> str:
    """The stable id of a turn: `<episode_id>#<index>`."""
    return f"{episode_id}#{index}"


def split_turn_id(value: str) -> tuple[str, int]:
    """Inverse of `turn_id`; raises ValueError naming the bad id."""
    episode_id, sep, index = value.rpartition("#")
    if not sep or not episode_id or not index.isdigit():
        raise BadInputError(f"not a turn id (expected '<episode_id>#<index>'): {value!r}")
    return episode_id, int(index)


class Provenance(BaseModel):
    """Where a turn (or episode) came from: file, line or JSON pointer, and a content hash."""

    model_config = _MODEL_CONFIG

    source: str = Field(description="Source file path as given at import time.")
    line: int | None = Field(default=None, description="1-based line of the record in the file.")
    pointer: str | None = Field(
        default=None, description="RFC 6901 JSON pointer inside the record (or file)."
    )
    content_hash: str = Field(default="", description="Hash of the source bytes of this item.")


class SourceRef(BaseModel):
    """The file and format an episode was imported from."""

    model_config = _MODEL_CONFIG

    format: str
    path: str
    line: int | None = None
    pointer: str | None = None


class Action(BaseModel):
    """An action as the agent sent it.

    `name` is the canonical action (tool) name, `arguments` its JSON arguments, `raw` the text
    exactly as recorded (for tool calls, the arguments string). `parse_error` says why the raw
    text could not be parsed into arguments; such actions are real agent behaviour and are kept.
    """

    model_config = _MODEL_CONFIG

    name: str
    arguments: Any = Field(default_factory=dict, description="JSON value (usually an object).")
    raw: str | None = None
    call_id: str | None = None
    parse_error: str | None = None


class Observation(BaseModel):
    """What the environment returned, verbatim; `data` is the parsed JSON when the text is JSON.

    `data` is derived from `text` on first use (and serialised with the model), so importing
    a million observations never pays for parsing the ones nobody looks at.
    """

    model_config = ConfigDict(extra="ignore")  # a serialised `data` is derived, not input

    text: str

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def data(self) -> Any:
        return parse_json_text(self.text)


def parse_json_text(text: str) -> Any:
    """Parse `text` as JSON when it is an object or array; None otherwise (never raises)."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


class ContextEvent(BaseModel):
    """Something that happened between actions and is not an observation: user or system
    messages, agent text, reasoning. Kept because simulators and policies need the context."""

    model_config = _MODEL_CONFIG

    role: str
    content: str
    name: str | None = None


class Turn(BaseModel):
    """One action and the observation it produced."""

    model_config = _MODEL_CONFIG

    index: int = Field(ge=0)
    id: str = Field(default="", description="`<episode_id>#<index>`; filled in by the Episode.")
    action: Action
    observation: Observation
    reward: float | None = None
    done: bool | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    context: list[ContextEvent] = Field(
        default_factory=list, description="Events seen after the previous turn, before this action."
    )
    provenance: Provenance | None = None
    state: dict[str, Any] | None = Field(
        default=None,
        description="Ground-truth environment state after this step, recorded for evaluation only; "
        "worldbook builders never see it unless asked (`Dataset.iter_episodes(with_state=True)`).",
    )


class Episode(BaseModel):
    """One trajectory of an agent in an environment."""

    model_config = _MODEL_CONFIG

    id: str = Field(min_length=1)
    env_id: str | None = None
    task: str | None = Field(default=None, description="Task or instruction text.")
    task_id: str | None = None
    initial_observation: Observation | None = Field(
        default=None, description="What the environment showed before the first action."
    )
    initial_info: dict[str, Any] = Field(
        default_factory=dict, description="The environment's info at reset (e.g. admissible actions)."
    )
    turns: list[Turn] = Field(default_factory=list)
    final_context: list[ContextEvent] = Field(
        default_factory=list, description="Events after the last observation."
    )
    reward: float | None = None
    success: bool | None = None
    split: str | None = None
    family: str | None = Field(default=None, description="Trajectory family (never split apart).")
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: SourceRef | None = None
    initial_state: dict[str, Any] | None = Field(
        default=None, description="Ground-truth environment state at reset (evaluation only, like `Turn.state`)."
    )

    @model_validator(mode="after")
    def _number_turns(self) -> Episode:
        for position, turn in enumerate(self.turns):
            if turn.index != position:
                raise ValueError(
                    f"turn {position} of episode {self.id!r} has index {turn.index}; "
                    "turn indexes must be 0, 1, 2, ..."
                )
            expected = turn_id(self.id, position)
            if turn.id != expected:
                turn.id = expected
        return self

    def content(self) -> dict[str, Any]:
        """Everything that describes what happened, without where it was read from.

        Two imports of the same trajectory from different files or formats have equal content.
        """
        body = self.model_dump(
            exclude={
                "source": True,
                "initial_state": True,
                "initial_observation": {"data"},
                "turns": {"__all__": {"provenance": True, "id": True, "state": True, "observation": {"data"}}},
            },
            mode="json",
        )
        return body

    def content_hash(self) -> str:
        """Digest of the content minus the id: equal trajectories hash equal, whatever their source."""
        from worldsmith.traces.rows import episode_to_rows  # rows depend on this module

        return episode_to_rows(self).content_hash()

    @property
    def length(self) -> int:
        return len(self.turns)

    @property
    def dialogue_only(self) -> bool:
        """No tool turn: only messages (`final_context`), nothing a simulator could learn or replay.

        Derived from the turns, so it survives every store, export and import unchanged."""
        return not self.turns

    @property
    def has_state(self) -> bool:
        return self.initial_state is not None or any(turn.state is not None for turn in self.turns)

    def without_state(self) -> Episode:
        """A copy without ground-truth state snapshots (what a simulator builder may see)."""
        if not self.has_state:
            return self
        turns = [turn.model_copy(update={"state": None}) for turn in self.turns]
        return self.model_copy(update={"initial_state": None, "turns": turns})


_HASH_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def content_digest(value: Any) -> str:
    """Stable 128-bit hex digest of a JSON value (keys sorted)."""
    return hashlib.blake2b(
        orjson.dumps(value, option=_HASH_OPTIONS), digest_size=16
    ).hexdigest()
