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

Never misleading: a method whose model call failed and that answered from a fallback (nearest
evidence, episode memory) gets status `fallback` and no score of its own (the fallback's score is
kept apart, `fallback_score`); and the episode is checked against the book's evidence with the
rule `eval` uses (`worldbook.leakage.check_leakage`): when it leaks, `from_kinds` gives the methods the
book without that episode's evidence (nearest evidence cannot retrieve the target turn itself),
and `leak_notice` says the scores are still leaked (rules were learned from the episode).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.envs.base import InvalidActionError, as_action
from worldsmith.llm.base import LLM
from worldsmith.sim.base import Audit, HistoryItem, WorldModel, action_line, episode_prefix
from worldsmith.sim.prompts import prefix_before
from worldsmith.sim.scoring import DiffSegment, Score, observation_score, word_diff
from worldsmith.traces.model import Action, Episode, split_turn_id
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.leakage import LeakageReport, check_leakage
from worldsmith.worldbook.model import Worldbook

__all__ = ["REAL", "MethodStatus", "MethodStep", "SideBySide", "StateChange", "StepView", "default_methods",
           "evidence_without", "model_failure", "state_changes"]

REAL = "real"  # the column of the recorded observations; no method may take this name
Mode = Literal["teacher", "open_loop"]
MethodStatus = Literal["ok", "fallback", "error"]
_MODEL_FAILED = ("model call failed", "the model's reply holds no observation", "does not fit the model's window")
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
    status: MethodStatus = Field(default="ok", description="ok: the method's own answer; fallback: its model "
                                 "failed and a fallback answered (not scored as the method); error: no answer.")
    fallback_reason: str | None = Field(default=None, description="Why the model failed, when status is fallback.")
    fallback_score: Score | None = Field(default=None, description="The fallback answer's score, kept apart.")


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


def model_failure(audit: Audit | None) -> str | None:
    """The audit note saying the method's model call failed or gave nothing usable, else None."""
    if audit is None:
        return None
    return next((note for note in audit.notes if any(marker in note for marker in _MODEL_FAILED)), None)


def evidence_without(book: Worldbook, episode_ids: set[str]) -> tuple[Worldbook, int]:
    """`book` with the evidence of `episode_ids` left out, and how many evidence items were left out."""
    def episode_of(turn_id: str) -> str | None:
        try:
            return split_turn_id(turn_id)[0]
        except ValueError:
            return None

    kept = [item for item in book.evidence if episode_of(item.turn_id) not in episode_ids]
    return book.model_copy(update={"evidence": kept}), len(book.evidence) - len(kept)


