"""The worldsmith workbench: `streamlit run workbench/app.py` from the repository root.

Zero configuration: the workspace is $WORLDSMITH_WORKSPACE (else ./workspace); on first start
an empty workspace gets the bundled sample traces (data_samples/, or $WORLDSMITH_SAMPLES) as
dataset `samples`.
"""

from __future__ import annotations

import streamlit as st

from workbench.common.bootstrap import ensure_samples
from workbench.common.data import workspace_root
from workbench.common.jobs import render_running_jobs_sidebar
from workbench.common.paths import PAGE_FILES
from workbench.common.text import md_escape

st.set_page_config(page_title="worldsmith", page_icon="🌍", layout="wide")

imported = ensure_samples(workspace_root())
if imported and imported.get("committed"):
    st.toast(f"Imported the sample traces: {md_escape(imported['episodes'])} episodes into dataset `samples`.",
             icon=":material/check_circle:")

pages = [
    st.Page(PAGE_FILES["home"], title="Home", icon=":material/home:", url_path="", default=True),
    st.Page(PAGE_FILES["traces"], title="Traces", icon=":material/timeline:", url_path="traces"),
    st.Page(PAGE_FILES["collect"], title="Collect", icon=":material/sports_esports:", url_path="collect"),
    st.Page(PAGE_FILES["play"], title="Play", icon=":material/keyboard:", url_path="play"),
    st.Page(PAGE_FILES["build"], title="Build", icon=":material/construction:", url_path="build"),
    st.Page(PAGE_FILES["worldbook"], title="Worldbook", icon=":material/menu_book:", url_path="worldbook"),
    st.Page(PAGE_FILES["simulate"], title="Simulate", icon=":material/model_training:", url_path="simulate"),
    st.Page(PAGE_FILES["evaluate"], title="Evaluate", icon=":material/leaderboard:", url_path="evaluate"),
    st.Page(PAGE_FILES["train"], title="Train", icon=":material/fitness_center:", url_path="train"),
    st.Page(PAGE_FILES["models"], title="Models", icon=":material/psychology:", url_path="models"),
    # The default page is served at the root only; /home (a natural guess, and old links) opens Home too.
    st.Page(PAGE_FILES["home"], title="Home", icon=":material/home:", url_path="home", visibility="hidden"),
]
navigation = st.navigation(pages)
render_running_jobs_sidebar(workspace_root())  # builds and evaluations in the background, from every page
navigation.run()
