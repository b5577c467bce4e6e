"""What a prediction read or changed in the tool-API records, and which source answered: for failure analysis.

A write answered from the records (`sim.sources.records`) keeps the record before and after the learned
changes in `Audit.records`; shown here as the record and its field-level diff (`common.diff_view`: path,
before, after, long values folded), so a wrong answer can be traced to the field a rule got wrong. No expanders:
the side-by-side view draws this inside its audit expander. Record values are untrusted: they reach the page
through the diff view's escaping, st.code and st.json only.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from workbench.common.diff_view import render_diff
from workbench.common.text import md_code
from worldsmith.sim import Audit
from worldsmith.traces import ObservationDiff, json_changes

__all__ = ["LONG_VALUE", "answer_source", "record_name", "record_origin", "render_records", "show_long_values"]


def answer_source(audit: Audit) -> str:
    """The answer source that answered (`audit.source`), else the route (a prediction recorded before sources
    were named, or one no source answered)."""
    return audit.source or audit.route


def record_name(record: dict[str, Any]) -> str:
    """`order_id=#W1` for the key as the record source writes it (a string) or as a [kind, id] pair."""
    key = record.get("key", "?")
    return "=".join(str(part) for part in key) if isinstance(key, (list, tuple)) else str(key)


LONG_VALUE = 60  # characters: a value longer than this is cut in a table cell, so it is also shown whole below


def show_long_values(rows: list[dict[str, Any]]) -> None:
    """The rows of a change table whose before or after value a table cell would cut, in full (plain text)."""
    for row in rows:
        before, after = str(row.get("before") or ""), str(row.get("after") or "")
        if len(before) > LONG_VALUE or len(after) > LONG_VALUE:
            st.code(f"{row.get('path')}\nbefore: {before or '(none)'}\nafter:  {after or '(none)'}", language=None,
                    wrap_lines=True)


def record_origin(record: dict[str, Any]) -> str:
    """The mark of a record no log showed, which the simulator made from the tool's learned response schema
    (`sim.sources.unseen`); empty for any other record."""
    return " · invented (no log showed it)" if record.get("origin") == "invented" else ""


def render_records(audit: Audit) -> None:
    """Each record the answer read or changed: its key, the fields changed (the diff view) and the record after;
    an invented record says so."""
    for record in audit.records:
        before, after = record.get("before"), record.get("after")
        name = md_code(record_name(record)) + record_origin(record)
        if before is None or after is None or before == after:
            state = "read" if before is None else "removed" if after is None else "unchanged"
            st.markdown(f"**Record** {name} · {state}")
        else:
            diff = ObservationDiff("json", changes=tuple(json_changes(before, after)))
            count = len(diff.changes)
            st.markdown(f"**Record** {name} · {count:d} field change{'' if count == 1 else 's'}")
            render_diff(diff, label="fields the call changed")
        if after is not None:
            st.json(after, expanded=False)
