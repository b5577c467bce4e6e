"""The Worldbook page's place in the browser history: what Back returns to.

The worldbook, the open rule and the filters (of rules and of tool rules) are bound to query parameters (`bind="query-params"`),
so a URL such as `worldbook?wb_rule=take.r1&wb_f_action=take` reopens them. One gap remains:
following an `st.page_link` with query parameters (an evidence turn into Traces) makes Streamlit
push the target's parameters onto the *current* path before it switches pages, so the first Back
lands on `worldbook?dataset=...&turn=...`, with none of the page's own parameters. This module
remembers the page's widget values at the end of each run and puts them back on that entry.
"""

from __future__ import annotations

import streamlit as st
from streamlit.errors import StreamlitAPIException

__all__ = ["FOREIGN_PARAMS", "TOOL_RULE_KEYS", "WORLDBOOK_KEYS", "remember_place", "restore_place"]

WORLDBOOK_KEYS = ("wb_name", "wb_f_status", "wb_f_action", "wb_f_search", "wb_f_min_confidence", "wb_f_min_support",
                  "wb_f_sort", "wb_rule", "wb_t_kind", "wb_t_status", "wb_t_tool", "wb_tool_rule")
TOOL_RULE_KEYS = ("wb_t_kind", "wb_t_status", "wb_t_tool", "wb_tool_rule")  # drawn on the Tool rules tab only
FOREIGN_PARAMS = ("dataset", "turn", "episode")  # the Traces links' parameters (workbench.common.links)
_REMEMBERED = "wb_place"


def remember_place() -> None:
    """Keep the page's widget values (call at the end of the run: those of a tab not open are kept in the session
    though not drawn)."""
    st.session_state[_REMEMBERED] = {key: st.session_state[key] for key in WORLDBOOK_KEYS if key in st.session_state}


def _url_values(value: object) -> list[str] | str | None:
    """A widget value as the query parameter its binding reads (None: leave it out, the widget's default)."""
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value] or None
    if value is None or value == "" or value == 0:  # 0 and 0.0 are the numeric filters' defaults
        return None
    return str(value)


def restore_place(names: list[str]) -> bool:
    """On a history entry that carries another page's link parameters and none of ours, write the remembered
    values back into the URL in their place and rerun (the bound widgets read them from there); False when
    there is nothing to restore.
    Call before the page's widgets are drawn."""
    params = st.query_params
    if not any(key in params for key in FOREIGN_PARAMS) or any(key in params for key in WORLDBOOK_KEYS):
        return False
    remembered = st.session_state.get(_REMEMBERED) or {}
    if remembered.get("wb_name") not in names:
        return False
    kept = {key: value for key, value in params.to_dict().items() if key not in FOREIGN_PARAMS}
    restored = {key: _url_values(value) for key, value in remembered.items()}
    try:
        params.from_dict({**kept, **{key: value for key, value in restored.items() if value is not None}})
    except StreamlitAPIException:  # the widgets are still bound (no page switch happened): set them instead
        for key, value in remembered.items():
            st.session_state[key] = value
        for key in FOREIGN_PARAMS:
            if key in params:
                del params[key]
        return True
    st.rerun()  # after a page switch the bound widgets are seeded from the URL a run starts with
    return True
