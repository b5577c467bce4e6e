"""Build: make a worldbook from a dataset's trajectories, validated on held-out ones, saved as a new version.

The deterministic builder runs by default (seconds); a model spec runs the rules and notes stages on
a model too (every call cached and logged), and the report compares the two implementations. The stages are the
simulator's pipeline (`sim.simulator_stages`: the book's stages and the route table): each one's progress and
seconds show while it runs.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common import data
from workbench.common.paths import page_file
from workbench.common.text import md_escape
from workbench.worldbook.build_report import render_build_report
from worldsmith.sim import simulator_stages
from worldsmith.worldbook.build import BuildConfig, build_dataset
from worldsmith.worldbook.pipeline import StageProgress

root = data.workspace_root()
workspace = data.current_workspace()
st.title("Build a worldbook", anchor=False)

datasets = data.list_datasets(root)
if not datasets:
    st.info("No datasets yet: import trace files on the Traces page or collect episodes first.",
            icon=":material/info:")
    st.page_link(page_file("traces"), label="Import traces", icon=":material/upload_file:")
    st.page_link(page_file("collect"), label="Collect episodes", icon=":material/sports_esports:")
    st.stop()

# Outside the form: the Environment and Split choices below follow the chosen dataset at once.
dataset_name = st.selectbox("Dataset", datasets, key="build_dataset")
dataset = data.open_dataset(root, dataset_name)
splits = dataset.splits() if dataset is not None else []
environments = sorted({e.split("/")[0] for e in dataset.environments()}) if dataset is not None else []
if len(environments) > 1:
    st.warning(f"Dataset {md_escape(dataset_name)} mixes {len(environments)} environments "
               f"({md_escape(', '.join(environments))}): a worldbook describes one, choose it below.",
               icon=":material/warning:")

with st.form("build_form"):
    left, right = st.columns(2)
    env = left.selectbox("Environment", ["(all)", *environments], key="build_env",
                         help="a worldbook describes one environment: pick it in a mixed dataset")
    out = right.text_input("Worldbook name", value=(environments[0] if len(environments) == 1 else "worldbook"),
                           key="build_out")
    left, middle, right = st.columns(3)
    split = left.selectbox("Build from split", ["(all)", *splits], key="build_split")
    held = middle.selectbox("Validate on split", ["(default)", *splits], key="build_held",
                            help="default when building from a split: validation, else test")
    folds = right.number_input("Cross-fitting folds (0: none)", min_value=0, max_value=10, value=3, key="build_folds")
    left, right = st.columns([1, 2])
    route_folds = left.number_input("Route-table folds (0: none)", min_value=0, max_value=10, value=5,
                                    key="build_route_folds",
                                    help="cross-fitting folds that measure which answer source to trust per action")
    spec = st.text_input("Model for the rules and notes stages (optional)", key="build_llm",
                         placeholder="tiny:data_samples/models/tiny — empty: the deterministic builder only")
    submitted = st.form_submit_button("Build", icon=":material/construction:")

if submitted:
    bar = st.progress(0.0, text="starting")
    table = st.empty()
    finished: list[dict[str, object]] = []

    def show(event: StageProgress) -> None:
        if event.state == "finished":
            finished.append({"stage": event.stage, "seconds": event.seconds, "cached": event.cached})
            table.dataframe(pd.DataFrame(finished), hide_index=True)
        label = "done" if event.state == "done" else f"{event.stage} ({event.state})"
        bar.progress(event.fraction, text=md_escape(label))

    try:
        outcome = build_dataset(
            workspace, dataset_name, out=out.strip(), split=None if split == "(all)" else split,
            validate_split=None if held == "(default)" else held, env=None if env == "(all)" else env,
            folds=int(folds), config=BuildConfig(llm=spec.strip() or None), author="workbench", progress=show,
            stages=simulator_stages(int(route_folds)))
    except (ValueError, OSError) as error:
        bar.empty()
        table.empty()
        st.error(f"Build failed: {md_escape(error)}", icon=":material/error:")
    else:
        bar.progress(1.0, text="done")
        table.empty()  # the report below lists every stage's seconds
        st.session_state["build_last"] = outcome.to_json()

if st.session_state.get("build_last"):
    render_build_report(st.session_state["build_last"])
