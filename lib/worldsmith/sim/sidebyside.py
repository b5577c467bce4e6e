"""Several world models stepped through one episode side by side, against the real observations.

    view = SideBySide.from_kinds(book, ["harness", "nearest"], episode=episode).step()
    view.real, view.methods["harness"].observation, view.methods["harness"].score

Each method keeps its own world model. A recorded step feeds every method the episode's next
action; the episode's observation is the reference each prediction is scored and diffed against.
Two ways to keep going:

- `teacher` (teacher forcing): before each step every method is restarted on the *real* prefix
  (the recorded turns so far), so one wrong prediction does not spoil the next: this measures one
  step at a time;
- `open_loop`: every method commits its own predictions and carries on from them, as a simulator
  played by an agent would: errors compound.

A typed action leaves the recording: there is no real observation for it, and from then on every
method continues from its own predictions (until a `fork` or `reset` goes back before it).
Nothing here writes to disk: a side-by-side run is for looking; sessions are what persist.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.envs.base import InvalidActionError, as_action
from worldsmith.llm.base import LLM
from worldsmith.sim.base import Audit, HistoryItem, WorldModel, action_line, episode_prefix
from worldsmith.sim.scoring import DiffSegment, Score, score, word_diff
from worldsmith.traces.model import Action, Episode
from worldsmith.worldbook.model import Worldbook

__all__ = ["REAL", "MethodStep", "SideBySide", "StateChange", "StepView", "default_methods", "state_changes"]

REAL = "real"  # the column of the recorded observations; no method may take this name
Mode = Literal["teacher", "open_loop"]
_ABSENT: Any = object()


class StateChange(BaseModel):
    """One state path a step changed; for a list, also which items came and went."""

    model_config = ConfigDict(extra="forbid")

    path: str
    kind: Literal["added", "removed", "changed"]
    before: Any = None
    after: Any = None
    added: list[Any] = Field(default_factory=list)
    removed: list[Any] = Field(default_factory=list)


class MethodStep(BaseModel):
    """What one method said for one step, what it did to its state, and how it compares with the real one."""

    model_config = ConfigDict(extra="forbid")

    method: str
    observation: str = ""
    outcome: str = "unknown"
    audit: Audit | None = None
    state_before: dict[str, Any] = Field(default_factory=dict)
    state_after: dict[str, Any] = Field(default_factory=dict)
    changes: list[StateChange] = Field(default_factory=list)
    score: Score | None = Field(default=None, description="Against the real observation; None when there is none.")
    diff: list[DiffSegment] | None = None
    error: str | None = Field(default=None, description="Why the method gave no prediction (it raised).")
    committed: bool = False


class StepView(BaseModel):
    """One step of every method, beside the real observation when the step is a recorded one."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0)
    action: Action
    action_text: str
    recorded: bool = Field(description="The episode's own action at this point (so `real` is its observation).")
    teacher_forced: bool = Field(description="The methods were restarted on the real prefix before this step.")
    real: str | None = None
    real_changes: list[StateChange] = Field(
        default_factory=list, description="What the recorded ground-truth state changed, when the episode has one.")
    methods: dict[str, MethodStep]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value} if prefix else {}


def _list_delta(before: list[Any], after: list[Any]) -> tuple[list[Any], list[Any]]:
    remaining = list(before)
    added = []
    for item in after:
        if item in remaining:
            remaining.remove(item)
        else:
            added.append(item)
    return added, remaining


def state_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[StateChange]:
    """The dotted paths whose values differ between two states, sorted, with both values."""
    flat_before, flat_after = _flatten(before), _flatten(after)
    changes = []
    for path in sorted(set(flat_before) | set(flat_after)):
        old, new = flat_before.get(path, _ABSENT), flat_after.get(path, _ABSENT)
        if old == new:
            continue
        if old is _ABSENT:
            changes.append(StateChange(path=path, kind="added", after=new))
        elif new is _ABSENT:
            changes.append(StateChange(path=path, kind="removed", before=old))
        else:
            added, removed = _list_delta(old, new) if isinstance(old, list) and isinstance(new, list) else ([], [])
            changes.append(StateChange(path=path, kind="changed", before=old, after=new, added=added, removed=removed))
    return changes


def default_methods(model_spec: str | None) -> list[str]:
    """What to compare by default: the harness and direct prompting when a model is at hand, else nearest evidence."""
    return ["harness", "direct"] if model_spec else ["harness", "nearest"]


def _state_of(model: WorldModel) -> dict[str, Any]:
    state = getattr(model, "state", None)
    return copy.deepcopy(state) if isinstance(state, dict) else {}


