"""The one protocol of the harness's answer sources, and what a source is told and built from.

An *answer source* watches an episode and, before a turn, may propose the observation the action
will get. The harness (`sim.harness`) builds every registered source (`sim.sources.registry`) on
its book, tells each the episode's opening (`reset`) and every committed step (`observe`), and asks
them for answers (`propose`); routing (`sim.routing`) picks one by the held-out record of each
answer name, and the prediction's audit names the source that answered (`Audit.source`).

    class AnswerSource(Protocol):
        def reset(self, opening: str) -> None: ...                    # a new episode starts
        def observe(self, step: Step, observation: str) -> None: ...  # a committed step
        def propose(self, step: Step) -> list[CandidateAnswer]: ...          # answers for the pending step
        def snapshot(self) -> dict[str, Any]: ...                     # what it believes, for people

A source may also refuse any source's answer to a step (`Vetoing.veto(step, observation)`: a reason, or None): the
harness drops a refused answer, whichever source gave it (the records source refuses one about another entity).

A source answers under one or more *answer names* (`CandidateAnswer.source`: the place source answers
`place_memory`, `map`, `place_view`, ...); each name's routing metadata (`Answer`: the audit route,
the priority rank, trusted while unmeasured, judged per action only) is declared with the source,
so the routing tables are derived from the registry, never kept beside it.

Stages (`SourceSpec.stage`): `routed` sources are asked every turn and routed; a `model` source
runs only when routing chose nothing and no rule rendered (the agent route); a `fallback` source
answers when everything else gave nothing (nearest evidence). A source with no answers (`hooks`)
only watches the episode for the harness's post-processing (view edits, trailing lines).

Ranks of the built-in answers (lower is preferred on a tie): rule 10, shell 20, projection 28, entity 30, fields 40,
scope 50, inventory 60, place_memory 70, map 80, place_view 90, place_form 100, memory_state 110,
memory 120, scope_form 130, aligned_evidence 140, place_evidence 150.

A tracker of the plain shape (`reset(opening)`, `observe(name, arguments, observation)`,
`propose(name, arguments, line) -> list[CandidateAnswer]`, `snapshot()`) joins through `TrackerSource`, with
its registration in the same file (a module of this package is imported, and so registered, by
`sim.sources`; one elsewhere through $WORLDSMITH_SOURCE_PLUGINS):

    @answer_source("writes", snapshot_key="writes", answers=(
        Answer("write_effect", route="state:write_effect", rank=35, trusted=True, per_action=True),))
    def _writes(context: SourceContext) -> AnswerSource:
        return TrackerSource(WriteTracker(context.evidence), gate=context.tracking)

`gate=context.tracking` answers only while episode state is tracked (`use_memory` and `knowledge` on), as
the built-in trackers do; `requires=("entities",)` and `context.source("entities").tracker` reach another
source's tracker (built first). Nothing in the harness changes: it builds, resets, tells and asks every
registered source, and `Harness.source(name)` returns one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from worldsmith.traces.model import Action
from worldsmith.worldbook.facts import ListFormat
from worldsmith.worldbook.model import Evidence, Rule, Worldbook
from worldsmith.worldbook.summaries import EpisodeSummaries

if TYPE_CHECKING:
    from worldsmith.sim.base import Audit
    from worldsmith.sim.harness import Harness, HarnessConfig

__all__ = [
    "Answer",
    "AnswerSource",
    "CandidateAnswer",
    "SourceContext",
    "SourceFactory",
    "SourceSpec",
    "Stage",
    "Step",
    "TrackerSource",
    "Vetoing",
    "line_key",
]

Stage = Literal["routed", "model", "fallback"]


def line_key(action_text: str) -> str:
    """An action line as a key: whitespace collapsed."""
    return " ".join(action_text.split())


@dataclass
class CandidateAnswer:
    """One source's answer for a turn: the observation and why."""

    source: str  # the answer name (`Answer.name`): what the route table measures and the audit names
    observation: str
    outcome: str = "unknown"
    notes: list[str] = field(default_factory=list)
    rule: str | None = None
    effects: list[Any] = field(default_factory=list)
    form: str | None = None  # a rule's observation template: rules are measured per form, not only together
    conflicts: list[str] = field(default_factory=list)  # equal-rank rules that also held and answered otherwise
    route: str | None = None  # the audit route when not the answer name's own (nearest evidence reports its own)
    retrieved: list[dict[str, Any]] = field(default_factory=list)  # evidence looked up, for the audit
    records: list[dict[str, Any]] = field(default_factory=list)  # records read or changed: {key, before, after}

    @property
    def key(self) -> str:
        """The route table's key: the source, and for a rule its form (stable across builds, unlike rule ids)."""
        if self.form is None:
            return self.source
        return f"{self.source}:{hashlib.sha256(self.form.encode()).hexdigest()[:10]}"


