"""Guardrails on saving a rule: a rule that will run as supported is replayed on its own evidence first.

    regressions = evidence_regressions(book, ops)   # before the patch is stored
    regressions[0].summary()   # "go.r1: 42/42 → 0/42 supporting turns match"

An edit (template, conditions, effects, or a promotion to supported) is checked on the rule's supporting
turns (its provenance; all replayed turns of its action when it has none) with `replay.check_rule`, before
and after. A regression (fewer turns matched after than before, or a promotion of a rule that does not
match all of them) is reported with the turns it breaks, so a page or the CLI can warn BEFORE saving and
ask for an explicit "save anyway".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worldsmith.worldbook.model import Rule, RuleStatus, Worldbook
from worldsmith.worldbook.rule_replay import RuleReplay, check_rule
from worldsmith.worldbook.store import PatchOp, apply_ops

__all__ = ["EvidenceRegression", "evidence_regressions"]


@dataclass(frozen=True)
class EvidenceRegression:
    """A supported rule that fails (more of) its own evidence after an edit."""

    rule_id: str
    checked: int  # supporting turns replayed
    matched_before: int
    matched_after: int
    broken: list[str] = field(default_factory=list)  # turn ids matched before, not after
    promoted: bool = False  # the edit makes the rule supported
    support: int = 0  # the rule's support: more than `checked` when the book keeps only some supporting turns

    def summary(self) -> str:
        """One line; when the rule's support counts more turns than the book keeps (and so replays), it says so, so
        "50/50" beside a support of 60 is not read as a contradiction."""
        what = "promoted to supported, yet " if self.promoted else ""
        kept = (f" (the {self.checked} supporting turns the book keeps; its support counts {self.support})"
                if self.support > self.checked else "")
        return (f"{self.rule_id}: {what}{self.matched_before}/{self.checked} → {self.matched_after}/{self.checked} "
                f"supporting turns match{kept}")


def _supporting(replay: RuleReplay, rule: Rule) -> dict[str, bool]:
    """Turn id -> whether the rule matched it, on its supporting turns (all replayed turns when it names none)."""
    wanted = set(rule.provenance.supporting)
    return {t.turn_id: t.ok is True for t in replay.turns if not wanted or t.turn_id in wanted}


def evidence_regressions(book: Worldbook, ops: list[PatchOp]) -> list[EvidenceRegression]:
    """Every rule the patch leaves supported that matches fewer of its supporting turns than before (or, when
    the patch promotes it, not all of them); empty when the edit is safe to save. Raises as `apply_ops` does."""
    after_book = apply_ops(book, ops)
    before_rules = {r.id: r for r in book.rules}
    out = []
    for rule_id in dict.fromkeys(op.id for op in ops if op.op in ("update_rule", "add_rule")):
        after = after_book.rule(rule_id)
        if after.status != RuleStatus.SUPPORTED:
            continue
        before = before_rules.get(rule_id)
        now = _supporting(check_rule(after_book, after), before or after)
        then = _supporting(check_rule(book, before), before) if before is not None else {}
        promoted = before is None or before.status != RuleStatus.SUPPORTED
        matched_before = sum(then.values()) if not promoted else len(now)
        matched_after = sum(now.values())
        if matched_after < matched_before:
            broken = [t for t, ok in now.items() if not ok and (promoted or then.get(t))]
            out.append(EvidenceRegression(rule_id, len(now), sum(then.values()) if then else matched_after,
                                          matched_after, broken, promoted, support=after.support))
    return out