def _leaked_ids(report: LeakageReport, episode: Episode) -> set[str]:
    """The episode and the evidence episodes its trajectory is a copy of (`a = b` in the leakage report)."""
    ids = {episode.id}
    for pair in report.duplicated_trajectories:
        ids.update(part.strip() for part in str(pair).split(" = "))
    return ids


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
            raise BadInputError("SideBySide needs at least one method")
        if REAL in methods:
            raise BadInputError(f"{REAL!r} is the recorded column; give the method another name")
        if mode not in ("teacher", "open_loop"):
            raise BadInputError(f"mode must be 'teacher' or 'open_loop', not {mode!r}")
        if episode is not None and opening is not None:
            raise BadInputError("give an episode or an opening observation, not both")
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
        self.leakage: LeakageReport | None = None  # eval's leakage report on the episode, when there is one
        self.excluded_evidence = 0  # evidence items of the episode the methods were not given (from_kinds)
        if episode is not None:
            self.leakage = check_leakage(book, [episode], raise_on_leak=False)
        self.reset()

    @classmethod
    def from_kinds(cls, book: Worldbook, kinds: Sequence[str], *, llm: LLM | None = None,
                   agent_llm: LLM | None = None, episode: Episode | None = None, opening: str | None = None,
                   mode: Mode = "teacher", exclude_leaked: bool = True, **options: Any) -> SideBySide:
        """World models by `sim.factory` kind (`harness`, `nearest`, `direct`, ...), each named by its kind.

        `llm` serves the kinds that need a model (`direct`, `rag`, `worldbook-prompt`, `harness+llm`, ...) and
        `options` (`max_tokens`, ...) go to them; `agent_llm`, when given, is the model of kinds registered as using
        one optionally (plug-ins: every built-in kind either needs a model or uses none, so `harness` answers from
        rules, episode memory and evidence). With `exclude_leaked`, an
        episode in the book's evidence is left out of the evidence the methods get (`excluded_evidence`).
        """
        from worldsmith.sim.registry import make_world_model, world_model_spec

        full, excluded = book, 0
        if episode is not None and exclude_leaked:
            report = check_leakage(book, [episode], raise_on_leak=False)
            if not report.ok:
                book, excluded = evidence_without(book, _leaked_ids(report, episode))
        methods: dict[str, WorldModel] = {}
        for kind in kinds:
            uses = world_model_spec(kind).llm
            if uses == "required":
                methods[kind] = make_world_model(kind, book, llm=llm, **options)
            elif uses == "optional":
                methods[kind] = make_world_model(kind, book, llm=agent_llm, **(options if agent_llm else {}))
            else:
                methods[kind] = make_world_model(kind, book)
        view = cls(full, methods, episode, opening, mode=mode)
        view.excluded_evidence = excluded
        return view

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
    def leaked(self) -> bool:
        """The episode is in the book's construction data by eval's rule: its scores are not held-out numbers."""
        return self.leakage is not None and not self.leakage.ok

    def leak_notice(self) -> str | None:
        """What a screen must say when the episode leaks (None when it does not)."""
        if not self.leaked:
            return None
        why = "; ".join(reason for reasons in self.leakage.leaked_episodes.values()  # type: ignore[union-attr]
                        for reason in reasons)
        left_out = (f"its {self.excluded_evidence} evidence turns were left out of what the methods retrieve, but "
                    if self.excluded_evidence else "")
        return (f"episode {self.episode.id!r} is in the worldbook's construction data ({why}): {left_out}"  # type: ignore[union-attr]
                "the rules were learned from it, so these scores are leaked, not held-out numbers")

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
                raise BadInputError(self._why_no_recorded_action())
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
        stepped = recorded_action if recorded and recorded_action is not None else shown
        methods = {name: self._method_step(name, model, stepped if recorded else action, t, teacher, real)
                   for name, model in self.methods.items()}
        view = StepView(index=t, action=stepped, action_text=action_line(stepped), recorded=recorded,
                        teacher_forced=teacher, real=real, real_changes=real_changes, methods=methods)
        self._history.append(view)
        return view

    def run(self, max_steps: int = 500) -> list[StepView]:
        """Step the recorded actions to the end of the episode (at most `max_steps`); the new steps."""
        views: list[StepView] = []
        while not self.done and len(views) < max_steps:
            views.append(self.step())
        return views

    def fork(self, at_turn: int) -> None:
        """Go back to just after step `at_turn - 1` and continue from there (later steps are dropped).

        Each method is restarted on what it saw in those steps: the real observations where it was
        teacher-forced, its own predictions elsewhere. A fork before a typed action is back on the recording.
        """
        if not 0 <= at_turn <= self.position:
            raise BadInputError(f"fork at turn {at_turn}: choose 0..{self.position}")
        self._history = self._history[:at_turn]
        if self.diverged_at is not None and self.diverged_at >= at_turn:
            self.diverged_at = None
        for name, model in self.methods.items():
            model.start(self._own_prefix(name))

    def summary(self) -> dict[str, dict[str, float]]:
        """Per method, the mean scores over the steps it answered itself with a real observation (and how many);
        `fallbacks` and `errors` count the steps its model failed on (not in the means)."""
        out: dict[str, dict[str, float]] = {}
        for name in self.methods:
            steps = [view.methods[name] for view in self._history]
            scores = [step.score for step in steps if step.score is not None]
            count = len(scores)
            out[name] = {"steps": float(count),
                         "fallbacks": float(sum(step.status == "fallback" for step in steps)),
                         "errors": float(sum(step.status == "error" for step in steps)),
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
            return prefix_before(self.episode, turns)  # the log's system prompt kept from the first step
        episode = self.episode
        prefix = episode_prefix(self.opening, task=episode.task if episode is not None else None,
                                env_id=episode.env_id if episode is not None else self.book.env_id,
                                history=history or [], episode_id=episode.id if episode is not None else "side-by-side")
        if episode is not None:
            prefix.metadata = prefix_before(episode, 0).metadata
        return prefix

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
            return MethodStep(method=name, state_before=before, state_after=before, status="error",
                              error=f"{type(error).__name__}: {error}")
        after = copy.deepcopy(prediction.state) if prediction.state is not None else before
        scored = observation_score(prediction.observation, real) if real is not None else None
        failure = model_failure(prediction.audit)
        status: MethodStatus = "ok"
        if failure is not None:
            status = "fallback" if prediction.audit.route.startswith("fallback:") else "error"
        return MethodStep(
            method=name, observation=prediction.observation, outcome=prediction.outcome, audit=prediction.audit,
            state_before=before, state_after=after, changes=state_changes(before, after),
            score=scored if status == "ok" else None, fallback_score=scored if status == "fallback" else None,
            diff=word_diff(prediction.observation, real) if real is not None else None, committed=True,
            status=status, fallback_reason=failure,
            error=f"the model failed and nothing answered: {failure}" if status == "error" else None)
