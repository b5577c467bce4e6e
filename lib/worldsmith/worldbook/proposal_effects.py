"""What a proposed patch does on held-out turns: the rule's form (exact renders, template fits of its action) and
the simulator's fidelity (`evals.heldout.heldout_delta`, the no-model harness under teacher forcing).

The held-out turns are the book's source dataset's validation split, less the episodes the book was built from.
`propose_with_effect` is what the CLI (`worldsmith book propose`) and the workbench show.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.model import Evidence, Worldbook
from worldsmith.worldbook.proposals import Proposal, episodes_with_action, propose_patches
from worldsmith.worldbook.replay import list_formats, replay_evidence
from worldsmith.worldbook.store import WorldbookStore, apply_ops
from worldsmith.worldbook.templates import evidence_from_episodes

if TYPE_CHECKING:
    from worldsmith.evals.heldout import HeldOutDelta

__all__ = ["HeldOutEffect", "ProposalReport", "fidelity_line", "heldout_effect", "heldout_evidence",
           "propose_with_effect"]


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
        raise ValueError(f"worldbook {name!r} ({version}) records no source dataset to hold turns out from")
    source = sources[0]
    split = split or source.get("validation_split") or "test"
    dataset = workspace.dataset(source["dataset"])
    env = source.get("env")
    built_from = {episode_of(item.turn_id) for item in store.load(name, version).evidence}
    episodes = [e for e in dataset.iter_episodes(split) if e.id not in built_from
                and (env is None or (e.env_id or "").split("/")[0] == env)]
    if not episodes:
        raise ValueError(f"dataset {source['dataset']!r} has no episodes in split {split!r}"
                         + (f" of environment {env!r}" if env else "") + " that the book was not built from")
    return evidence_from_episodes(episodes), split


@dataclass
class ProposalReport:
    """A rule's proposals with their held-out effect: `effects[i]` (the rule's form: exact renders and template fits
    of its action's held-out turns) and `deltas[i]` (the simulator's fidelity: `evals.heldout.heldout_delta`, the
    no-model harness under teacher forcing) for `proposals[i]`; None without held-out turns, and
    `heldout_note` then says why."""

    book: str
    version: str
    rule_id: str
    action: str
    proposals: list[Proposal]
    effects: list[HeldOutEffect | None]
    split: str | None
    heldout_note: str = ""
    deltas: list[HeldOutDelta | None] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        deltas = self.deltas or [None] * len(self.proposals)
        return {"book": self.book, "version": self.version, "rule": self.rule_id, "action": self.action,
                "heldout_split": self.split, "heldout_note": self.heldout_note,
                "proposals": [{"index": index, **proposal.to_json(),
                               "heldout": effect.to_json() if effect is not None else None,
                               "heldout_delta": delta.model_dump(mode="json") if delta is not None else None}
                              for index, (proposal, effect, delta) in enumerate(
                                  zip(self.proposals, self.effects, deltas, strict=True), start=1)]}


def propose_with_effect(workspace: Any, store: WorldbookStore, name: str, rule_id: str, *,
                        version: str | None = None, split: str | None = None) -> ProposalReport:
    """`propose_patches` for a stored book's rule, each with its effect on the held-out turns of its action (the
    book's validation split unless `split` names one): the rule's form (`heldout_effect`) and the simulator's
    fidelity (`heldout_delta`). What the CLI and the workbench show."""
    from worldsmith.evals.heldout import HeldOut, heldout_delta

    version = version or store.head(name)
    book = store.load(name, version)
    rule = book.rule(rule_id)
    proposals = propose_patches(book, rule_id, version=version)
    none: list[Any] = [None] * len(proposals)
    try:
        heldout, used = heldout_evidence(workspace, store, name, version, split)
    except (ValueError, KeyError) as error:
        return ProposalReport(name, version, rule_id, rule.action, proposals, none, None,
                              f"no held-out effect: {error}", none)
    afters = [apply_ops(book, proposal.patch.ops) for proposal in proposals]
    effects: list[HeldOutEffect | None] = [heldout_effect(book, after, heldout, rule.action) for after in afters]
    source = store.info(name, version).sources[0]
    chosen = HeldOut(dataset=source["dataset"], split=used, env=source.get("env"),
                     episodes=tuple(sorted({episode_of(item.turn_id) for item in heldout})))
    try:
        deltas: list[HeldOutDelta | None] = [heldout_delta(book, after, chosen, workspace, action=rule.action)
                                             for after in afters]
    except ValueError as error:  # LeakageError included
        return ProposalReport(name, version, rule_id, rule.action, proposals, effects, used,
                              f"no simulator fidelity delta: {error}", none)
    return ProposalReport(name, version, rule_id, rule.action, proposals, effects, used, "", deltas)


def fidelity_line(delta: HeldOutDelta | None, action: str) -> str:
    """The simulator's held-out fidelity on `action` before and after, in one plain-text line."""
    if delta is None:
        return "simulator fidelity: not measured"
    moved = delta.by_action.get(action, {})
    parts = [f"{metric.replace('_', ' ')} {m.before:.3f} -> {m.after:.3f} ({m.diff:+.3f} [{m.low:+.3f}, {m.high:+.3f}])"
             for metric, m in moved.items() if metric in ("exact_match", "token_f1")]
    if not parts:
        return f"simulator fidelity on {delta.heldout.label()}: no held-out '{action}' turns"
    n = next(iter(moved.values())).n
    return (f"simulator fidelity on {n} held-out '{action}' turns ({delta.heldout.dataset}:{delta.heldout.split}): "
            + ", ".join(parts) + f"; {len(delta.fixed)} fixed, {len(delta.broken)} broken")
