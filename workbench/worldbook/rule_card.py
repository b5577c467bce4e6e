"""A rule's header and its evidence: supporting, contradicting and counterexample turns, each a link into Traces.

Counterexamples are the turns a person (or the checker) marked as cases the rule gets wrong, which is what to look
at before promoting it. Most are contradicting turns too: those are listed once, under Contradicting (a caption
says how many), and "Other counterexamples" holds the rest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import streamlit as st

from workbench.common import data
from workbench.common.links import turn_query
from workbench.common.paths import page_file
from workbench.common.text import md_code, md_escape
from workbench.traces.timeline import show_text
from worldsmith.traces import Turn
from worldsmith.worldbook import Rule, ToolRule

__all__ = [
    "LINK_LIMIT",
    "counterexamples_apart",
    "render_rule_evidence",
    "render_rule_header",
    "render_turn_links",
    "render_turn_preview",
]

LINK_LIMIT = 20


def render_turn_links(
    label: str,
    turns: Sequence[str],
    dataset: str | None,
    *,
    limit: int = LINK_LIMIT,
    total: int | None = None,
    key: str | None = None,
) -> None:
    """`label (n)` and one Traces link per distinct turn (the first `limit`); with `total`, the true count of
    which the book keeps only `turns`. With `key` (unique on the page), a turn's preview is drawn only once its
    expander is opened: a rule card holds up to 60 turns, and each preview's highlighted code costs the browser
    more than the whole page script (benchmarks/page_load.py)."""
    distinct = list(dict.fromkeys(turns))
    if total is not None and total > len(distinct):
        st.markdown(f"**{md_escape(label)}** ({total:d}; the book keeps the first {len(distinct):d})")
    else:
        st.markdown(f"**{md_escape(label)}** ({len(distinct):d})")
    for turn in distinct[:limit]:
        # the turn in place, not only a link
        box = (
            st.expander(md_escape(turn), icon=":material/visibility:")
            if key is None
            else st.expander(md_escape(turn), icon=":material/visibility:", key=f"{key}:{turn}", on_change="rerun")
        )
        with box:
            if key is None or box.open:
                render_turn_preview(turn, dataset)
            st.page_link(
                page_file("traces"),
                label=md_escape(turn),
                icon=":material/link:",
                query_params=turn_query(dataset, turn),
            )
    if len(distinct) > limit:
        st.caption(f"and {len(distinct) - limit:d} more")


@st.cache_data(show_spinner=False, max_entries=1024)
def _turn(root: str, dataset: str, revision: int, turn_id: str) -> Turn | None:
    opened = data.open_dataset(root, dataset)
    if opened is None:
        return None
    try:
        return opened.turn(turn_id)
    except (KeyError, ValueError):
        return None


def render_turn_preview(turn_id: str, dataset: str | None) -> None:
    """The evidence turn's action and observation in place (read from the book's source dataset)."""
    root = data.workspace_root()
    opened = data.open_dataset(root, dataset)
    turn = _turn(root, dataset, opened.revision, turn_id) if opened is not None and dataset else None
    if turn is None:
        st.caption(f"Turn {md_code(turn_id)} is not in dataset {md_code(dataset)}: no preview.")
        return
    st.markdown(f"**Action** {md_code(turn.action.name)}")
    st.code(
        json.dumps(turn.action.arguments, indent=2, ensure_ascii=False, default=str), language="json", wrap_lines=True
    )
    show_text(turn.observation.text, data_value=turn.observation.data, label="Observation")


def render_rule_header(rule: Rule) -> None:
    st.subheader(md_escape(rule.id), anchor=False)
    st.markdown(
        f"**Action** {md_code(rule.action)} · **outcome** {md_code(rule.outcome)} · "
        f"**status** {md_code(rule.status.value)} · priority {rule.priority:d} · "
        f"support {rule.support:d} · confidence {rule.confidence:.2f}"
    )


def render_rule_evidence(rule: Rule | ToolRule, dataset: str | None) -> None:
    """Supporting, contradicting and counterexample turns (of a rule or a tool rule) in three columns of Traces
    links."""
    columns = st.columns(3)
    provenance = rule.provenance
    contradicting = set(provenance.contradicting)
    extra = counterexamples_apart(rule.counterexamples, provenance.contradicting)
    for column, label, turns, total in zip(
        columns,
        ("Supporting turns", "Contradicting turns", "Other counterexamples"),
        (provenance.supporting, provenance.contradicting, extra),
        (provenance.count("supporting"), provenance.count("contradicting"), None),
        strict=True,
    ):
        with column:
            render_turn_links(
                label, turns, dataset, total=total, key=f"wb_turns:{type(rule).__name__}:{rule.id}:{label}"
            )
            if turns is extra:
                shared = len({t for t in rule.counterexamples if t in contradicting})
                if shared:
                    st.caption(
                        f"{shared:d} counterexample{'s are' if shared != 1 else ' is'} among the contradicting "
                        "turns, listed there only."
                    )


def counterexamples_apart(counterexamples: Sequence[str], contradicting: Sequence[str]) -> list[str]:
    """The counterexamples not already listed as contradicting turns (each turn shown once on the card)."""
    shown = set(contradicting)
    return [turn for turn in dict.fromkeys(counterexamples) if turn not in shown]
