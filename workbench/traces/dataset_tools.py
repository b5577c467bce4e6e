"""Split assignment and export of the current dataset (the same library calls as `worldsmith split|export`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.data import display_path
from workbench.common.text import md_code, md_escape
from worldsmith.workspace import Workspace

EXPORT_FORMATS = ["jsonl", "openai", "trace2env"]


def render_split_form(workspace: Workspace, name: str) -> None:
    """Ratios and a seed; all episodes of a trajectory family land in one split."""
    st.caption("Families (family, else task id, else the episode) are never split apart.")
    cols = st.columns(4, vertical_alignment="bottom")
    train = cols[0].number_input("train", min_value=0.0, max_value=1.0, value=0.8, step=0.05, key="sp_train")
    validation = cols[1].number_input("validation", min_value=0.0, max_value=1.0, value=0.1, step=0.05,
                                      key="sp_validation")
    test = cols[2].number_input("test", min_value=0.0, max_value=1.0, value=0.1, step=0.05, key="sp_test")
    seed = cols[3].number_input("seed", min_value=0, value=0, step=1, key="sp_seed")
    if st.button("Assign splits", key="sp_assign", icon=":material/call_split:"):
        try:
            result = workspace.split(name, {"train": train, "validation": validation, "test": test}, seed=int(seed))
        except ValueError as error:
            st.error(md_escape(error), icon=":material/error:")
            return
        st.session_state["sp_result"] = result
        st.rerun()  # the split filter and export choices above were drawn before the assignment
    result = st.session_state.get("sp_result")
    if result and result.get("dataset") == name:
        rows = [{"split": split, **counts} for split, counts in result["splits"].items()]
        st.dataframe(pd.DataFrame(rows), hide_index=True)


def render_export_form(workspace: Workspace, name: str, splits: list[str]) -> None:
    """Write the dataset (or one split) in a trace format inside the workspace, then offer it for download."""
    cols = st.columns(3, vertical_alignment="bottom")
    fmt = cols[0].selectbox("Format", EXPORT_FORMATS, key="ex_format",
                            help="jsonl: native worldsmith; openai: chat messages; trace2env: event layout")
    split = cols[1].selectbox("Split", ["all", *splits], key="ex_split")
    if cols[2].button("Export", key="ex_run", icon=":material/download:"):
        suffix = "" if split == "all" else f".{split}"
        out = workspace.root / "exports" / f"{name}{suffix}.{fmt}.jsonl"
        count = workspace.export(name, fmt, out, split=None if split == "all" else split)
        st.session_state["ex_result"] = {"dataset": name, "path": str(out), "episodes": count}
    result = st.session_state.get("ex_result")
    if result and result.get("dataset") == name:
        where = md_code(display_path(result["path"], workspace.root))
        st.write(f"Wrote {md_escape(result['episodes'])} episodes to {where}.")
        with open(result["path"], "rb") as handle:
            st.download_button("Download", handle, file_name=result["path"].rsplit("/", 1)[-1],
                               mime="application/jsonl", key="ex_download", icon=":material/file_download:")



