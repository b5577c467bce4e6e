"""Nearest evidence as the last answer source (`nearest`, stage "fallback"): the closest recorded turn of the
action, adapted to the current arguments (`sim.baselines.NearestEvidence`), when nothing else answered; an adapted
refusal the episode contradicts (`ScopeTracker.contradicted`: "user X not found" after X was shown) is passed over.

It also gives the harness the failure text several actions share (`generic_failure`), for refused actions.
Off with `HarnessConfig(fallback=False)` (an ablation) and without evidence.
"""

from __future__ import annotations

from typing import Any

from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.sim.sources.scope import ScopeSource
from worldsmith.traces.model import Action

__all__ = ["NearestSource"]


class NearestSource:
    """`NearestEvidence` on the book (same argument shape first); `nearest` is None without knowledge or evidence."""

    def __init__(self, nearest: NearestEvidence | None, *, gate: bool = True, scope: ScopeSource | None = None) -> None:
        self.nearest = nearest
        self.gate = gate
        self.scope = scope  # its learned refusals the episode contradicts are passed over

    def reset(self, opening: str) -> None:
        """Nearest evidence keeps no episode state."""

    def observe(self, step: Step, observation: str) -> None:
        """Nearest evidence keeps no episode state."""

    def propose(self, step: Step) -> list[CandidateAnswer]:
        if self.nearest is None or not self.gate:
            return []
        avoid = self.scope.tracker.contradicted(step.name, step.arguments) \
            if self.scope is not None and self.scope.gate else set()
        found = self.nearest.nearest(Action(name=step.name, arguments=step.action.arguments, raw=step.action.raw),
                                     avoid=avoid)
        return [CandidateAnswer("nearest_evidence", found.observation, outcome=found.outcome, notes=list(found.audit.notes),
                         route=found.audit.route, retrieved=list(found.audit.retrieved))]

    def snapshot(self) -> dict[str, Any]:
        return {}


@answer_source("nearest", stage="fallback", requires=("scope",),
               answers=(Answer("nearest_evidence", route="fallback:nearest_evidence"),))
def _nearest(context: SourceContext) -> AnswerSource:
    """The closest recorded turn of the action, adapted (the fallback)."""
    book = context.book
    nearest = NearestEvidence(book, same_shape_first=True) if context.config.knowledge and book.evidence else None
    return NearestSource(nearest, gate=context.config.fallback, scope=context.source("scope"))
