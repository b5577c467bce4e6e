"""The one protocol for everything that plays an environment: `WorldModel`.

The rule-based harness, every baseline (direct prompting, trace RAG, worldbook prompting,
nearest evidence, the real environment as oracle) and later EnvACE's rehearse role implement
it, so sessions, `SimEnv` and the evaluation code drive any of them the same way:

    model.start(prefix)                 # an Episode (observed turns) or an opening observation
    prediction = model.predict(action)  # observation, proposed effects, outcome, audit
    model.commit()                      # accept it into history and state

`predict` never changes history or state, so several actions can be tried from the same point;
only `commit` moves the model forward (and only the last prediction can be committed).
"""

from __future__ import annotations

import copy
import re
import time
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from worldsmith.envs.base import InvalidActionError
from worldsmith.sim.canonical import canonical_action
from worldsmith.traces.actions import action_line  # what prompts show: the tiny model's training line
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.worldbook.model import ActionSchema, Effect

__all__ = [
    "Audit",
    "HistoryItem",
    "NothingToCommitError",
    "Prediction",
    "WorldModel",
    "WorldModelBase",
    "action_line",
    "episode_prefix",
]

_OUTCOME = re.compile(r"^(success|unknown|failure(:[A-Za-z0-9_\-]+)?)$")


class Audit(BaseModel):
    """How a prediction was made: the route taken and what it used and cost (shown beside every turn)."""

    model_config = ConfigDict(extra="forbid")

    route: str = Field(description='e.g. "fast_path", "agent", "model", "oracle", "fallback:nearest_evidence".')
    source: str | None = Field(default=None, description='The answer source that answered, e.g. "rule", "entity", '
                               '"memory", "nearest_evidence", "model" (`sim.sources`); None: nothing answered.')
    rules: list[str] = Field(default_factory=list, description="Ids of the worldbook rules that fired.")
    retrieved: list[dict[str, Any]] = Field(default_factory=list, description="Evidence or items looked up.")
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    model_calls: int = Field(default=0, ge=0)
    tokens: int = Field(default=0, ge=0, description="Prompt plus completion tokens of those calls.")
    latency_s: float = Field(default=0.0, ge=0.0)
    notes: list[str] = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list)
    rejected_effects: list[dict[str, Any]] = Field(default_factory=list)
    records: list[dict[str, Any]] = Field(
        default_factory=list, description="Tool-API records the answer read or changed: {key, before, after}.")
    prompt_fit: dict[str, Any] | None = Field(
        default=None, description="A prompted model's fit to its context window (`sim.prompts.PromptFit`): the "
        "tokens sent and allowed, and the history steps, context items and task characters cut; None: no prompt.")


class Prediction(BaseModel):
    """What a world model says one action does, before anyone accepts it."""

    model_config = ConfigDict(extra="forbid")

    observation: str
    effects: list[Effect] = Field(default_factory=list, description="Proposed state changes, in order.")
    outcome: str = Field(default="unknown", description="'success', 'failure:<kind>' or 'unknown'.")
    state: dict[str, Any] | None = Field(
        default=None, description="The state once committed; None: the model does not change (or model) state.")
    reward: float = 0.0
    done: bool = Field(default=False, description="The episode ends with this action.")
    audit: Audit

    @field_validator("outcome")
    @classmethod
    def _outcome(cls, value: str) -> str:
        if not _OUTCOME.match(value):
            raise ValueError(f"outcome must be 'success', 'unknown' or 'failure:<kind>', not {value!r}")
        return value


class HistoryItem(BaseModel):
    """One committed step: the action and the observation that was accepted for it."""

    model_config = ConfigDict(extra="forbid")

    action: Action
    observation: str


class NothingToCommitError(RuntimeError):
    """`commit()` was called without a prediction to accept (or twice for one prediction)."""


@runtime_checkable
class WorldModel(Protocol):
    """Anything that plays an environment: predicts what an action does, then is told to accept it."""

    name: str

    def start(self, prefix: Episode | str, initial_state: dict[str, Any] | None = None) -> None:
        """Begin after `prefix` (its turns are the observed history); `initial_state` is the state at that point."""
        ...

    def predict(self, action: Action | str | dict[str, Any]) -> Prediction:
        """What `action` does now; history and state stay as they are."""
        ...

    def commit(self) -> None:
        """Accept the last prediction into history and state."""
        ...


