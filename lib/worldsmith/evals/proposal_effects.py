"""A rule's proposed patches with their held-out effect: the rule's form (`worldbook.proposal_forms`: exact
renders and template fits of its action) and the simulator's fidelity (`evals.heldout.heldout_delta`, the no-model
harness under teacher forcing).

The held-out turns are the book's source dataset's validation split, less the episodes the book was built from.
`propose_with_effect` is what the CLI (`worldsmith book propose`) and the workbench show. It lives with the
evaluation because the fidelity half runs the simulator, which sits above the worldbook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from worldsmith.evals.heldout import HeldOut, HeldOutDelta, heldout_delta
from worldsmith.util.errors import BadInputError
from worldsmith.util.progress import Progress
from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.proposal_forms import HeldOutEffect, heldout_effect, heldout_evidence
from worldsmith.worldbook.proposals import Proposal, propose_patches
from worldsmith.worldbook.store import Patch, WorldbookStore, apply_ops

__all__ = ["ProposalReport", "fidelity_line", "propose_with_effect"]


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

    @classmethod
    def from_json(cls, value: Any) -> ProposalReport:
        """The report `to_json` wrote (a background job's output); ValueError naming the field if it is not one."""
        if not isinstance(value, dict):
            raise BadInputError("a proposal report is a JSON object")
        try:
            items = value["proposals"]
            proposals = [Proposal(kind=item["kind"], rule_id=str(item["rule"]),
                                  patch=Patch.model_validate(item["patch"]), explanation=str(item["explanation"]),
                                  fixes=[str(t) for t in item["fixes"]], matched_before=int(item["matched_before"]),
                                  failed_before=int(item["failed_before"]), matched_after=int(item["matched_after"]),
                                  failed_after=int(item["failed_after"]), diff=[str(line) for line in item["diff"]])
                         for item in items]
            effects = [None if item.get("heldout") is None else HeldOutEffect(
                **{k: v for k, v in item["heldout"].items() if k != "exact_delta"}) for item in items]
            deltas = [None if item.get("heldout_delta") is None else HeldOutDelta.model_validate(item["heldout_delta"])
                      for item in items]
            return cls(book=str(value["book"]), version=str(value["version"]), rule_id=str(value["rule"]),
                       action=str(value["action"]), proposals=proposals, effects=effects,
                       split=value.get("heldout_split"), heldout_note=str(value.get("heldout_note") or ""),
                       deltas=deltas if any(d is not None for d in deltas) else [])
        except (KeyError, TypeError, ValidationError) as error:
            raise BadInputError(f"not a proposal report: {error}") from None

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
                        version: str | None = None, split: str | None = None,
                        progress: Progress | None = None) -> ProposalReport:
    """`propose_patches` for a stored book's rule, each with its effect on the held-out turns of its action (the
    book's validation split unless `split` names one): the rule's form (`heldout_effect`) and the simulator's
    fidelity (`heldout_delta`). What the CLI and the workbench show. `progress(done, total, what)` hears each
    step: proposing, then each proposal's held-out replay (the slow part, once per proposal)."""
    version = version or store.head(name)
    book = store.load(name, version)
    rule = book.rule(rule_id)
    tell = progress or (lambda done, total, what: None)
    tell(0, 1, "proposing patches")
    proposals = propose_patches(book, rule_id, version=version)
    total = 1 + len(proposals)
    tell(1, total, f"{len(proposals)} proposals; measuring their held-out effect")
    none: list[Any] = [None] * len(proposals)
    try:
        heldout, used = heldout_evidence(workspace, store, name, version, split)
    except (ValueError, KeyError) as error:
        tell(total, total, "done")
        return ProposalReport(name, version, rule_id, rule.action, proposals, none, None,
                              f"no held-out effect: {error}", none)
    afters = [apply_ops(book, proposal.patch.ops) for proposal in proposals]
    effects: list[HeldOutEffect | None] = [heldout_effect(book, after, heldout, rule.action) for after in afters]
    source = store.info(name, version).sources[0]
    chosen = HeldOut(dataset=source["dataset"], split=used, env=source.get("env"),
                     episodes=tuple(sorted({episode_of(item.turn_id) for item in heldout})))
    try:
        deltas: list[HeldOutDelta | None] = []
        for index, after in enumerate(afters, start=1):
            deltas.append(heldout_delta(book, after, chosen, workspace, action=rule.action))
            tell(1 + index, total, f"proposal {index} of {len(afters)} replayed on the held-out turns")
    except ValueError as error:  # LeakageError included
        tell(total, total, "done")
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
