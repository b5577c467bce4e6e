"""A rule's header and its evidence: supporting, contradicting and counterexample turns, each a link into Traces.

Counterexamples are listed apart from the contradicting provenance: they are the turns a person
(or the checker) marked as cases the rule gets wrong, which is what to look at before promoting it.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from workbench.components.links import turn_query
from workbench.components.paths import page_file
from workbench.components.text import md_code, md_escape
from worldsmith.worldbook import Rule

__all__ = ["LINK_LIMIT", "render_rule_evidence", "render_rule_header", "render_turn_links"]

LINK_LIMIT = 20


def render_turn_links(label: str, turns: Sequence[str], dataset: str | None, *, limit: int = LINK_LIMIT,
                      total: int | None = None) -> None:
    """`label (n)` and one Traces link per distinct turn (the first `limit`); with `total`, the true count of
    which the book keeps only `turns`."""
    distinct = list(dict.fromkeys(turns))
    if total is not None and total > len(distinct):
        st.markdown(f"**{md_escape(label)}** ({total:d}; the book keeps the first {len(distinct):d})")
    else:
        st.markdown(f"**{md_escape(label)}** ({len(distinct):d})")
    for turn in distinct[:limit]:
        st.page_link(page_file("traces"), label=md_escape(turn), icon=":material/link:",
                     query_params=turn_query(dataset, turn))
    if len(distinct) > limit:
        st.caption(f"and {len(distinct) - limit:d} more")


def render_rule_header(rule: Rule) -> None:
    st.subheader(md_escape(rule.id), anchor=False)
    st.markdown(f"**Action** {md_code(rule.action)} · **outcome** {md_code(rule.outcome)} · "
                f"**status** {md_code(rule.status.value)} · priority {rule.priority:d} · "
                f"support {rule.support:d} · confidence {rule.confidence:.2f}")


def render_rule_evidence(rule: Rule, dataset: str | None) -> None:
    """Supporting, contradicting and counterexample turns in three columns of Traces links."""
    columns = st.columns(3)
    provenance = rule.provenance
    for column, label, turns, total in zip(
            columns, ("Supporting turns", "Contradicting turns", "Counterexamples"),
            (provenance.supporting, provenance.contradicting, rule.counterexamples),
            (provenance.count("supporting"), provenance.count("contradicting"), None), strict=True):
        with column:
            render_turn_links(label, turns, dataset, total=total)
