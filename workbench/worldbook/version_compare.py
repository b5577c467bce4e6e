"""Compare any two versions of a worldbook on the page: each changed template word by word (deleted words struck
through in red, inserted ones in green; all text escaped), every other changed rule field (a status-only edit is a
change, not "0 templates differ") and all field changes."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.text import md_code, md_escape
from worldsmith.traces import DiffSegment
from worldsmith.worldbook import WorldbookStore, diff_worldbooks, template_changes

__all__ = ["other_rule_changes", "render_version_compare", "segments_markdown"]


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
    # keyed by the pair the page defaults to: after an edit or an undo the pickers start again from the new
    # version and its parent, instead of keeping the previous pair
    pair = f"{name}_{parent}_{shown}"
    old = left.selectbox("Old version", versions, key=f"wb_cmp_old_{pair}",
                         index=versions.index(parent) if parent in versions else 0)
    new = right.selectbox("New version", versions, key=f"wb_cmp_new_{pair}", index=versions.index(shown))
    if old == new:
        st.caption("Choose two different versions.")
        return
    before, after = store.load(name, old), store.load(name, new)
    changes = template_changes(before, after)
    difference = diff_worldbooks(before, after)
    others = other_rule_changes(difference, {c.rule_id for c in changes})
    rules = len({row["rule"] for row in others})
    st.caption(f"{len(changes):d} template{'s differ' if len(changes) != 1 else ' differs'}"
               + (f"; {rules:d} rule{'s' if rules != 1 else ''} changed in other fields (status, priority, "
                  "conditions, ...)" if rules else "")
               + f" between {md_code(old)} and {md_code(new)}")
    for change in changes:
        body = segments_markdown(change.segments)
        st.markdown(f"{md_code(change.rule_id)} ({md_escape(change.kind)}, action {md_code(change.action)}): {body}")
    if others:
        st.dataframe(pd.DataFrame(others), hide_index=True, key=f"wb_cmp_fields_{pair}")
    with st.expander("All field changes"):
        st.json(difference, expanded=True)


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def other_rule_changes(difference: dict[str, Any], templated: set[str]) -> list[dict[str, str]]:
    """The rule fields a `diff_worldbooks` result says changed, other than the templates shown word by word
    (`templated`: rule ids whose template changed, added or removed): one row per rule and field, values as text."""
    rows = []
    for rule_id, fields in difference.get("rules", {}).get("changed", {}).items():
        for field, change in fields.items():
            if field == "template" and rule_id in templated:
                continue
            rows.append({"rule": rule_id, "field": field, "before": _shown(change.get("before")),
                         "after": _shown(change.get("after"))})
    return rows
