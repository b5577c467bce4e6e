"""Proposed fixes for a rule: each a diff, its effect on the rule's own turns and on held-out turns, and an Apply
button that saves it as a normal patch (a new version, undoable from History or `worldsmith book undo`).

Proposals are computed on a button press as a background job (`worldsmith.evals.proposal_jobs`: replaying the
book once per candidate takes a while on real logs), so leaving the page does not lose them: the job is found
again by its (book, version, rule, split), a fragment shows its progress every second while it runs, and its
report is kept in session_state once read. They vanish once the version shown changes: a proposal made against
another version would mislead.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench.common.jobs import render_stop_button, seconds_text
from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape
from workbench.worldbook.state import submit_patch
from worldsmith.evals import HeldOutDelta, ProposalReport, fidelity_line, proposal_jobs
from worldsmith.worldbook import HeldOutEffect, Proposal, Worldbook, WorldbookStore

__all__ = ["PROPOSALS", "cluster_rule_choices", "effect_line", "lowers_fidelity", "proposal_progress_text",
           "proposals_key", "render_cluster_proposals", "render_rule_proposals"]

PROPOSALS = "wb_proposals"  # {prefix (where shown): {proposals key: (the job's start time, ProposalReport)}}


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
            provenance_caption([delta.provenance if delta is not None else None])
        if lowers_fidelity(delta, report.action):
            st.warning("This patch fixes the rule's own turns but lowers held-out fidelity: it fits the evidence, not "
                       "the environment. Applying it is allowed (and undoable); the numbers above say what it costs.",
                       icon=":material/trending_down:")
        if st.button("Apply", key=f"{prefix}_apply_{report.version}_{report.rule_id}_{index}",
                     icon=":material/done:", type="primary"):
            submit_patch(store, report.book, report.version, proposal.patch.ops,
                         message=f"{report.rule_id}: {proposal.explanation}",
                         done=f"Applied the {md_escape(proposal.kind)} proposal for {md_code(report.rule_id)}")


def proposal_progress_text(status: proposal_jobs.ProposalJobStatus) -> str:
    """One line: what the job does now, the share done, the time taken and the estimate of the time left."""
    left = f" · about {seconds_text(status.remaining_s)} left" if status.remaining_s is not None else ""
    return f"{status.step or 'starting'} · {status.fraction:.0%} · {seconds_text(status.elapsed_s)} elapsed{left}"


@st.fragment(run_every=1.0)
def _watch(root: str, name: str) -> None:
    status = proposal_jobs.proposal_status(root, name)
    if status is None:
        return
    if status.state != "running":
        st.rerun()  # the whole page shows the proposals, or why there are none
    st.progress(status.fraction, text=md_escape(proposal_progress_text(status)))
    st.caption("Proposing in the background: you can leave this page; the proposals are here when you come back "
               "(and in the sidebar while they run).")
    render_stop_button(proposal_jobs.proposal_jobs(root), name, key=f"wb_prop_stop_{name}", what="proposal job")


def render_rule_proposals(root: str | Path, store: WorldbookStore, book: str, version: str, rule_id: str, *,
                          prefix: str = "wb_prop", split: str | None = None) -> None:
    """A button that proposes patches for the rule's failed turns (a background job), its progress while it runs,
    then each proposal with its Apply button; the held-out effect is measured on `split` of the book's source
    dataset (the page's chosen held-out split), else on the book's validation split."""
    key = proposals_key(book, version, rule_id) + (f":{split}" if split else "")
    shown: dict[str, tuple[float, ProposalReport]] = st.session_state.setdefault(PROPOSALS, {}).setdefault(prefix, {})
    for stale in [k for k in shown if k != key]:
        del shown[stale]
    launch = proposal_jobs.ProposalLaunch(book=book, version=version, rule_id=rule_id, split=split)
    try:
        name = proposal_jobs.proposal_job_name(launch)
    except proposal_jobs.ProposalJobError as error:
        st.caption(f"No proposals: {md_escape(error)}")
        return
    status = proposal_jobs.proposal_status(root, name)
    running = status is not None and status.state == "running"
    if st.button("Propose fixes for its failed turns", key=f"{prefix}_run_{key}", icon=":material/auto_fix_high:",
                 disabled=running, help="Runs in the background: leaving the page does not stop it."):
        try:
            proposal_jobs.launch_proposal(root, launch)
        except (proposal_jobs.ProposalJobError, OSError) as error:
            st.error(f"No proposals: {md_escape(error)}", icon=":material/error:")
            return
        shown.pop(key, None)
        status = proposal_jobs.proposal_status(root, name)
    if status is None:
        return
    if status.state == "running":
        _watch(str(root), name)
        return
    if status.state != "finished":
        st.error(f"No proposals: {md_escape(status.error or 'the job ended')}", icon=":material/error:")
        return
    if key not in shown or shown[key][0] != status.started:
        try:
            report = status.report()
        except ValueError as error:
            st.error(f"No proposals: the job's report is unreadable ({md_escape(error)})", icon=":material/error:")
            return
        if report is None:
            return
        shown[key] = (status.started, report)
    report = shown[key][1]
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
    store = WorldbookStore.of_workspace(root)
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
