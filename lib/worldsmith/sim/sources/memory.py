"""Episode memory as an answer source (`memory`): what this same action line (or, for a structured call, the same
tool and arguments) got earlier in the episode.

It answers `memory` (the earlier observation verbatim) and `memory_state` (that observation re-rendered from the
rule form it fits, whatever the rule's status, with the state as it is now: a revisit shows what changed since,
an object taken away, a door opened). Off with `HarnessConfig(use_memory=False)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.engine import match_template, render
from worldsmith.worldbook.facts import ListFormat
from worldsmith.worldbook.model import Rule

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
                 gate: bool = True) -> None:
        self.all_rules = all_rules
        self.formats = formats
        self.gate = gate
        self.lines: dict[str, str] = {}

    def reset(self, opening: str) -> None:
        self.lines = {}

    def observe(self, step: Step, observation: str) -> None:
        self.lines[step.line] = observation
        call = _call(step)
        if call is not None:
            self.lines[call] = observation

    def propose(self, step: Step) -> list[CandidateAnswer]:
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

    def rerender(self, step: Step, observation: str) -> str | None:
        """`observation` re-rendered from the first form of the action it fits, with the state before `step`."""
        for rule in self.all_rules.get(step.name, []):
            if match_template(rule.template, observation, step.arguments) is not None:
                return render(rule.template, step.arguments, step.state, self.formats)
        return None

    def snapshot(self) -> dict[str, Any]:
        return {}


@answer_source("memory", answers=(
    Answer("memory_state", route="state:memory", rank=110),
    Answer("memory", route="fallback:episode_memory", rank=120, trusted=True, view=True)))
def _memory(context: SourceContext) -> AnswerSource:
    """What this action got earlier in the episode."""
    return EpisodeMemory(context.all_rules, context.formats, gate=context.config.use_memory)
