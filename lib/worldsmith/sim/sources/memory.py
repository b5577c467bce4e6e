"""Episode memory as an answer source (`memory`): what this same action line (or, for a structured call, the same
tool and arguments) got earlier in the episode.

It answers `memory` (the earlier observation verbatim) and `memory_state` (that observation re-rendered from the
rule form it fits, whatever the rule's status, with the state as it is now: a revisit shows what changed since,
an object taken away, a door opened). Off with `HarnessConfig(use_memory=False)`.

`repeat` is the one authoritative answer (`Answer.authoritative`): the same call as the step just before, of an
action whose immediate repeats in the evidence always got the same answer (`repeatable_actions`), gets the same
answer: a read repeated with nothing in between agrees with itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import orjson

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.engine import match_template, render
from worldsmith.worldbook.facts import ListFormat
from worldsmith.worldbook.induce import group_by_episode
from worldsmith.worldbook.model import Evidence, Rule

__all__ = ["EpisodeMemory"]


def _call(step: Step) -> str | None:
    """A structured call's key apart from its recorded text (the same tool and arguments, logged once with a raw
    line and once without, are one action); None for an action given as text only."""
    if not step.action.arguments:
        return None
    return "\x00call " + step.name + " " + orjson.dumps(dict(step.arguments), option=orjson.OPT_SORT_KEYS
                                                       | orjson.OPT_NON_STR_KEYS).decode()


class EpisodeMemory:
    """Action line -> the last observation it got in this episode; proposes it, and it re-rendered from its form."""

    def __init__(self, all_rules: Mapping[str, Sequence[Rule]], formats: Mapping[str, ListFormat], *,
                 gate: bool = True, repeatable: Collection[str] = ()) -> None:
        """`repeatable`: the actions whose immediate repeat gets the same answer (`repeatable_actions`)."""
        self.all_rules = all_rules
        self.formats = formats
        self.gate = gate
        self.repeatable = frozenset(repeatable)
        self.lines: dict[str, str] = {}
        self.last: tuple[str, str] | None = None  # the step just before: (its key, its observation)

    def reset(self, opening: str) -> None:
        self.lines = {}
        self.last = None

    def observe(self, step: Step, observation: str) -> None:
        self.lines[step.line] = observation
        call = _call(step)
        if call is not None:
            self.lines[call] = observation
        self.last = (call or step.line, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        repeat = self._repeat(step)
        if repeat is not None:
            return [repeat]
        remembered = self.lines.get(step.line) if self.gate else None
        if remembered is None and self.gate:
            call = _call(step)
            remembered = self.lines.get(call) if call is not None else None
        if remembered is None:
            return []
        out = [CandidateAnswer("memory", remembered, notes=["this action got this observation earlier in the episode"])]
        updated = self.rerender(step, remembered)
        if updated is not None and updated != remembered:
            out.append(CandidateAnswer("memory_state", updated, notes=[
                "the earlier observation of this action in its own form, with the state as it is now"]))
        return out

    def _repeat(self, step: Step) -> CandidateAnswer | None:
        if not self.gate or self.last is None or step.name not in self.repeatable or \
                self.last[0] != (_call(step) or step.line):
            return None
        return CandidateAnswer("repeat", self.last[1], notes=["the same call as the step just before, of an action that "
                                                              "changes nothing it answers about: the same answer"])

    def rerender(self, step: Step, observation: str) -> str | None:
        """`observation` re-rendered from the first form of the action it fits, with the state before `step`."""
        for rule in self.all_rules.get(step.name, []):
            if match_template(rule.template, observation, step.arguments) is not None:
                return render(rule.template, step.arguments, step.state, self.formats)
        return None

    def snapshot(self) -> dict[str, Any]:
        return {}


def repeatable_actions(evidence: Sequence[Evidence]) -> set[str]:
    """The actions an immediate repeat in the evidence (the same line twice in a row) always answered the same, at
    least once: their repeat is answered so. Evidence, not the absence of a write rule, says an action changes
    nothing it answers about (`cd` twice is two answers)."""
    same: set[str] = set()
    other: set[str] = set()
    for items in group_by_episode(evidence).values():
        for before, after in zip(items, items[1:], strict=False):
            if before.action_text == after.action_text:
                (same if before.observation == after.observation else other).add(after.action)
    return same - other


@answer_source("memory", answers=(
    Answer("repeat", route="state:repeat", rank=0, per_action=True, authoritative=True, fix_turns=False),
    Answer("memory_state", route="state:memory", rank=110),
    Answer("memory", route="fallback:episode_memory", rank=120, trusted=True, view=True)))
def _memory(context: SourceContext) -> AnswerSource:
    """What this action got earlier in the episode."""
    return EpisodeMemory(context.all_rules, context.formats, gate=context.config.use_memory,
                         repeatable=repeatable_actions(context.evidence))
