"""What a proposed patch does to the rule's form on held-out turns: exact renders and template fits of its action.

The held-out turns are the book's source dataset's validation split, less the episodes the book was built from.
The simulator's fidelity on them (the no-model harness: a layer above the worldbook) and the report the CLI and the
workbench show are `evals.proposal_effects`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.util.errors import BadInputError
from worldsmith.workspace.layout import env_family
from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.model import Evidence, Worldbook
from worldsmith.worldbook.proposals import episodes_with_action
from worldsmith.worldbook.rule_replay import list_formats, replay_evidence
from worldsmith.worldbook.store import WorldbookStore
from worldsmith.worldbook.templates import evidence_from_episodes

__all__ = ["HeldOutEffect", "heldout_effect", "heldout_evidence"]


@dataclass(frozen=True)
class HeldOutEffect:
    """How a patch moves fidelity on held-out turns of one action: exact renders and template fits."""

    action: str
    turns: int
    exact_before: int
    exact_after: int
    fits_before: int
    fits_after: int
    fixed: list[str]  # held-out turns rendered exactly after, not before
    broken: list[str]  # rendered exactly before, not after

    @property
    def exact_delta(self) -> int:
        return self.exact_after - self.exact_before

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "turns": self.turns, "exact_before": self.exact_before,
                "exact_after": self.exact_after, "fits_before": self.fits_before, "fits_after": self.fits_after,
                "exact_delta": self.exact_delta, "fixed": self.fixed, "broken": self.broken}



def heldout_effect(before: Worldbook, after: Worldbook, heldout: Sequence[Evidence], action: str) -> HeldOutEffect:
    """Replay both books over the held-out episodes with `action`: how many of its turns each renders exactly
    and how many the chosen rule's template fits."""
    evidence = episodes_with_action(heldout, action)
    reports = [replay_evidence(book.rules, evidence, formats=list_formats(book)) for book in (before, after)]
    old, new = ([t for t in report.turns if t.action == action] for report in reports)
    exact_old = {t.turn_id for t in old if t.exact}
    exact_new = {t.turn_id for t in new if t.exact}
    return HeldOutEffect(action=action, turns=len(old), exact_before=len(exact_old), exact_after=len(exact_new),
                         fits_before=sum(t.fits for t in old), fits_after=sum(t.fits for t in new),
                         fixed=sorted(exact_new - exact_old), broken=sorted(exact_old - exact_new))


def heldout_evidence(workspace: Any, store: WorldbookStore, name: str, version: str | None = None,
                     split: str | None = None) -> tuple[list[Evidence], str]:
    """The held-out turns of a book's source dataset (its validation split unless `split` names one), without the
    episodes the book was built from, and the split's name. A ValueError says why there are none."""
    version = version or store.head(name)
    sources = store.info(name, version).sources
    if not sources or not sources[0].get("dataset"):
        raise BadInputError(f"worldbook {name!r} ({version}) records no source dataset to hold turns out from")
    source = sources[0]
    split = split or source.get("validation_split") or "test"
    dataset = workspace.dataset(source["dataset"])
    env = source.get("env")
    built_from = {episode_of(item.turn_id) for item in store.load(name, version).evidence}
    episodes = [e for e in dataset.iter_episodes(split) if e.id not in built_from
                and (env is None or env_family(e.env_id) == env)]
    if not episodes:
        raise BadInputError(f"dataset {source['dataset']!r} has no episodes in split {split!r}"
                         + (f" of environment {env!r}" if env else "") + " that the book was not built from")
    return evidence_from_episodes(episodes), split
