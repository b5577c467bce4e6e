"""The Home page's list of the workspace's worldbooks: each one's environment, head version and last change."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.data import book_summary
from workbench.common.paths import page_file
from workbench.common.text import literal_table, md_escape


def render_books(root: str) -> None:
    from worldsmith.worldbook import WorldbookStore

    names = WorldbookStore.of_workspace(root).names()
    st.subheader(f"Worldbooks ({len(names)})", anchor=False)
    if not names:
        st.caption("No worldbooks yet: build one from a dataset on the Build page.")
        return
    rows = [book_summary(root, name) for name in names]
    st.table(literal_table(pd.DataFrame(rows).set_index("book")))
    cols = st.columns(4)
    for index, name in enumerate(names):
        cols[index % 4].page_link(page_file("worldbook"), label=md_escape(name), icon=":material/menu_book:",
                                  query_params={"book": name})
