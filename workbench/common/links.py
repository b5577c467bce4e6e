"""Shareable links into the workbench (the Traces page's deep links).

    turn_link("samples", "ep-1#3")    -> "traces?dataset=samples&turn=ep-1%233"
    episode_link("samples", "ep-1")   -> "traces?dataset=samples&episode=ep-1"

The URLs are relative to the app's root, so they work under any `server.baseUrlPath`, in
markdown (`[turn 3](...)`) or as an href. Inside the app prefer `turn_page_link`, which
navigates without reloading the page (st.page_link with query parameters).
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

TRACES_URL_PATH = "traces"


def turn_query(dataset: str | None, turn_id: str) -> dict[str, str]:
    params = {"dataset": dataset} if dataset else {}
    params["turn"] = turn_id
    return params


def episode_query(dataset: str | None, episode_id: str) -> dict[str, str]:
    params = {"dataset": dataset} if dataset else {}
    params["episode"] = episode_id
    return params


def rule_query(book: str, rule_id: str) -> dict[str, str]:
    """Query parameters that open the Worldbook page on a rule."""
    return {"book": book, "rule": rule_id}


def simulate_query(dataset: str, episode_id: str, turn: int, book: str | None = None, *,
                   method: str | None = None) -> dict[str, str]:
    """Query parameters that open the Simulate page's side-by-side view on an episode at a turn; with `method`, that
    world model is the one stepped and its audit is shown open."""
    params = {"dataset": dataset, "episode": episode_id, "turn": str(int(turn))}
    if book:
        params["book"] = book
    if method:
        params["method"] = method
    return params


def _url(params: dict[str, str], page: str) -> str:
    return f"{page}?{urlencode(params, quote_via=quote, safe='')}"


def turn_link(dataset: str | None, turn_id: str, *, page: str = TRACES_URL_PATH) -> str:
    """Relative URL of the Traces page opened on `turn_id` ('#' is encoded as %23)."""
    return _url(turn_query(dataset, turn_id), page)


def episode_link(dataset: str | None, episode_id: str, *, page: str = TRACES_URL_PATH) -> str:
    """Relative URL of the Traces page opened on an episode."""
    return _url(episode_query(dataset, episode_id), page)


def turn_page_link(dataset: str | None, turn_id: str, *, label: str | None = None, icon: str | None = ":material/link:"):
    """An st.page_link to the turn on the Traces page (only inside the st.navigation app); `label` is plain text."""
    import streamlit as st

    from workbench.common.paths import page_file
    from workbench.common.text import md_escape

    return st.page_link(page_file("traces"), label=md_escape(label or turn_id), icon=icon,
                        query_params=turn_query(dataset, turn_id))
