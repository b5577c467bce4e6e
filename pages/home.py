"""Home: the workspace at a glance (running jobs, datasets, worldbooks, evaluation runs), with links into the pages."""

from __future__ import annotations

import streamlit as st

from workbench.common import data
from workbench.common.text import md_code
from workbench.home.activity import render_recent_runs, render_running_jobs
from workbench.home.books import render_books
from workbench.home.cards import render_dataset_cards

root = data.workspace_root()
st.title("worldsmith", anchor=False)
st.markdown(
    "A research workbench that turns recorded agent traces into simulators of their environments. "
    "Start on **Traces**: import trace files, browse episodes and read them turn by turn."
)
st.caption(f"Workspace: {md_code(root)} (set `WORLDSMITH_WORKSPACE` to use another folder)")
render_running_jobs(root)
render_dataset_cards(root)
render_books(root)
render_recent_runs(root)
