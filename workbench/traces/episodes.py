"""The episode browser: filters, a paginated table with row selection, episode picker."""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from workbench.common import data, state
from worldsmith.workspace import EpisodeFilter

OUTCOMES = ("any", "success", "failure", "unknown")
ALL = "All"
# The "Tool calls" filter: its choices and the `EpisodeFilter.dialogue_only` each gives.
TOOL_CALLS = {"any": None, "with tool calls": False, "dialogue only": True}

COLUMNS = {
    "episode_id": st.column_config.TextColumn("Episode", width="medium"),
    "env_id": st.column_config.TextColumn("Environment", width="medium"),
    "task_id": st.column_config.TextColumn("Task id", width="small"),
    "task": st.column_config.TextColumn("Task", width="large"),
    "n_turns": st.column_config.NumberColumn("Turns", format="%d", width="small"),
    "dialogue_only": st.column_config.CheckboxColumn("Dialogue only", width="small",
                                                     help="no tool call: messages only (left out of build and eval)"),
    "reward": st.column_config.NumberColumn("Reward", format="%.3g", width="small"),
    "success": st.column_config.CheckboxColumn("Success", width="small",
                                               help="the recorded success flag, else reward > 0 (as Successes counts)"),
    "split": st.column_config.TextColumn("Split", width="small"),
    "family": st.column_config.TextColumn("Family"),
    "source_format": st.column_config.TextColumn("Format", width="small"),
    "source_path": st.column_config.TextColumn("Source file", width="medium"),
}


def render_filters(environments: list[str], splits: list[str]) -> EpisodeFilter:
    """The filter row; returns the EpisodeFilter it describes."""
    ss = st.session_state
    # Drop values that do not exist in this dataset (e.g. after an import changed the facets).
    if ss.get("tr_f_env") not in (None, ALL, *environments):
        ss.pop("tr_f_env")
    if ss.get("tr_f_split") not in (None, ALL, *splits):
        ss.pop("tr_f_split")
    cols = st.columns([2, 2, 2, 1.4, 1, 1, 1.6, 2])
    env = cols[0].selectbox("Environment", [ALL, *environments], key="tr_f_env")
    task = cols[1].text_input("Task contains", key="tr_f_task", placeholder="text in the task")
    search = cols[2].text_input("Search", key="tr_f_search", placeholder="episode id or task",
                                help="Matches the episode id or the task text (case-insensitive).")
    outcome = cols[3].selectbox("Outcome", OUTCOMES, key="tr_f_outcome",
                                help="success/failure from the recorded success flag, else reward > 0.")
    min_turns = cols[4].number_input("Min turns", min_value=0, value=None, step=1, key="tr_f_min")
    max_turns = cols[5].number_input("Max turns", min_value=0, value=None, step=1, key="tr_f_max")
    tool_calls = cols[6].selectbox("Tool calls", list(TOOL_CALLS), key="tr_f_tools",
                                   help="Dialogue only: conversations in which the agent called no tool.")
    split = cols[7].selectbox("Split", [ALL, *splits], key="tr_f_split", disabled=not splits,
                              help=None if splits else "No splits assigned yet (worldsmith split).")
    return EpisodeFilter(
        env_id=None if env in (None, ALL) else env,
        task_contains=(task or "").strip() or None,
        outcome=None if outcome in (None, "any") else outcome,
        min_turns=int(min_turns) if min_turns is not None else None,
        max_turns=int(max_turns) if max_turns is not None else None,
        split=None if split in (None, ALL) else split,
        search=(search or "").strip() or None,
        dialogue_only=TOOL_CALLS.get(tool_calls),
    )


def _clamp_page(key: str, pages: int) -> None:
    value = st.session_state.get(key)
    if not isinstance(value, int) or value < 1:
        st.session_state[key] = 1
    elif value > pages:
        st.session_state[key] = pages


def render_episode_table(root: str, name: str, revision: int, where: EpisodeFilter) -> list[str]:
    """One page of matching episodes as a selectable table; returns the page's episode ids.

    Only the current page is queried and sent to the browser.
    """
    key = data.filter_key(where)
    total = data.episode_count(root, name, revision, key)
    signature = hashlib.blake2b(repr((name, revision, key)).encode(), digest_size=6).hexdigest()
    if st.session_state.get("tr_filter_signature") != signature:
        if st.session_state.get("tr_filter_signature") is not None:
            st.session_state[state.EPISODE_PAGE] = 1
        st.session_state["tr_filter_signature"] = signature

    if total == 0:
        st.info("No episodes match these filters.", icon=":material/filter_alt_off:")
        return []

    table_area = st.container()
    pager = st.container(horizontal=True, vertical_alignment="center", gap="medium")
    with pager:
        size = st.selectbox("Page size", state.EPISODE_PAGE_SIZES, key=state.EPISODE_PAGE_SIZE,
                            label_visibility="collapsed", width=110,
                            format_func=lambda n: f"{n} / page")
        pages = max(1, -(-total // size))
        _clamp_page(state.EPISODE_PAGE, pages)
        page = st.pagination(pages, key=state.EPISODE_PAGE) if pages > 1 else 1
        first = (page - 1) * size
        st.caption(f"Episodes {first + 1:d}–{min(first + size, total):d} of {total:,}")

    frame = data.episode_page(root, name, revision, key, size, first)
    ids = [str(v) for v in frame["episode_id"].tolist()]
    current = state.current_episode()
    selected_rows = [ids.index(current)] if current in ids else []
    with table_area:
        event = st.dataframe(
            _display_frame(frame),
            hide_index=True,
            width="stretch",
            height=min(38 + 35 * len(frame), 420),
            column_config=COLUMNS,
            column_order=[c for c in COLUMNS if c != "family"],
            placeholder="—",
            on_select="rerun",
            selection_mode="single-row",
            selection_default={"selection": {"rows": selected_rows}},
            # The key follows the page and the open episode, so the highlighted row always
            # shows the open episode (also when it was opened by a link or the picker).
            key=f"tr_episodes_{signature}_{page}_{size}_{_short_hash(current or '')}",
        )
    rows = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    if rows and 0 <= rows[0] < len(ids) and ids[rows[0]] != current:
        state.select_episode(ids[rows[0]])
        st.rerun()
    return ids


def _short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def _display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    if "success" in out:
        out["success"] = out["success"].astype("boolean")
    return out


def render_episode_picker(page_ids: list[str]) -> None:
    """A select box over the current page's episodes, with previous/next buttons."""
    current = state.current_episode()
    options = list(page_ids)
    if current and current not in options:
        options.insert(0, current)
    st.session_state["tr_episode_pick"] = current if current in options else None

    def on_pick() -> None:
        state.select_episode(st.session_state.get("tr_episode_pick"))

    def step(offset: int) -> None:
        if current in page_ids:
            position = page_ids.index(current) + offset
            if 0 <= position < len(page_ids):
                state.select_episode(page_ids[position])

    cols = st.columns([6, 1, 1], vertical_alignment="bottom")
    cols[0].selectbox(
        "Episode", options, key="tr_episode_pick", on_change=on_pick, index=None,
        placeholder="Select a row in the table, or pick an episode here",
    )
    at = page_ids.index(current) if current in page_ids else -1
    cols[1].button("Previous", icon=":material/chevron_left:", key="tr_prev_episode", width="stretch",
                   on_click=step, args=(-1,), disabled=at <= 0)
    cols[2].button("Next", icon=":material/chevron_right:", key="tr_next_episode", width="stretch",
                   on_click=step, args=(1,), disabled=at < 0 or at >= len(page_ids) - 1)
