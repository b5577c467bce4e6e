"""Split assignment, environment relabelling and export of the current dataset (the same library calls as
`worldsmith split`, `worldsmith traces relabel` and `worldsmith export`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.data import display_path
from workbench.common.text import md_code, md_escape
from worldsmith.workspace import Workspace

EXPORT_FORMATS = ["jsonl", "openai", "trace2env"]
UNNAMED = "(no environment)"


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


def render_relabel_form(workspace: Workspace, name: str, environments: list[str], book_envs: list[str]) -> None:
    """Give the dataset's episodes (all, or those of the chosen environments) another environment id: e.g. a train
    and a test file of one API imported under two derived ids, or a worldbook's own id (`book_envs`)."""
    st.caption("Worldbooks are built and evaluated per environment id. Two files of one API imported under two "
               "ids (derived from the tools each happens to call) can be joined here.")
    with st.form("rl_form", border=False):
        left, right = st.columns(2)
        chosen = left.multiselect("Episodes of", [*environments, UNNAMED], key="rl_from",
                                  placeholder="every episode", help="leave empty to relabel every episode")
        env = right.text_input("New environment id", key="rl_env",
                               placeholder=book_envs[0] if book_envs else "e.g. toolshop",
                               help="worldbooks in this workspace simulate: " + (", ".join(book_envs) or "none yet"))
        submitted = st.form_submit_button("Relabel", icon=":material/label:")
    if submitted:
        only = [None if e == UNNAMED else e for e in chosen] or None
        try:
            result = workspace.relabel(name, env, only=only)
        except ValueError as error:
            st.error(md_escape(error), icon=":material/error:")
            return
        st.session_state["rl_result"] = result.model_dump()
        st.rerun()  # the environment filter above was drawn before the relabel
    result = st.session_state.get("rl_result")
    if result and result.get("dataset") == name:
        if result["episodes"]:
            was = ", ".join(f"{md_code(env or UNNAMED)}: {n:d}" for env, n in result["before"].items())
            st.success(f"{result['episodes']:d} episodes now have environment {md_code(result['env'])} (were {was}).",
                       icon=":material/label:")
        else:
            st.info(f"Every chosen episode already has environment {md_code(result['env'])}: nothing changed.",
                    icon=":material/info:")


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



