"""The Worldbook page's rules table: filters (status, action, search, minimum confidence and support) and sorting."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import streamlit as st

from worldsmith.worldbook import Rule, RuleStatus

__all__ = ["RULE_KEY", "SORTS", "RuleFilter", "render_rule_filters", "render_rule_table", "rules_frame",
           "select_rules"]

RULE_KEY = "wb_rule"  # the open rule; bound to the URL (?wb_rule=...) like the filters and the worldbook

_URL: Literal["query-params"] = "query-params"

Sort = Literal["support", "confidence", "priority", "id"]
SORTS: dict[str, str] = {"support": "support (most first)", "confidence": "confidence (highest first)",
                         "priority": "priority (highest first)", "id": "id"}


@dataclass(frozen=True)
class RuleFilter:
    statuses: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    search: str = ""
    min_confidence: float = 0.0
    min_support: int = 0
    sort: Sort = "support"


def select_rules(rules: Sequence[Rule], chosen: RuleFilter) -> list[Rule]:
    """The rules that pass the filter, in the chosen order (ties by id, so the order is stable)."""
    needle = chosen.search.strip().lower()
    kept = [r for r in rules
            if (not chosen.statuses or r.status.value in chosen.statuses)
            and (not chosen.actions or r.action in chosen.actions)
            and r.confidence >= chosen.min_confidence and r.support >= chosen.min_support
            and (not needle or needle in f"{r.id} {r.template} {r.description}".lower())]
    if chosen.sort == "id":
        return sorted(kept, key=lambda r: r.id)
    return sorted(kept, key=lambda r: (-getattr(r, chosen.sort), r.id))


def rules_frame(rules: Sequence[Rule]) -> pd.DataFrame:
    return pd.DataFrame([{"id": r.id, "action": r.action, "status": r.status.value, "outcome": r.outcome,
                          "priority": r.priority, "support": r.support, "confidence": r.confidence,
                          "contradicting": r.provenance.count("contradicting"),
                          "counterexamples": len(r.counterexamples), "template": r.template[:120]}
                         for r in rules])


def render_rule_filters(rules: Sequence[Rule]) -> RuleFilter:
    """The filter widgets (keys `wb_f_*`) and the filter they describe. Each is bound to the URL (the key is
    the query parameter), so a shared link or the browser's Back button restores them."""
    first, second, third = st.columns(3)
    statuses = first.multiselect("Status", [s.value for s in RuleStatus], key="wb_f_status", bind=_URL)
    actions = second.multiselect("Action", sorted({r.action for r in rules}), key="wb_f_action", bind=_URL)
    search = third.text_input("Search (id, template, description)", key="wb_f_search", bind=_URL)
    first, second, third = st.columns(3)
    min_confidence = first.slider("Minimum confidence", 0.0, 1.0, 0.0, 0.05, key="wb_f_min_confidence", bind=_URL)
    min_support = second.number_input("Minimum support", min_value=0, value=0, step=1, key="wb_f_min_support",
                                      bind=_URL)
    sort = third.selectbox("Sort by", list(SORTS), format_func=SORTS.__getitem__, key="wb_f_sort", bind=_URL)
    return RuleFilter(statuses=tuple(statuses), actions=tuple(actions), search=search,
                      min_confidence=float(min_confidence), min_support=int(min_support), sort=sort)


def render_rule_table(rules: Sequence[Rule]) -> None:
    """The filtered rules as a table whose rows open the rule: a click sets the open rule (`RULE_KEY`).

    Call it before the rule picker is drawn. The table's key follows the open rule, so its highlighted row
    is always the open rule, also when it was opened from the picker, a link or Back.
    """
    ids = [r.id for r in rules]
    current = st.session_state.get(RULE_KEY)
    tag = hashlib.blake2b(repr((current, ids)).encode(), digest_size=6).hexdigest()
    event = st.dataframe(rules_frame(rules), hide_index=True, on_select="rerun", selection_mode="single-row",
                         selection_default={"selection": {"rows": [ids.index(current)] if current in ids else []}},
                         key=f"wb_rules_table_{tag}")
    rows = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    if rows and 0 <= rows[0] < len(ids) and ids[rows[0]] != current:
        st.session_state[RULE_KEY] = ids[rows[0]]
        st.rerun()
