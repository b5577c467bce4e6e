"""Widgets of the Simulate page: a session's transcript, one prediction with its audit, two sessions compared.

Observations and actions are untrusted text: they are shown with `st.code` / dataframes, never as markdown.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.text import md_code, md_escape
from workbench.simulate.records import answer_source, record_name, record_origin, render_records
from worldsmith.sim import Session, SessionTurn
from worldsmith.traces import action_line

TURN_COLUMNS = ["turn", "action", "observation", "outcome", "source", "route", "records", "model calls", "tokens"]


def turns_frame(session: Session) -> pd.DataFrame:
    """One row per committed turn: action, observation, outcome, the source that answered, route, the records it
    read or changed, cost."""
    rows = [{"turn": t.index, "action": action_line(t.action), "observation": t.prediction.observation,
             "outcome": t.prediction.outcome, "source": answer_source(t.prediction.audit),
             "route": t.prediction.audit.route,
             "records": ", ".join(record_name(r) + record_origin(r) for r in t.prediction.audit.records),
             "model calls": t.prediction.audit.model_calls, "tokens": t.prediction.audit.tokens}
            for t in session.turns()]
    return pd.DataFrame(rows, columns=TURN_COLUMNS)


def render_turn(turn: SessionTurn) -> None:
    """The observation a turn committed, and how it was made (the source that answered, route, cost, notes, the
    records it read or changed with their field diff, retrieved items, effects)."""
    prediction, audit = turn.prediction, turn.prediction.audit
    st.markdown(f"**Turn {turn.index:d}** · revision {turn.revision:d}")
    st.code(f"> {action_line(turn.action)}", language=None, wrap_lines=True)
    st.code(prediction.observation or "(empty observation)", language=None, wrap_lines=True)
    st.markdown(f"**Answered by** {md_code(answer_source(audit))}")
    columns = st.columns(5)
    columns[0].metric("route", md_escape(audit.route))
    columns[1].metric("outcome", md_escape(prediction.outcome))
    columns[2].metric("model calls", f"{audit.model_calls:d}")
    columns[3].metric("tokens", f"{audit.tokens:d}")
    columns[4].metric("latency", f"{audit.latency_s:.3f} s")
    for note in audit.notes:
        st.text(f"note: {note}")
    render_records(audit)
    details: dict[str, Any] = {"rules": audit.rules, "retrieved": audit.retrieved, "tool_calls": audit.tool_calls,
                               "effects": [e.model_dump(mode="json") for e in prediction.effects],
                               "conflicts": audit.conflicts, "rejected_effects": audit.rejected_effects,
                               "prompt_fit": audit.prompt_fit}
    shown = {key: value for key, value in details.items() if value}
    if shown:
        with st.expander("Audit details"):
            st.json(shown, expanded=True)


def compare_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """`Session.compare` rows as a table (this session = a, the other = b)."""
    columns = ["turn", "same_action", "same_observation", "action_a", "action_b", "observation_a", "observation_b",
               "outcome_a", "outcome_b", "state_diff"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["state_diff"] = frame["state_diff"].map(lambda paths: ", ".join(paths) if paths else "")
    return frame
