"""Home: the workspace at a glance, with links into the Traces page."""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402
from workbench.common import data  # noqa: E402
from workbench.common.text import md_code  # noqa: E402
from workbench.home.cards import render_dataset_cards  # noqa: E402

root = data.workspace_root()
st.title("worldsmith", anchor=False)
st.markdown(
    "A research workbench that turns recorded agent traces into simulators of their environments. "
    "Start on **Traces**: import trace files, browse episodes and read them turn by turn."
)
st.caption(f"Workspace: {md_code(root)} (set `WORLDSMITH_WORKSPACE` to use another folder)")
render_dataset_cards(root)
