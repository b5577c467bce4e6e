"""Proposed fixes for a rule: each a diff, its effect on the rule's own turns and on held-out turns, and an Apply
button that saves it as a normal patch (a new version, undoable from History or `worldsmith book undo`).

Proposals are computed on a button press (replaying the book once per candidate takes a moment) and kept per
(book, version, rule) in session_state, so they stay on screen across reruns and vanish once the version shown
changes: a proposal made against another version would mislead.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench.common.text import md_code, md_escape
from workbench.worldbook.state import submit_patch
from worldsmith.evals.heldout import HeldOutDelta
from worldsmith.evals.proposal_effects import ProposalReport, fidelity_line, propose_with_effect
from worldsmith.workspace import Workspace
from worldsmith.worldbook import Worldbook, WorldbookStore
from worldsmith.worldbook.proposal_effects import HeldOutEffect
from worldsmith.worldbook.proposals import Proposal

__all__ = ["PROPOSALS", "cluster_rule_choices", "effect_line", "lowers_fidelity", "proposals_key", "render_cluster_proposals", "render_rule_proposals"]

PROPOSALS = "wb_proposals"  # {prefix (where shown): {proposals key: ProposalReport}}


def proposals_key(book: str, version: str, rule_id: str) -> str:
    return f"{book}:{version}:{rule_id}"


def effect_line(effect: HeldOutEffect | None, split: str | None) -> str:
    """The held-out effect in one Markdown line (numbers only; the split name escaped)."""
    if effect is None:
        return "Held-out effect: not measured."
    if not effect.turns:
        return f"Held-out ({md_code(split)}): no turns of this action held out, so no effect to show."
    return (f"Held-out ({md_code(split)}, {effect.turns:d} turns of the action): exact "
            f"{effect.exact_before:d} → {effect.exact_after:d}, template fits {effect.fits_before:d} → "
            f"{effect.fits_after:d} (the rule's form)" + (f", {len(effect.broken):d} broken" if effect.broken else ""))


def lowers_fidelity(delta: HeldOutDelta | None, action: str) -> bool:
    """Whether the simulator answers some held-out turn worse after the patch (a broken turn, or a metric of the
    action that went down)."""
    if delta is None:
        return False
    return bool(delta.broken) or any(m.diff < 0 for m in delta.by_action.get(action, {}).values())


def _render_one(store: WorldbookStore, report: ProposalReport, index: int, proposal: Proposal,
                effect: HeldOutEffect | None, delta: HeldOutDelta | None, prefix: str) -> None:
    with st.container(border=True):
        st.markdown(f"**{index:d}. {md_escape(proposal.kind)}**: {md_escape(proposal.explanation)}")
        st.code("\n".join(proposal.diff), language="diff", wrap_lines=True)
        st.markdown(f"Own evidence: fixes {len(proposal.fixes):d} failed turns; failed {proposal.failed_before:d} → "
                    f"{proposal.failed_after:d}, matched {proposal.matched_before:d} → {proposal.matched_after:d}")
        st.markdown(effect_line(effect, report.split))
        if effect is not None:
            st.markdown(md_escape(fidelity_line(delta, report.action)))
        if lowers_fidelity(delta, report.action):
            st.warning("This patch fixes the rule's own turns but lowers held-out fidelity: it fits the evidence, not "
                       "the environment. Applying it is allowed (and undoable); the numbers above say what it costs.",
                       icon=":material/trending_down:")
        if st.button("Apply", key=f"{prefix}_apply_{report.version}_{report.rule_id}_{index}",
                     icon=":material/done:", type="primary"):
            submit_patch(store, report.book, report.version, proposal.patch.ops,
                         message=f"{report.rule_id}: {proposal.explanation}",
                         done=f"Applied the {md_escape(proposal.kind)} proposal for {md_code(report.rule_id)}")


def render_rule_proposals(root: str | Path, store: WorldbookStore, book: str, version: str, rule_id: str, *,
                          prefix: str = "wb_prop", split: str | None = None) -> None:
    """A button that proposes patches for the rule's failed turns, and each proposal with its Apply button; the
    held-out effect is measured on `split` of the book's source dataset (the page's chosen held-out split), else on
    the book's validation split."""
    key = proposals_key(book, version, rule_id) + (f":{split}" if split else "")
    shown: dict[str, ProposalReport] = st.session_state.setdefault(PROPOSALS, {}).setdefault(prefix, {})
    for stale in [k for k in shown if k != key]:
        del shown[stale]
    if st.button("Propose fixes for its failed turns", key=f"{prefix}_run_{key}", icon=":material/auto_fix_high:"):
        with st.spinner("Learning conditions, templates and splits; replaying each on the evidence and held out"):
            try:
                shown[key] = propose_with_effect(Workspace(root), store, book, rule_id, version=version, split=split)
            except (ValueError, KeyError) as error:
                st.error(f"No proposals: {md_escape(error)}", icon=":material/error:")
                return
    report = shown.get(key)
    if report is None:
        return
    if report.heldout_note:
        st.caption(md_escape(report.heldout_note))
    if not report.proposals:
        st.info(f"No patch fixes a failed turn of {md_code(rule_id)} without breaking another turn (or it fails "
                "none).", icon=":material/info:")
        return
    deltas = report.deltas or [None] * len(report.proposals)
    for index, (proposal, effect, delta) in enumerate(zip(report.proposals, report.effects, deltas, strict=True),
                                                      start=1):
        _render_one(store, report, index, proposal, effect, delta, prefix)


def cluster_rule_choices(book: Worldbook, used: list[tuple[str, int]], actions: list[str]) -> dict[str, str]:
    """{rule id: why it is offered} for a failure cluster: the book's rules its wrong predictions used, then every
    rule of the cluster's actions (a conflicted rule is used by no prediction, yet its fix is what is missing)."""
    known = {rule.id: rule for rule in book.rules}
    choices = {rule: f"used by {count} wrong predictions" for rule, count in used if rule in known}
    for rule in sorted((r for r in book.rules if r.action in actions), key=lambda r: (actions.index(r.action), r.id)):
        choices.setdefault(rule.id, f"a {rule.status.value} rule of {rule.action}")
    return choices


def render_cluster_proposals(book: str | None, rules: list[tuple[str, int]], *, key: str,
                             actions: list[str] | None = None, reason: str | None = None) -> None:
    """Under a failure cluster: pick a rule behind it (used by its predictions, or of its actions), and propose
    fixes for it on the book's current version (the run may have used an older one; the caption says which).
    `reason` says why no rule is behind the cluster and what would fix it, when none is."""
    from workbench.common import data

    root = Path(data.workspace_root())
    store = WorldbookStore(root / "worldbooks")
    if not book or book not in store.names():
        st.caption("Proposals need the run's worldbook in this workspace (a cross-fitted run builds its own).")
        return
    choices = cluster_rule_choices(store.load(book), rules, actions or [])
    if not choices:
        st.caption("No rule of the worldbook is behind these predictions, so there is no rule to propose a fix for"
                   + (f": {md_escape(reason)}." if reason else "."))
        return
    rule_id = st.selectbox("Propose fixes for a rule behind this cluster", list(choices), key=f"{key}_rule",
                           format_func=lambda rule: f"{rule} ({choices[rule]})")
    head = store.head(book)
    st.caption(f"Patches are made against {md_code(book)} version {md_code(head)} (HEAD).")
    render_rule_proposals(root, store, book, head, rule_id, prefix=key)
