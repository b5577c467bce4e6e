"""Every page's choices kept across browser Back, reload and the sidebar: one mechanism for all pages.

Streamlit forgets a widget's value when a run does not draw it (another page was shown, a view was switched), and a
reload starts a new session. So a page declares the widget keys that make up its state, and at the top of each run

    keep(SIMULATE_STATE)          # restore, then record

- restores each key: from the URL when its query parameter differs from what this session last wrote there (a
  reload, browser Back to an older entry, a pasted link), else from the session's own copy when Streamlit dropped
  the widget's value (back from another page by the sidebar or Back);
- records the current values in that copy and in the URL (`?sim_view=Side+by+side&sbs_episode=...`), so a reload or
  a shared address reopens the page as it was.

A value set by the page in the middle of a run is recorded at the next run, or at once with `record` (call it after
setting). A URL value that is not one of a select box's options is dropped by Streamlit itself (the default shows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st

__all__ = ["PageState", "forget", "keep", "record", "restore"]

_KEPT = "_page_state_kept"  # {widget key: value}: survives the runs that do not draw the widget
_WRITTEN = "_page_state_written"  # {query parameter: the text this session last wrote} (None: removed)
_TRUE, _FALSE = "1", "0"


@dataclass(frozen=True)
class PageState:
    """A page's kept widget keys and their value types (str, int, float, bool or list: a list of strings); `params`
    names a key's query parameter when it is not the key itself (an address older links use)."""

    fields: Mapping[str, type]
    params: Mapping[str, str] | None = None

    def param(self, key: str) -> str:
        return (self.params or {}).get(key, key)


def _to_url(value: Any) -> list[str] | str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value] or [""]  # an empty choice stays one: `?key=`
    return str(value)


def _from_url(raw: list[str], kind: type) -> Any:
    """The typed value of a query parameter's values; None when they do not read as `kind`."""
    if kind is list:
        return [item for item in raw if item]
    text = raw[-1] if raw else ""
    try:
        if kind is bool:
            return {_TRUE: True, _FALSE: False}.get(text)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        return None
    return text


def _url_value(param: str, kind: type) -> list[str] | str | None:
    """The parameter's text as `_to_url` would write it (None: absent)."""
    if param not in st.query_params:
        return None
    raw = st.query_params.get_all(param)
    return (raw or [""]) if kind is list else (raw[-1] if raw else "")


def restore(state: PageState) -> None:
    """Put back each kept key: from the URL when its parameter is not what this session last wrote, else the
    session's copy when the widget's value was dropped. Call before the page draws its widgets."""
    ss = st.session_state
    kept: dict[str, Any] = ss.setdefault(_KEPT, {})
    written: dict[str, Any] = ss.setdefault(_WRITTEN, {})
    for key, kind in state.fields.items():
        param = state.param(key)
        in_url = _url_value(param, kind)
        if in_url is not None and in_url != written.get(param):
            value = _from_url(st.query_params.get_all(param), kind)
            if value is not None:
                ss[key] = value
                written[param] = in_url
                continue
        if key not in ss and key in kept:
            ss[key] = kept[key]


def record(state: PageState) -> None:
    """Copy the kept keys' current values into the session's copy and the URL (only what changed is written)."""
    ss = st.session_state
    kept: dict[str, Any] = ss.setdefault(_KEPT, {})
    written: dict[str, Any] = ss.setdefault(_WRITTEN, {})
    for key, kind in state.fields.items():
        if key not in ss:
            continue
        value = ss[key]
        kept[key] = list(value) if isinstance(value, (list, tuple)) else value
        param, text = state.param(key), _to_url(value)
        if _url_value(param, kind) != text:
            if text is None:
                del st.query_params[param]
            else:
                st.query_params[param] = text
        written[param] = text


def forget(*keys: str) -> None:
    """Drop keys from the session's copy: a page that resets widgets (`del st.session_state[key]`) calls it so the
    next run does not put the old values back."""
    kept: dict[str, Any] = st.session_state.setdefault(_KEPT, {})
    for key in keys:
        kept.pop(key, None)


def keep(state: PageState) -> None:
    """`restore` then `record`: the one call at the top of a page."""
    restore(state)
    record(state)