def episode_prefix(initial_observation: str, *, task: str | None = None, env_id: str | None = None,
                   history: list[HistoryItem] | None = None, episode_id: str = "prefix") -> Episode:
    """An Episode holding an opening observation and committed steps (what `start` accepts)."""
    turns = [Turn(index=i, action=item.action, observation=Observation(text=item.observation))
             for i, item in enumerate(history or [])]
    return Episode(id=episode_id, env_id=env_id, task=task, turns=turns,
                   initial_observation=Observation(text=initial_observation))


class WorldModelBase:
    """History, state and the predict/commit bookkeeping; subclasses implement `_predict`.

    `predict` parses the action into its one canonical form (`sim.canonical`: with the book's action
    schema when the model has one, so no answer depends on how a call is spelled; a malformed one gets
    a `failure:invalid_action` prediction, not an exception), times the call and keeps the prediction
    pending; `commit` appends it to the history and takes its state. A subclass that raises leaves history and state untouched.
    """

    name = "world-model"

    def __init__(self) -> None:
        self.initial_observation = ""
        self.task: str | None = None
        self.env_id: str | None = None
        self.history: list[HistoryItem] = []
        self.state: dict[str, Any] = {}
        self._pending: tuple[Action, Prediction] | None = None
        self._started = False
        self.action_schema: ActionSchema | None = None  # a book's: every spelling of a call becomes one action

    # -- protocol

    def start(self, prefix: Episode | str, initial_state: dict[str, Any] | None = None) -> None:
        if isinstance(prefix, Episode):
            opening = prefix.initial_observation.text if prefix.initial_observation is not None else ""
            self.initial_observation, self.task, self.env_id = opening, prefix.task, prefix.env_id
            self.history = [HistoryItem(action=turn.action, observation=turn.observation.text)
                            for turn in prefix.turns]
        elif isinstance(prefix, str):
            self.initial_observation, self.task, self.env_id, self.history = prefix, None, None, []
        else:
            raise TypeError(f"start() needs an Episode or an observation string, not {type(prefix).__name__}")
        self.state = copy.deepcopy(initial_state) if initial_state is not None else {}
        self._pending = None
        self._started = True
        self._on_start()

    def predict(self, action: Action | str | dict[str, Any]) -> Prediction:
        if not self._started:
            raise RuntimeError(f"{self.name}: start() the world model before predict()")
        began = time.perf_counter()
        try:
            parsed = canonical_action(action, self.action_schema)
        except InvalidActionError as error:
            parsed = Action(name="", arguments={}, raw=str(action)[:500], parse_error=str(error))
        if parsed.parse_error is not None or not parsed.name:
            prediction = self._invalid(parsed)
        else:
            prediction = self._predict(parsed)
        if prediction.audit.latency_s == 0.0:
            prediction.audit.latency_s = round(time.perf_counter() - began, 6)
        self._pending = (parsed, prediction)
        return prediction

    def predict_aside(self, action: Action | str | dict[str, Any]) -> Prediction:
        """`predict`, keeping the pending prediction as it was: what ranking candidate actions needs, so that a
        prediction already made can still be committed."""
        pending = self._pending
        try:
            return self.predict(action)
        finally:
            self._pending = pending

    def commit(self) -> None:
        if self._pending is None:
            raise NothingToCommitError(f"{self.name}: no prediction to commit (predict() first)")
        action, prediction = self._pending
        self._on_commit(action, prediction)
        self.history.append(HistoryItem(action=action, observation=prediction.observation))
        if prediction.state is not None:
            self.state = copy.deepcopy(prediction.state)
        self._pending = None

    # -- for subclasses

    @property
    def pending(self) -> tuple[Action, Prediction] | None:
        """The prediction `commit()` would accept, with its parsed action."""
        return self._pending

    def last_observation(self) -> str:
        return self.history[-1].observation if self.history else self.initial_observation

    def _predict(self, action: Action) -> Prediction:
        raise NotImplementedError

    def _on_start(self) -> None:
        """Called after `start` set history and state (e.g. the oracle replays the prefix)."""

    def _on_commit(self, action: Action, prediction: Prediction) -> None:
        """Called before a prediction joins the history; raising keeps history and state as they were."""

    def _invalid(self, action: Action) -> Prediction:
        reason = action.parse_error or "empty action"
        return Prediction(observation="", outcome="failure:invalid_action",
                          audit=Audit(route="rejected", notes=[f"malformed action: {reason}"]))
