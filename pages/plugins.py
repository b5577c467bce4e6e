"""Plug-ins: every extension point (environments, importers, exporters, LLM backends, world models, metrics, answer
sources, pages), what is registered in each, plug-ins that failed to load, and metrics that fail the edge checks."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.plugins import edge_failure_rows, extension_rows, failure_rows

st.title("Plug-ins", anchor=False)
st.markdown("What a researcher adds is one file, registered by name: an installed package's entry point in the "
            "group below, or a module named in the environment variable. Each appears here, in the CLI "
            "(`worldsmith plugins`) and wherever that kind is offered.")
st.dataframe(pd.DataFrame(extension_rows()), hide_index=True, use_container_width=True)
failures = failure_rows()
if failures:
    st.warning("Some plug-ins could not be loaded and were skipped:", icon=":material/warning:")
    st.dataframe(pd.DataFrame(failures), hide_index=True, use_container_width=True)
misleading = edge_failure_rows()
if misleading:
    st.warning("Some metrics break an edge-case promise (an empty prediction must score 0, identical texts 1, every "
               "score lies in [0, 1]); their numbers can mislead:", icon=":material/warning:")
    st.dataframe(pd.DataFrame(misleading), hide_index=True, use_container_width=True)
