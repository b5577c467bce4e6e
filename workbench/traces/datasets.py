"""Dataset picker and lookups across the workspace's datasets."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common import data, state
from workbench.common.text import md_code
from worldsmith.workspace import Dataset


def successes_text(stats: dict) -> str:
    """The Successes figure: the count, "of N recorded" when only some episodes record an outcome, and "—" when
    none does (0 would claim every episode failed)."""
    recorded = stats.get("with_outcome", stats["episodes"])
    if not recorded:
        return "—"
    text = f"{stats['successes']:,}"
    return text if recorded == stats["episodes"] else f"{text} of {recorded:,} recorded"


def datasets_frame(root: str, datasets: list[str]) -> pd.DataFrame:
    """Name and size of every dataset (cached per dataset revision)."""
    rows = []
    for name in datasets:
        dataset = data.open_dataset(root, name)
        if dataset is None:
            continue
        stats = data.dataset_stats(root, name, dataset.revision)
        rows.append({"dataset": name, "episodes": stats["episodes"], "turns": stats["turns"],
                     "dialogue_only": stats["dialogue_only"], "environments": stats["environments"],
                     "successes": stats["successes"] if stats.get("with_outcome", 1) else None,
                     "revision": stats["revision"]})
    return pd.DataFrame(rows)


def render_dataset_picker(root: str, datasets: list[str]) -> Dataset | None:
    """Select box of the workspace's datasets, the chosen dataset's stats, and all datasets' sizes.

    The options are the bare names: a label that changes with the data (e.g. an episode count)
    would not match the browser's stored selection after an import.
    """
    st.session_state["tr_dataset_pick"] = state.current_dataset()

    def on_pick() -> None:
        picked = st.session_state.get("tr_dataset_pick")
        if picked in datasets:
            state.select_dataset(picked)

    cols = st.columns([3, 5], vertical_alignment="bottom")
    with cols[0]:
        st.selectbox(
            f"Dataset ({len(datasets)} in the workspace)", datasets, key="tr_dataset_pick", on_change=on_pick,
        )
    dataset = data.open_dataset(root, state.current_dataset())
    if dataset is None:
        st.warning(f"Dataset {md_code(state.current_dataset())} could not be opened.", icon=":material/error:")
        return None
    stats = data.dataset_stats(root, dataset.name, dataset.revision)
    with cols[1]:
        metrics = st.columns(5)
        metrics[0].metric("Episodes", f"{stats['episodes']:,}")
        metrics[1].metric("Turns", f"{stats['turns']:,}")
        metrics[2].metric("Dialogue only", f"{stats['dialogue_only']:,}",
                          help="Episodes without a tool call (messages only), counted in Episodes.")
        metrics[3].metric("Environments", f"{stats['environments']:,}")
        metrics[4].metric("Successes", successes_text(stats),
                          help="Episodes whose log records success (or a reward above 0); '—' when none records "
                               "an outcome at all.")
    if len(datasets) > 1:
        with st.expander(f"All datasets ({len(datasets)})", icon=":material/dataset:"):
            st.dataframe(datasets_frame(root, datasets), hide_index=True, width="stretch")
    return dataset


def find_turn_dataset(root: str, datasets: list[str], turn_id: str) -> str | None:
    """The first dataset (the current one first) holding `turn_id`."""
    current = state.current_dataset()
    for name in ([current] if current in datasets else []) + [d for d in datasets if d != current]:
        dataset = data.open_dataset(root, name)
        if dataset is not None and data.has_turn(root, name, dataset.revision, turn_id):
            return name
    return None
