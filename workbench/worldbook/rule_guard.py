"""Guardrail on saving rules from the Worldbook page: a change that makes a supported rule fail its own evidence
is held back with a warning (e.g. 42/42 → 0/42 supporting turns match, and the turns it breaks) until the person
says "Save anyway" or cancels. The check is `worldbook.evidence_regressions` (a replay), made BEFORE saving.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from workbench.common.text import md_code, md_escape
from workbench.worldbook.rule_card import render_turn_links
from workbench.worldbook.state import submit_patch
from worldsmith.worldbook import PatchOp, Worldbook, WorldbookError, WorldbookStore, evidence_regressions

__all__ = ["PENDING", "PendingSave", "guarded_submit", "render_pending_save"]

PENDING = "wb_pending_save"  # the PendingSave held back, or absent


@dataclass(frozen=True)
class PendingSave:
    """A patch held back by the guardrail, with what it breaks."""

    name: str
    base: str
    ops: list[PatchOp]
    message: str
    warnings: list[str]
    broken: list[str]


def guarded_submit(store: WorldbookStore, name: str, base: str, book: Worldbook, ops: list[PatchOp], message: str,
                   *, done: str) -> None:
    """Save `ops` at once when no supported rule regresses on its evidence, else hold them back for confirmation."""
    try:
        found = evidence_regressions(book, ops)
    except (WorldbookError, ValueError) as error:
        st.error(f"Not saved: {md_escape(error)}", icon=":material/error:")
        return
    if not found:
        st.session_state.pop(PENDING, None)
        submit_patch(store, name, base, ops, message, done=done)
        return
    st.session_state[PENDING] = PendingSave(name, base, ops, message, [r.summary() for r in found],
                                            [t for r in found for t in r.broken])


def render_pending_save(store: WorldbookStore, name: str, version: str, dataset: str | None) -> None:
    """The held-back save of this version (if any): why, the broken turns, and Save anyway / Cancel."""
    pending: PendingSave | None = st.session_state.get(PENDING)
    if pending is None or (pending.name, pending.base) != (name, version):
        return
    with st.container(border=True):
        lines = "\n".join(f"- {md_escape(line)}" for line in pending.warnings)
        st.warning(f"Not saved yet: this change makes a supported rule fail its own evidence.\n{lines}",
                   icon=":material/warning:")
        render_turn_links("Evidence turns it breaks", pending.broken, dataset)
        left, right = st.columns(2)
        if left.button("Save anyway", key="wb_save_anyway", type="primary", icon=":material/save:"):
            st.session_state.pop(PENDING, None)
            submit_patch(store, name, pending.base, pending.ops,
                         pending.message + " (saved despite: " + "; ".join(pending.warnings) + ")",
                         done=f"Saved despite the warning: {md_code(pending.message)}")
        if right.button("Cancel", key="wb_save_cancel", icon=":material/close:"):
            st.session_state.pop(PENDING, None)
            st.rerun()
