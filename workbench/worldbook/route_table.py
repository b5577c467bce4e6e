"""The Worldbook page's Routes tab: which answer source the harness trusts for each action, and why."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.provenance import provenance_caption
from workbench.common.text import md_escape
from worldsmith.llm import provenance
from worldsmith.worldbook import Worldbook


def render_route_table(book: Worldbook, *, dataset: str | None = None, split: str | None = None,
                       run: str | None = None) -> None:
    """The held-out route table: per action and source, exact answers and wins/losses against nearest evidence;
    `dataset` and `split` the book was built from (None: not recorded) and its `run` (name@version) in its caption."""
    table = book.routes
    if table is None:
        st.info("This version has no route table (built without route folds): the harness answers with a rule "
                "first, then episode state and memory, then nearest evidence.", icon=":material/info:")
        return
    st.caption(f"Measured on the route table's own held-out turns: {md_escape(table.measured_by)} (the build's "
               "Route-table folds "
               "and turns, apart from the folds that validate the book in its build report), "
               f"{table.turns:d} held-out turns. A source answers an "
               "action only where it lost no more turns to nearest evidence than it won; the pooled rows (action "
               f"`*`) decide for actions with fewer than {table.min_turns:d} measured turns. The `suffix` rows score "
               "answers with their learned trailing line added or removed against the same answers left alone "
               "(wins/losses against those, not nearest evidence), per action only.")
    frame = pd.DataFrame(table.rows())
    actions = sorted(set(frame["action"])) if not frame.empty else []
    chosen = st.multiselect("Actions", actions, key="wb_routes_actions", placeholder="all actions")
    if chosen:
        frame = frame[frame["action"].isin(chosen)]
    st.dataframe(frame, hide_index=True, width="stretch", column_config={
        "accuracy": st.column_config.ProgressColumn("accuracy", min_value=0.0, max_value=1.0, format="%.2f"),
        "trusted": st.column_config.CheckboxColumn("trusted", help="not worse than nearest evidence held out"),
        "decides": st.column_config.CheckboxColumn("decides", help="enough turns for this row to decide alone"),
    })
    provenance_caption([provenance.NumberProvenance(
        method=f"harness route table ({table.measured_by})", dataset=dataset, split=split, n=table.turns,
        unit="turns", run=run)])
