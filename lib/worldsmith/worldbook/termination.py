"""When an episode ends, learned from the evidence: the observation lines, last lines and actions that mark `done`.

Recorded turns say whether the episode ended with them (`Evidence.done`), and an ending is rarely a rule's
business: TextWorld prints "*** The End ***", a tool-calling task ends when the agent hands over (`respond`), a
shell task after its final check. A few readable candidate features of every labelled turn are scored against
its `done`:

- `line`: a line of the observation, whitespace collapsed and digit runs written `#` (so "You scored 5 out of a
  possible 5, in 15 turns." is one feature across games);
- `last_line`: the observation's last non-empty line, written alike;
- `action`: the action's name.

A feature is kept when its precision (done turns among the labelled turns it fires on) is at least
`MIN_PRECISION` and it fires on at least `MIN_SUPPORT` done turns; kept features are picked greedily by the done
turns they add, so the set stays small. An episode ends when any kept feature fires (`predicts_done`). The same
evidence always gives the same termination, each feature with the turn ids it rests on.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from worldsmith.worldbook.model import Evidence

__all__ = [
    "MIN_PRECISION",
    "MIN_SUPPORT",
    "Termination",
    "TerminationFeature",
    "learn_termination",
    "predicts_done",
    "turn_features",
]

MIN_PRECISION = 0.95  # of a kept feature: done turns / labelled turns it fires on
MIN_SUPPORT = 2  # done turns a kept feature fires on: one ending is an anecdote
MAX_FEATURES = 8
MAX_LINE = 200  # a longer line (a JSON result on one line) is data, not an ending
MAX_PROVENANCE = 50

FeatureKind = Literal["line", "last_line", "action"]
_KINDS: tuple[FeatureKind, ...] = ("line", "last_line", "action")
_STRICT = ConfigDict(extra="forbid")


class TerminationFeature(BaseModel):
    """One feature that ends episodes, and how it did on the evidence."""

    model_config = _STRICT

    kind: FeatureKind
    value: str = Field(min_length=1, description="The line as `turn_features` writes it, or the action's name.")
    support: int = Field(ge=0, description="Done turns it fires on.")
    fires: int = Field(ge=0, description="Labelled turns it fires on, done or not.")
    precision: float = Field(ge=0.0, le=1.0)
    recall: float = Field(ge=0.0, le=1.0, description="Share of all done turns it fires on.")
    supporting: list[str] = Field(default_factory=list, description="Done turns it fires on.")
    counterexamples: list[str] = Field(default_factory=list, description="Turns it fires on that did not end.")

    @field_validator("supporting", "counterexamples")
    @classmethod
    def _turn_ids(cls, value: list[str]) -> list[str]:
        from worldsmith.worldbook.model import _check_turns  # model imports this module to type its field

        return _check_turns(value)


class Termination(BaseModel):
    """The features that end an episode (any one of them), learned from the labelled evidence."""

    model_config = _STRICT

    features: list[TerminationFeature] = Field(min_length=1)
    labelled_turns: int = Field(ge=0, description="Evidence turns whose `done` was recorded.")
    done_turns: int = Field(ge=0)
    precision: float = Field(ge=0.0, le=1.0, description="Of the features together, on the evidence.")
    recall: float = Field(ge=0.0, le=1.0, description="Of the features together, on the evidence.")


def _written(line: str) -> str:
    return re.sub(r"\d+", "#", " ".join(line.split()))


def turn_features(action: str, observation: str) -> set[tuple[FeatureKind, str]]:
    """The candidate features a turn shows, as (kind, value)."""
    lines = [text for text in map(_written, observation.splitlines()) if text]
    found: set[tuple[FeatureKind, str]] = {("line", text) for text in lines if len(text) <= MAX_LINE}
    if lines and len(lines[-1]) <= MAX_LINE:
        found.add(("last_line", lines[-1]))
    if action:
        found.add(("action", action))
    return found


def learn_termination(evidence: Iterable[Evidence]) -> Termination | None:
    """The features that end episodes in this evidence; None when no turn is recorded as done or no feature
    reaches `MIN_PRECISION` with `MIN_SUPPORT`."""
    labelled = [item for item in evidence if item.done is not None]
    done = {item.turn_id for item in labelled if item.done}
    if not done:
        return None
    fired: dict[tuple[FeatureKind, str], list[Evidence]] = defaultdict(list)
    for item in labelled:
        for feature in turn_features(item.action, item.observation):
            fired[feature].append(item)
    hits = {feature: {item.turn_id for item in items if item.done} for feature, items in fired.items()}
    candidates = sorted((f for f in fired if len(hits[f]) >= MIN_SUPPORT
                         and len(hits[f]) / len(fired[f]) >= MIN_PRECISION),
                        key=lambda f: (_KINDS.index(f[0]), f[1]))
    kept: list[tuple[FeatureKind, str]] = []
    covered: set[str] = set()
    while candidates and len(kept) < MAX_FEATURES:
        best = max(candidates, key=lambda f: (len(hits[f] - covered), len(hits[f]) / len(fired[f])))
        if not hits[best] - covered:
            break
        kept.append(best)
        covered |= hits[best]
        candidates.remove(best)
    if not kept:
        return None
    firing = {item.turn_id for feature in kept for item in fired[feature]}
    return Termination(
        features=[_feature(kind, value, fired[(kind, value)], len(done)) for kind, value in kept],
        labelled_turns=len(labelled), done_turns=len(done),
        precision=round(len(covered) / len(firing), 4), recall=round(len(covered) / len(done), 4))


def _feature(kind: FeatureKind, value: str, items: list[Evidence], done_turns: int) -> TerminationFeature:
    supporting = [item.turn_id for item in items if item.done]
    return TerminationFeature(
        kind=kind, value=value, support=len(supporting), fires=len(items),
        precision=round(len(supporting) / len(items), 4), recall=round(len(supporting) / done_turns, 4),
        supporting=supporting[:MAX_PROVENANCE],
        counterexamples=[item.turn_id for item in items if not item.done][:MAX_PROVENANCE])


def predicts_done(termination: Termination | None, action_name: str, observation: str) -> bool:
    """Whether a turn with this action and observation ends the episode (never, without a termination)."""
    if termination is None:
        return False
    shown = turn_features(action_name, observation)
    return any((feature.kind, feature.value) in shown for feature in termination.features)
