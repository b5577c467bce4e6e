"""Train: EnvACE runs and sweeps — configure and launch them in the background, follow their curves live,
compare runs, read a sweep as a table and heat map, and see rehearsed responses beside the real ones.

Runs live in `<workspace>/runs/envace/<run>/` (the trainer's run store: config, metrics.jsonl,
probes.jsonl, checkpoints, summary, status); sweeps in `runs/envace/sweeps/<name>/`. A run launched
here is `worldsmith envace train --config ... --out ...` in a detached process: it keeps going when
the page is reloaded or left, and the page finds it again from its status file.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench.common import data
from workbench.common.page_state import PageState, keep
from workbench.train.form import NOTICE, render_run_form, render_sweep_form
from workbench.train.runs import list_runs
from workbench.train.views import render_compare, render_run, render_sweeps

root = Path(data.workspace_root())
keep(PageState({"tr_run": str}))  # the run shown survives Back, a reload and the sidebar
st.title("Train", anchor=False)
st.markdown("EnvACE trains one set of weights to **act** (the next tool call) and to **rehearse** (the tool's "
            "response). Launch a run or a sweep, watch both roles' losses, the reward and the rehearsal fidelity "
            "on held-out real transitions, and compare. Or from a terminal: `worldsmith envace train --config FILE`.")
if NOTICE in st.session_state:
    st.success(st.session_state.pop(NOTICE), icon=":material/rocket_launch:")

runs = list_runs(root)
run_tab, compare_tab, sweeps_tab, launch_tab = st.tabs(["Run", "Compare", "Sweeps", "Launch"])

with run_tab:
    if not runs:
        st.info("No EnvACE runs in this workspace yet: launch one in the Launch tab.", icon=":material/info:")
    else:
        names = [run.name for run in runs]
        wanted = st.session_state.get("tr_run")
        if wanted not in names:
            st.session_state.pop("tr_run", None)
        by_name = {run.name: run for run in runs}
        chosen = st.selectbox("Run", names, format_func=lambda name: by_name[name].label, key="tr_run")
        render_run(root, by_name[chosen])

with compare_tab:
    render_compare(runs)

with sweeps_tab:
    render_sweeps(root)

with launch_tab:
    from worldsmith.envs import registry
    from worldsmith.worldbook import WorldbookStore

    datasets = data.list_datasets(str(root))
    books = WorldbookStore.of_workspace(root).names()
    envs = ["bfcl", *sorted(name for name in registry() if name != "bfcl")]
    st.subheader("A run", anchor=False)
    render_run_form(root, datasets, books, envs)
    st.subheader("A sweep (Ray Tune)", anchor=False)
    render_sweep_form(root, {run.name: run.config for run in runs if run.config})
