"""Evaluate: the results of `worldsmith eval` runs, where methods fail, and new runs launched in the background.

Runs live in `<workspace>/runs/eval/<run>/` (config.json, report.json, records.parquet,
progress.json), written by the library; this page only reads them. Intervals are the report's
paired bootstrap over trajectories. A run launched here is `worldsmith eval ... --json` in a
detached process, so it keeps going when the page is reloaded or left.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench.common import data
from workbench.common.page_state import PageState, keep
from workbench.common.text import md_code, md_escape
from workbench.evaluate.compare import render_compare
from workbench.evaluate.consistency import render_consistency
from workbench.evaluate.failures import render_failures
from workbench.evaluate.jobs import list_jobs
from workbench.evaluate.launch import (
    LAUNCH_STATE,
    render_jobs,
    render_launch_form,
    render_no_runs,
    workspace_choices,
)
from workbench.evaluate.records import render_records
from workbench.evaluate.results import render_results
from workbench.evaluate.runs import (
    RunFileError,
    RunInfo,
    list_runs,
    load_records,
    load_report,
    read_config,
    run_dataset,
)

TAB_KEY = "ev_tab"  # the open tab: Results, Records, Failures, Compare, Consistency or Launch
RUN_SCOPED = ("ev_scope", "ev_protocol", "ev_metric", "ev_wl_", "ev_fx_", "ev_cmp_")  # widget keys that depend on the run shown

root = Path(data.workspace_root())
keep(PageState({TAB_KEY: str, "ev_run": str}))  # the tab, the run shown and the launch form's settings survive Back,
keep(LAUNCH_STATE)  # a reload and the sidebar
st.title("Evaluate", anchor=False)
st.markdown(
    "Compare simulators on held-out trajectories: next-observation fidelity, open-loop drift and "
    "world-to-real replay, each with paired 95% intervals. Launch a run below, or with `worldsmith eval`."
)

render_jobs(root)
runs = list_runs(root)
complete = [run for run in runs if run.complete]


def _label(info: RunInfo) -> str:
    if info.error:
        return f"{info.name} · unreadable"
    progress = f" {info.done}/{info.total}" if info.total else ""
    if info.status == "failed":
        return f"{info.name} · failed{progress}"
    if not info.complete:
        return f"{info.name} · running{progress}"
    return f"{info.name} · {info.protocol} · {', '.join(info.methods)}"


by_name = {info.name: info for info in runs}
chosen: str | None
if runs:
    chosen = st.selectbox("Run", list(by_name), format_func=lambda name: _label(by_name[name]), key="ev_run")
else:
    chosen = None
    render_no_runs(list_jobs(root))
if st.session_state.get("ev_shown_run") != chosen:
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(RUN_SCOPED)]:
        del st.session_state[key]
    st.session_state["ev_shown_run"] = chosen

# Only the open tab is drawn (a rerun on switching): drawing all of them cost the browser seconds (Plotly, highlighted
# code, a dozen data grids; benchmarks/page_load.py), for tabs nobody looks at.
results_tab, records_tab, failures_tab, compare_tab, consistency_tab, launch_tab = st.tabs(
    ["Results", "Records", "Failures", "Compare", "Consistency", "Launch"], key=TAB_KEY, on_change="rerun"
)

if launch_tab.open:
    with launch_tab:
        render_launch_form(root, *workspace_choices(root))
if consistency_tab.open:  # needs no evaluation run; the chosen one's per-tool fidelity is shown beside
    with consistency_tab:
        shown_run = by_name.get(chosen) if chosen else None
        try:
            run_records = load_records(shown_run.path) if shown_run is not None and not shown_run.error else None
        except RunFileError:
            run_records = None
        render_consistency(root, workspace_choices(root)[0], run_records, chosen)

info = by_name.get(chosen) if chosen else None
if info is None:
    st.stop()
if info.error:
    with results_tab:
        st.error(md_escape(info.error), icon=":material/error:")
    st.stop()
try:
    report = load_report(info.path)
    records = load_records(info.path)
    config = read_config(info.path) or (report.config if report is not None else None)
except RunFileError as error:
    with results_tab:
        st.error(md_escape(error), icon=":material/error:")
    st.stop()
dataset = run_dataset(config)

if results_tab.open:
    with results_tab:
        units = f"{md_escape(info.done or 0)}/{md_escape(info.total or '?')}"
        if info.status == "failed":
            st.error(
                f"Run {md_code(info.name)} stopped after {units} units: {md_code(info.message)}",
                icon=":material/error:",
            )
        if report is None and info.status != "failed":
            st.info(
                f"Run {md_code(info.name)} has no report yet ({units} done"
                + (f": {md_code(info.message)}" if info.message else "")
                + "); its results appear here when it finishes.",
                icon=":material/hourglass_top:",
            )
        elif report is not None:
            render_results(info.path, report, records)
if records_tab.open:
    with records_tab:
        render_records(records, dataset)
if failures_tab.open:
    with failures_tab:
        render_failures(info.name, report, records, dataset, str(root))
if compare_tab.open:
    with compare_tab:
        if report is None:
            st.info("This run has no report yet.", icon=":material/info:")
        else:
            others = {}
            for other in complete:
                if other.name != info.name:
                    try:
                        loaded = load_report(other.path)
                    except RunFileError:
                        continue
                    if loaded is not None:
                        others[other.name] = loaded
            render_compare(info.name, report, {info.name: report, **others}, str(root))
