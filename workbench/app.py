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
from workbench.common.pages import PAGE_FILES, PAGES
from workbench.common.text import md_escape

st.set_page_config(page_title="worldsmith", page_icon="🌍", layout="wide")

imported = ensure_samples(workspace_root())
if imported and imported.get("committed"):
    st.toast(f"Imported the sample traces: {md_escape(imported['episodes'])} episodes into dataset `samples`.",
             icon=":material/check_circle:")

# Every registered page (the built-ins, then plug-ins: `workbench.common.pages`), in registration order.
pages = [st.Page(spec.file, title=spec.title, icon=spec.icon, url_path="" if spec.default else spec.name,
                 default=spec.default) for spec in PAGES.values()]
# The default page is served at the root only; /home (a natural guess, and old links) opens Home too.
pages.append(st.Page(PAGE_FILES["home"], title="Home", icon=":material/home:", url_path="home", visibility="hidden"))
navigation = st.navigation(pages)
render_running_jobs_sidebar(workspace_root())  # builds and evaluations in the background, from every page
navigation.run()
