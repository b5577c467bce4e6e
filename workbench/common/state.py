"""Session state of the Traces page and its sync with the URL.

The selection (dataset, episode, linked turn) lives in plain session-state keys, so it
survives reruns and page switches; widgets copy to and from them. The URL mirrors it:

    ?dataset=<name>&episode=<episode_id>
    ?dataset=<name>&turn=<episode_id>%23<index>     (the turn is highlighted)

`apply_query_params` runs at the top of the page and applies a URL that differs from the one
this page last wrote (a fresh page load, a pasted link, an st.page_link from another page);
`sync_query_params` runs at the end and writes the current selection back.
"""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from workbench.common.page_state import PageState, forget
from workbench.common.text import md_code
from worldsmith.traces import split_turn_id

DATASET = "tr_dataset"
EPISODE = "tr_episode"
LINKED_TURN = "tr_linked_turn"
SCROLL_TO_TURN = "tr_scroll_to_turn"
NOTICES = "tr_notices"
QP_APPLIED = "tr_qp_applied"
LAST_REPORT = "tr_last_report"
UPLOADER_GENERATION = "tr_uploader_generation"

# widget keys
TURN_PAGE = "tr_turn_page"
TURN_PAGE_SIZE = "tr_turn_page_size"
TURN_SEARCH = "tr_turn_search"
EPISODE_PAGE = "tr_episode_page"
EPISODE_PAGE_SIZE = "tr_episode_page_size"
FILTER_KEYS = ("tr_f_env", "tr_f_task", "tr_f_outcome", "tr_f_min", "tr_f_max", "tr_f_split", "tr_f_search")
# The episode filters, kept across Back, reload and the sidebar (`workbench.common.page_state`); the dataset, episode
# and turn are this module's own URL (`apply_query_params`).
FILTER_STATE = PageState({"tr_f_env": str, "tr_f_task": str, "tr_f_outcome": str, "tr_f_min": int, "tr_f_max": int,
                          "tr_f_split": str, "tr_f_search": str, "tr_f_tools": str})

TURN_PAGE_SIZES = (20, 50)
EPISODE_PAGE_SIZES = (25, 50, 100)
QP_KEYS = ("dataset", "episode", "turn")


def init_state() -> None:
    ss = st.session_state
    ss.setdefault(DATASET, None)
    ss.setdefault(EPISODE, None)
    ss.setdefault(LINKED_TURN, None)
    ss.setdefault(SCROLL_TO_TURN, False)
    ss.setdefault(NOTICES, [])
    ss.setdefault(UPLOADER_GENERATION, 0)
    ss.setdefault(TURN_PAGE_SIZE, TURN_PAGE_SIZES[0])
    ss.setdefault(EPISODE_PAGE_SIZE, EPISODE_PAGE_SIZES[0])


def current_dataset() -> str | None:
    return st.session_state.get(DATASET)


def current_episode() -> str | None:
    return st.session_state.get(EPISODE)


def linked_turn() -> str | None:
    return st.session_state.get(LINKED_TURN)


def notice(message: str) -> None:
    st.session_state.setdefault(NOTICES, []).append(message)


def take_notices() -> list[str]:
    notices = list(st.session_state.get(NOTICES) or [])
    st.session_state[NOTICES] = []
    return notices


# ------------------------------------------------------------------------- transitions
# Safe to call from widget callbacks and at the top of a run (before the widgets exist).


def reset_turn_view(page: int = 1) -> None:
    st.session_state[TURN_PAGE] = page
    st.session_state[TURN_SEARCH] = ""


def select_dataset(name: str | None) -> None:
    """Switch dataset: clears the episode, the linked turn, the filters and the pages."""
    if name == st.session_state.get(DATASET):
        return
    st.session_state[DATASET] = name
    st.session_state[EPISODE] = None
    st.session_state[LINKED_TURN] = None
    for key in FILTER_KEYS:
        st.session_state.pop(key, None)
    forget(*FILTER_KEYS)
    st.session_state[EPISODE_PAGE] = 1
    reset_turn_view()


def select_episode(episode_id: str | None) -> None:
    """Open an episode at its first turn (no linked turn)."""
    if episode_id == st.session_state.get(EPISODE) and st.session_state.get(LINKED_TURN) is None:
        return
    st.session_state[EPISODE] = episode_id
    st.session_state[LINKED_TURN] = None
    reset_turn_view()


def link_turn(turn_id: str) -> None:
    """Open the turn's episode on the page that holds the turn, and highlight the turn."""
    episode_id, index = split_turn_id(turn_id)
    size = int(st.session_state.get(TURN_PAGE_SIZE) or TURN_PAGE_SIZES[0])
    st.session_state[EPISODE] = episode_id
    st.session_state[LINKED_TURN] = turn_id
    st.session_state[SCROLL_TO_TURN] = True
    reset_turn_view(page=index // size + 1)



# ------------------------------------------------------------------------- URL sync


def _query_signature() -> tuple[str | None, ...]:
    return tuple(st.query_params.get(key) or None for key in QP_KEYS)


def apply_query_params(datasets: Iterable[str], find_turn=None) -> None:
    """Apply ?dataset= / ?episode= / ?turn= when the URL changed since this page last wrote it.

    `find_turn(turn_id) -> dataset name | None` locates a turn when the link names no dataset.
    """
    signature = _query_signature()
    if signature == st.session_state.get(QP_APPLIED):
        return
    st.session_state[QP_APPLIED] = signature
    dataset, episode, turn = signature
    if not any(signature):
        return
    names = list(datasets)
    if dataset:
        if dataset in names:
            select_dataset(dataset)
        else:
            notice(f"Dataset {md_code(dataset)} is not in this workspace.")
            return
    if turn:
        try:
            split_turn_id(turn)
        except ValueError:
            notice(f"{md_code(turn)} is not a turn id (expected `<episode_id>#<index>`).")
            return
        if not dataset and find_turn is not None:
            found = find_turn(turn)
            if found:
                select_dataset(found)
        link_turn(turn)
    elif episode:
        st.session_state[EPISODE] = None  # force select_episode to reset the view
        select_episode(episode)


def sync_query_params() -> None:
    """Write the current selection into the URL (so it can be shared and reloaded)."""
    want: dict[str, str] = {}
    if st.session_state.get(DATASET):
        want["dataset"] = st.session_state[DATASET]
        if st.session_state.get(LINKED_TURN):
            want["turn"] = st.session_state[LINKED_TURN]
        elif st.session_state.get(EPISODE):
            want["episode"] = st.session_state[EPISODE]
    for key in QP_KEYS:
        value = want.get(key)
        if value is None:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != value:
            st.query_params[key] = value
    st.session_state[QP_APPLIED] = tuple(want.get(key) for key in QP_KEYS)
