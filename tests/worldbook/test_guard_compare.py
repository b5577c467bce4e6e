"""Saving guardrails and version comparison on a book built from the bundled ALFWorld expert episodes: an edit
that breaks a supported rule's own evidence is caught before saving; templates compare word by word."""

from __future__ import annotations

import pytest

from helpers import sample_episodes
from worldsmith.worldbook import (
    PatchOp,
    RuleStatus,
    Worldbook,
    build_worldbook,
    evidence_regressions,
    template_changes,
)


@pytest.fixture(scope="module")
def book() -> Worldbook:
    return build_worldbook(sample_episodes("alfworld_expert"), name="alf").book


def supported(book: Worldbook, action: str = "go") -> str:
    return max((r for r in book.rules if r.action == action and r.status == RuleStatus.SUPPORTED),
               key=lambda r: r.support).id


def test_breaking_a_supported_rule_is_caught_with_the_turns_it_breaks(book: Worldbook) -> None:
    rule_id = supported(book)
    found = evidence_regressions(book, [PatchOp(op="update_rule", id=rule_id, fields={"template": "Nowhere."})])
    assert len(found) == 1
    regression = found[0]
    assert regression.rule_id == rule_id and not regression.promoted
    assert regression.matched_before > 0 and regression.matched_after == 0
    assert len(regression.broken) == regression.matched_before <= regression.checked
    assert f"{regression.matched_before}/{regression.checked} → 0/{regression.checked}" in regression.summary()


def test_safe_edits_pass(book: Worldbook) -> None:
    rule_id = supported(book)
    assert evidence_regressions(book, [PatchOp(op="update_rule", id=rule_id, fields={"description": "why"})]) == []
    demoted = [PatchOp(op="update_rule", id=rule_id, fields={"template": "Nowhere.", "status": "tentative"})]
    assert evidence_regressions(book, demoted) == []  # it no longer runs as supported


def test_a_new_supported_rule_that_misses_its_evidence_is_caught(book: Worldbook) -> None:
    value = {"action": "go", "template": "Nothing here.", "status": "supported", "priority": 100}
    found = evidence_regressions(book, [PatchOp(op="add_rule", id="go-new", value=value)])
    assert found and found[0].promoted and found[0].matched_after < found[0].checked
    assert "promoted to supported" in found[0].summary()


def test_templates_compare_word_by_word(book: Worldbook) -> None:
    rule = book.rule(supported(book))
    edited = rule.template.replace("You arrive", "You walk", 1)
    assert edited != rule.template
    rules = [r.model_copy(update={"template": edited}) if r.id == rule.id else r for r in book.rules]
    rules = [r for r in rules if r.id != book.rules[-1].id]
    new = book.model_copy(update={"rules": rules})
    changes = {c.rule_id: c for c in template_changes(book, new)}
    changed = changes[rule.id]
    assert changed.kind == "changed"
    assert [s.op for s in changed.segments if s.op != "equal"] == ["delete", "insert"]
    assert changed.text().startswith("You [-arrive-] {+walk+} at loc")
    assert changes[book.rules[-1].id].kind == "removed"
    assert {c.rule_id: c.kind for c in template_changes(new, book)}[book.rules[-1].id] == "added"
    assert template_changes(book, book) == []


def test_a_summary_says_when_support_counts_more_turns_than_are_kept() -> None:
    from worldsmith.worldbook.rule_guard import EvidenceRegression

    regression = EvidenceRegression("go.r1", checked=50, matched_before=50, matched_after=40, support=60)
    assert regression.summary() == ("go.r1: 50/50 → 40/50 supporting turns match (the 50 supporting turns the book "
                                    "keeps; its support counts 60)")
    assert "support counts" not in EvidenceRegression("go.r1", 50, 50, 40, support=50).summary()
