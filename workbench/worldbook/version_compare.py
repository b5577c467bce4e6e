"""Compare any two versions of a worldbook on the page: the field changes, and each changed template word by word
(deleted words struck through in red, inserted ones in green; all text escaped)."""

from __future__ import annotations

import streamlit as st

from workbench.common.text import md_code, md_escape
from worldsmith.sim.scoring import DiffSegment
from worldsmith.worldbook import WorldbookStore, diff_worldbooks, template_changes

__all__ = ["render_version_compare", "segments_markdown"]


def _segment(segment: DiffSegment) -> str:
    words = md_escape(segment.text.strip())
    gap = " " if segment.text != segment.text.rstrip() else ""
    if not words:
        return gap
    if segment.op == "delete":
        return f":red-background[~~{words}~~]{gap}"
    if segment.op == "insert":
        return f":green-background[{words}]{gap}"
    return words + gap


def segments_markdown(segments: list[DiffSegment]) -> str:
    """Markdown of a word diff: deletions struck through on red, insertions on green, every word escaped."""
    return "".join(_segment(s) for s in segments)


def render_version_compare(store: WorldbookStore, name: str, versions: list[str], shown: str,
                           parent: str | None) -> None:
    """Two version pickers (default: the parent and the version shown) and what differs between them."""
    st.markdown("**Compare two versions**")
    left, right = st.columns(2)
    old = left.selectbox("Old version", versions, key="wb_cmp_old",
                         index=versions.index(parent) if parent in versions else 0)
    new = right.selectbox("New version", versions, key="wb_cmp_new", index=versions.index(shown))
    if old == new:
        st.caption("Choose two different versions.")
        return
    before, after = store.load(name, old), store.load(name, new)
    changes = template_changes(before, after)
    st.caption(f"{len(changes):d} templates differ between {md_code(old)} and {md_code(new)}")
    for change in changes:
        body = segments_markdown(change.segments)
        st.markdown(f"{md_code(change.rule_id)} ({md_escape(change.kind)}, action {md_code(change.action)}): {body}")
    with st.expander("All field changes"):
        st.json(diff_worldbooks(before, after), expanded=True)
