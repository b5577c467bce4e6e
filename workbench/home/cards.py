"""The Home page's overview of the workspace."""

from __future__ import annotations

import streamlit as st

from workbench.common import data
from workbench.common.links import TRACES_URL_PATH
from workbench.common.paths import page_file
from workbench.common.text import md_escape


def render_dataset_cards(root: str) -> None:
    names = data.list_datasets(root)
    st.subheader(f"Datasets ({len(names)})", anchor=False)
    if not names:
        st.info("No datasets yet. Import trace files on the Traces page.", icon=":material/info:")
        st.page_link(page_file("traces"), label="Import traces", icon=":material/upload_file:")
        return
    for start in range(0, len(names), 3):
        cols = st.columns(3)
        for col, name in zip(cols, names[start:start + 3], strict=False):
            dataset = data.open_dataset(root, name)
            if dataset is None:
                continue
            stats = data.dataset_stats(root, name, dataset.revision)
            with col.container(border=True):
                st.markdown(f"#### {md_escape(name)}")
                metrics = st.columns(3)
                metrics[0].metric("Episodes", f"{stats['episodes']:,}")
                metrics[1].metric("Turns", f"{stats['turns']:,}")
                metrics[2].metric("Envs", f"{stats['environments']:,}", help="Distinct environments")
                successes, recorded = stats["successes"], stats.get("with_outcome", stats["episodes"])
                if recorded:
                    rate = f"{successes / recorded:.0%}"
                    of = "" if recorded == stats["episodes"] else f" of {recorded:,} that record an outcome"
                    outcome = f"{successes:,} successful episodes{of} ({rate})"
                else:
                    outcome = "no outcome recorded"
                st.caption(f"{outcome} · revision {stats['revision']:d}")
                st.page_link(page_file("traces"), label="Browse in Traces", icon=":material/timeline:",
                             query_params={"dataset": name})
    st.caption(f"Links into the Traces page can be shared: `{TRACES_URL_PATH}?dataset=<name>&turn=<episode_id>%23<index>`.")