def _parsed(action: Action | str | dict[str, Any]) -> Action | None:
    try:
        return as_action(action)
    except InvalidActionError:
        return None


class SideBySide:
    """Step world models (`methods`, by name) through `episode` (or from `opening`), against the real observations.

    `book` is the worldbook the methods run on (the page looks rules up in it); `mode` is
    `"teacher"` or `"open_loop"` (see the module docstring). The world models are started here
    and owned by this object from then on.
    """

    def __init__(self, book: Worldbook, methods: Mapping[str, WorldModel], episode: Episode | None = None,
                 opening: str | None = None, *, mode: Mode = "teacher") -> None:
        if not methods:
            raise ValueError("SideBySide needs at least one method")
        if REAL in methods:
            raise ValueError(f"{REAL!r} is the recorded column; give the method another name")
        if mode not in ("teacher", "open_loop"):
            raise ValueError(f"mode must be 'teacher' or 'open_loop', not {mode!r}")
        if episode is not None and opening is not None:
            raise ValueError("give an episode or an opening observation, not both")
        self.book = book
        self.methods: dict[str, WorldModel] = dict(methods)
        self.episode = episode
        self.mode: Mode = mode
        if episode is not None:
            self.opening = episode.initial_observation.text if episode.initial_observation is not None else ""
        else:
            self.opening = opening or ""
        self._history: list[StepView] = []
        self.diverged_at: int | None = None  # the step at which a typed action left the recording
        self.reset()

    @classmethod
    def from_kinds(cls, book: Worldbook, kinds: Sequence[str], *, llm: LLM | None = None,
                   agent_llm: LLM | None = None, episode: Episode | None = None, opening: str | None = None,
                   mode: Mode = "teacher", **options: Any) -> SideBySide:
        """World models by `sim.factory` kind (`harness`, `nearest`, `direct`, ...), each named by its kind.

        `llm` serves the model baselines (`direct`, `rag`, `book`) and `options` (`max_tokens`, ...)
        go to them; `agent_llm`, when given, is the harness kinds' agent-route model (without one
        the harness answers from rules, episode memory and evidence).
        """
        from worldsmith.sim.factory import MODEL_WORLD_MODELS, OPTIONAL_MODEL_WORLD_MODELS, make_world_model

        methods: dict[str, WorldModel] = {}
        for kind in kinds:
            if kind in MODEL_WORLD_MODELS:
                methods[kind] = make_world_model(kind, book, llm=llm, **options)
            elif kind in OPTIONAL_MODEL_WORLD_MODELS:
                methods[kind] = make_world_model(kind, book, llm=agent_llm, **(options if agent_llm else {}))
            else:
                methods[kind] = make_world_model(kind, book)
        return cls(book, methods, episode, opening, mode=mode)

    # ------------------------------------------------------------------ where we are

    @property
    def history(self) -> list[StepView]:
        """The steps taken so far, oldest first."""
        return list(self._history)

    @property
    def position(self) -> int:
        """How many steps were taken (the index of the next one)."""
        return len(self._history)

    @property
    def on_record(self) -> bool:
        """Every step so far was the episode's own action: the next recorded step has a real observation."""
        return self.episode is not None and self.diverged_at is None

    @property
    def next_action(self) -> Action | None:
        """The episode's action at this point, when there is one to follow."""
        if not self.on_record or self.position >= len(self.episode.turns):  # type: ignore[union-attr]
            return None
        return self.episode.turns[self.position].action  # type: ignore[union-attr]

    @property
    def done(self) -> bool:
        """No recorded action is left to step (type one to go on)."""
        return self.next_action is None

    # ------------------------------------------------------------------ moving

    def reset(self) -> None:
        """Back to the opening: no steps, every method restarted, back on the recording."""
        self._history = []
        self.diverged_at = None
        for model in self.methods.values():
            model.start(self._prefix(0))

    def step(self, action: Action | str | dict[str, Any] | None = None) -> StepView:
        """One step of every method: the next recorded action, or `action` (typed: it may leave the recording)."""
        t = self.position
        recorded_action = self.next_action
        if action is None:
            if recorded_action is None:
                raise ValueError(self._why_no_recorded_action())
            action = recorded_action
        parsed = _parsed(action)
        recorded = recorded_action is not None and parsed is not None and \
            action_line(parsed) == action_line(recorded_action)
        teacher = self.mode == "teacher" and self.on_record
        if not recorded and self.diverged_at is None:
            self.diverged_at = t
        real, real_changes = None, []
        if recorded:
            turn = self.episode.turns[t]  # type: ignore[union-attr]
            real = turn.observation.text
            before = self.episode.turns[t - 1].state if t > 0 else None  # type: ignore[union-attr]
            if turn.state is not None:
                real_changes = state_changes(before or {}, turn.state)
        shown = parsed if parsed is not None else Action(name="", raw=str(action)[:500], parse_error="not an action")
        methods = {name: self._method_step(name, model, recorded_action if recorded else action, t, teacher, real)
                   for name, model in self.methods.items()}
        view = StepView(index=t, action=recorded_action if recorded else shown,
                        action_text=action_line(recorded_action if recorded else shown), recorded=recorded,
                        teacher_forced=teacher, real=real, real_changes=real_changes, methods=methods)
        self._history.append(view)
        return view

    def run(self, max_steps: int = 500) -> list[StepView]:
        """Step the recorded actions to the end of the episode (at most `max_steps`); the new steps."""
        views = []
        while not self.done and len(views) < max_steps:
            views.append(self.step())
        return views

    def fork(self, at_turn: int) -> None:
        """Go back to just after step `at_turn - 1` and continue from there (later steps are dropped).

        Each method is restarted on what it saw in those steps: the real observations where it was
        teacher-forced, its own predictions elsewhere. A fork before a typed action is back on the recording.
        """
        if not 0 <= at_turn <= self.position:
            raise ValueError(f"fork at turn {at_turn}: choose 0..{self.position}")
        self._history = self._history[:at_turn]
        if self.diverged_at is not None and self.diverged_at >= at_turn:
            self.diverged_at = None
        for name, model in self.methods.items():
            model.start(self._own_prefix(name))

    def summary(self) -> dict[str, dict[str, float]]:
        """Per method, the mean scores over the steps that had a real observation (and how many)."""
        out: dict[str, dict[str, float]] = {}
        for name in self.methods:
            scores = [view.methods[name].score for view in self._history if view.methods[name].score is not None]
            count = len(scores)
            out[name] = {"steps": float(count),
                         **{key: round(sum(getattr(s, key) for s in scores) / count, 4) if count else 0.0
                            for key in ("exact", "f1", "edit")}}
        return out

    # ------------------------------------------------------------------ internals

    def _why_no_recorded_action(self) -> str:
        if self.episode is None:
            return "no episode to follow: type an action"
        if self.diverged_at is not None:
            return f"a typed action left the recording at step {self.diverged_at}: type an action, fork or reset"
        return f"the episode ends after {len(self.episode.turns)} steps: type an action to go on"

    def _prefix(self, turns: int, history: list[HistoryItem] | None = None) -> Episode:
        """The episode cut to its first `turns` real turns, or the opening with `history` as the steps taken."""
        if self.episode is not None and history is None:
            return self.episode.model_copy(update={"turns": self.episode.turns[:turns]})
        episode = self.episode
        return episode_prefix(self.opening, task=episode.task if episode is not None else None,
                              env_id=episode.env_id if episode is not None else self.book.env_id,
                              history=history or [], episode_id=episode.id if episode is not None else "side-by-side")

    def _own_prefix(self, name: str) -> Episode:
        """What `name` saw in the steps kept: real observations where teacher-forced, its own elsewhere."""
        if self.episode is not None and self.mode == "teacher" and all(v.recorded for v in self._history):
            return self._prefix(len(self._history))
        items = []
        for view in self._history:
            step = view.methods[name]
            if view.teacher_forced and view.real is not None:
                items.append(HistoryItem(action=view.action, observation=view.real))
            elif step.committed:
                items.append(HistoryItem(action=view.action, observation=step.observation))
        return self._prefix(len(items), items)

    def _method_step(self, name: str, model: WorldModel, action: Action | str | dict[str, Any], t: int,
                     teacher: bool, real: str | None) -> MethodStep:
        if teacher:
            model.start(self._prefix(t))
        before = _state_of(model)
        try:
            prediction = model.predict(action)
            model.commit()
        except Exception as error:  # noqa: BLE001 - one failing method must not hide the others' columns
            return MethodStep(method=name, state_before=before, state_after=before,
                              error=f"{type(error).__name__}: {error}")
        after = copy.deepcopy(prediction.state) if prediction.state is not None else before
        return MethodStep(
            method=name, observation=prediction.observation, outcome=prediction.outcome, audit=prediction.audit,
            state_before=before, state_after=after, changes=state_changes(before, after),
            score=score(prediction.observation, real) if real is not None else None,
            diff=word_diff(prediction.observation, real) if real is not None else None, committed=True)
