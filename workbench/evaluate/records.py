"""The Records tab: predictions where one method wins and another loses, each openable at its turn.

Predictions, references and actions are untrusted text: shown in dataframes and st.code only.
A record opens in the Traces view at its turn (`<episode>#<turn>` of the run's dataset): the
Simulate page takes no episode/turn parameters, and the trace is where the real history is.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.links import simulate_query, turn_link, turn_page_link
from workbench.common.paths import page_file
from workbench.common.text import md_code, md_escape, pretty_text
from workbench.evaluate.tables import metric_columns, win_lose_frame

__all__ = ["render_record", "render_records", "turn_id"]


def turn_id(episode_id: str, turn: int) -> str:
    """The turn id the Traces page understands."""
    return f"{episode_id}#{int(turn)}"


def render_record(row: pd.Series, winner: str, loser: str, metric: str, dataset: str | None) -> None:
    """One record side by side: the action, the real observation and both predictions with their scores."""
    st.markdown(f"**Turn {int(row['turn'])}** of episode")
    st.code(str(row["episode_id"]), language=None)
    st.code(f"> {row['action']}", language=None, wrap_lines=True)
    columns = st.columns(3)
    columns[0].markdown("**real observation**")
    columns[0].code(pretty_text(row["reference"]), language=None, wrap_lines=True)
    for column, method in zip(columns[1:], (winner, loser), strict=True):
        column.markdown(f"**{md_escape(method)}** · {md_escape(metric)} {row[f'{metric}_{method}']:.3f}")
        column.code(pretty_text(row[f"prediction_{method}"]), language=None, wrap_lines=True)
    turn_page_link(dataset, turn_id(row["episode_id"], row["turn"]), label="Open this turn in Traces",
                   icon=":material/open_in_new:")
    if dataset and int(row["turn"]) >= 0:
        st.page_link(page_file("simulate"), label="Step it in Simulate (side by side, at this turn)",
                     icon=":material/model_training:",
                     query_params=simulate_query(dataset, str(row["episode_id"]), int(row["turn"])))


def render_records(records: pd.DataFrame, dataset: str | None) -> None:
    """Choose a metric and two methods; list where the first beats the second; open one."""
    methods = sorted(records["method"].dropna().unique()) if "method" in records.columns else []
    metrics = [m for m in metric_columns() if m in records.columns and records[m].notna().any()]
    if len(methods) < 2 or not metrics:
        st.info("Win/lose filtering needs two methods scored on the same records.", icon=":material/info:")
        return
    left, middle, right, last = st.columns(4)
    metric = left.selectbox("Metric", metrics, key="ev_wl_metric")
    winner = middle.selectbox("Wins", methods, index=0, key="ev_wl_winner")
    loser = right.selectbox("Loses", methods, index=1, key="ev_wl_loser")
    margin = last.number_input("by more than", min_value=0.0, max_value=100.0, value=0.0, step=0.05,
                               key="ev_wl_margin")
    if winner == loser:
        st.caption("Choose two different methods.")
        return
    frame = win_lose_frame(records, winner, loser, metric, margin)
    st.caption(f"{len(frame)} records where {md_code(winner)} scores higher than {md_code(loser)} on "
               f"{md_escape(metric)}" + (f" by more than {margin:g}" if margin else ""))
    if frame.empty:
        return
    shown = frame.copy()
    shown.insert(0, "open", [turn_link(dataset, turn_id(e, t)) for e, t in zip(shown["episode_id"], shown["turn"],
                                                                                 strict=True)])
    st.dataframe(shown, hide_index=True, key="ev_wl_table",
                 column_config={"open": st.column_config.LinkColumn("traces", display_text="open")})
    index = st.number_input("Open record (row)", min_value=0, max_value=len(frame) - 1, value=0, key="ev_wl_row")
    with st.container(border=True):
        render_record(frame.iloc[int(index)], winner, loser, metric, dataset)