class Step(NamedTuple):
    """The step a source observes or answers: the action as given, its canonical name and named arguments (through
    the action schema), its action line, the 1-based turn it is, and the state before it. Immutable, and a
    NamedTuple rather than a frozen dataclass: the harness builds one or two a turn, and this is four times cheaper.

    `audit` is the prediction's audit while one is made (a scratch one otherwise): a source notes there why it
    gave no answer (a rule whose template needs unknown state), the model records its calls there."""

    action: Action
    name: str
    arguments: dict[str, Any]  # the harness's own dict (not copied: sources only read it)
    line: str
    turn: int
    state: dict[str, Any]  # the harness's state before the step (not copied: sources only read it)
    audit: Audit | None = None

    def note(self, text: str) -> None:
        """A note for the audit (dropped when the step is observed, not predicted)."""
        if self.audit is not None:
            self.audit.notes.append(text)


@dataclass(frozen=True)
class Answer:
    """Routing metadata of one answer name.

    `rank`: the order answers are preferred in when their held-out records tie (lower first); `trusted`: used
    without a held-out record (an older book, a source never seen answering); `per_action`: judged only by the
    action's own record, never the pooled one (a place's view answers `look`, not `unlock`); `view`: answers
    with a place's view, refreshed by the view edits of what was done there since; `fix_turns`: lines that print
    the turn count are set for this episode's turn (`sim.turn_counter`: an answer recalled from elsewhere);
    `must_win`: used only where held out it won more turns than it lost against nearest evidence (a tie is not
    enough: e.g. an argument value the construction episodes never showed may be valid in a held-out task);
    `authoritative`: an answer from the session's own state (a record it answered, an id it said does not exist):
    it is chosen over every routed answer (teacher-forced and open loop alike), so the session
    never contradicts what it said."""

    name: str
    route: str | None = None  # the audit route; None: "state:<name>"
    rank: float = float("inf")
    trusted: bool = False
    per_action: bool = False
    view: bool = False
    fix_turns: bool = True
    must_win: bool = False
    authoritative: bool = False

    @property
    def audit_route(self) -> str:
        return self.route if self.route is not None else f"state:{self.name}"


@runtime_checkable
class AnswerSource(Protocol):
    """What every answer source implements (see the module doc)."""

    def reset(self, opening: str) -> None: ...

    def observe(self, step: Step, observation: str) -> None: ...

    def propose(self, step: Step) -> list[CandidateAnswer]: ...

    def snapshot(self) -> dict[str, Any]: ...


@runtime_checkable
class Vetoing(Protocol):
    """A source that can refuse any source's answer to a step (the records source refuses an answer about another
    entity than the one asked): the reason, or None when the answer may be given."""

    def veto(self, step: Step, observation: str) -> str | None: ...


@dataclass
class SourceContext:
    """What a source is built from: the book, its evidence (none when the harness runs without knowledge), the
    harness config, the rules by action, the list formats, and the sources this one declared it `requires`."""

    book: Worldbook
    evidence: Sequence[Evidence]
    config: HarnessConfig
    harness: Harness  # for a source that reads the history or calls the model (the agent route); most need not
    rules: Mapping[str, Sequence[Rule]]  # executable or not, by action, in the book's order
    all_rules: Mapping[str, Sequence[Rule]]  # every form by action, the best supported first (re-rendering)
    formats: Mapping[str, ListFormat]  # list formats by state path prefix (`worldbook.rule_replay.list_formats`)
    requires: tuple[str, ...] = ()
    built: Mapping[str, AnswerSource] = field(default_factory=dict)
    # per-episode pieces of an evidence list `evidence` is a subset of (`worldbook.summaries`): a tracker learned
    # from a fold's evidence combines its kept episodes' pieces instead of reading every episode again
    summaries: EpisodeSummaries | None = None

    def source(self, name: str) -> Any:
        """A source this one depends on (declared in `requires`: built before it)."""
        if name not in self.requires:
            raise KeyError(f"source {name!r} is not declared in requires={self.requires!r}")
        return self.built[name]

    @property
    def tracking(self) -> bool:
        """Whether episode-state sources answer: episode memory on, with the book's knowledge."""
        return self.config.use_memory and self.config.knowledge


SourceFactory = Callable[[SourceContext], AnswerSource]


@dataclass(frozen=True)
class SourceSpec:
    """One registered source: its name, its answers' routing metadata, its stage, what it needs built first, the
    key it shows under in `Harness.tracked()` (None: not shown), and whether it is asked about actions the book
    has never seen."""

    name: str
    factory: SourceFactory
    answers: tuple[Answer, ...] = ()
    stage: Stage = "routed"
    requires: tuple[str, ...] = ()
    snapshot_key: str | None = None
    unseen_actions: bool = True
    description: str = ""


class TrackerSource:
    """An `AnswerSource` over a tracker of the shape `reset(opening)`, `observe(name, arguments, observation)`,
    `propose(name, arguments, line)`, `snapshot()`; `gate` False: it watches but does not answer."""

    def __init__(self, tracker: Any, *, gate: bool = True) -> None:
        self.tracker = tracker
        self.gate = gate

    def reset(self, opening: str) -> None:
        self.tracker.reset(opening)

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.name, dict(step.arguments), observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        return list(self.tracker.propose(step.name, dict(step.arguments), step.line)) if self.gate else []

    def veto(self, step: Step, observation: str) -> str | None:
        """The tracker's `veto(name, arguments, observation)`, where it has one."""
        judge = getattr(self.tracker, "veto", None)
        return judge(step.name, step.arguments, observation) if judge is not None and self.gate else None

    def snapshot(self) -> dict[str, Any]:
        return dict(self.tracker.snapshot())
