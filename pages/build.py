"""Build: make a worldbook from a dataset's trajectories, validated on held-out ones, saved as a new version.

The deterministic builder runs by default (seconds); a model spec runs the rules and notes stages on
a model too (every call cached and logged), and the report compares the two implementations. The stages are the
simulator's pipeline (`sim.simulator_stages`: the book's stages and the route table). The build runs as a
background job (`worldsmith build --progress`, `workbench.worldbook.build_jobs`): leave the page and come back, its
progress across the folds and the final build, with an estimate of the time left, is still here.
"""

from __future__ import annotations

import streamlit as st

from workbench.common import data
from workbench.common.leakage import build_split
from workbench.common.page_state import PageState, keep
from workbench.common.paths import page_file
from workbench.common.text import md_escape
from workbench.worldbook.build_jobs import render_build_jobs, start_build
from worldsmith.sim import ROUTE_TURNS
from worldsmith.util import InvalidName, check_name
from worldsmith.workspace import env_family
from worldsmith.worldbook import build_jobs


def _name_problem(name: str) -> str | None:
    """Why the worldbook name typed cannot be built (None: it can), said before Build is pressed."""
    try:
        check_name(name.strip(), "worldbook")
    except InvalidName as error:
        return str(error)
    return None


root = data.workspace_root()
# The form's settings, kept across Back, reload and the sidebar (`workbench.common.page_state`).
keep(PageState({"build_dataset": str, "build_env": str, "build_out": str, "build_split": str, "build_held": str,
                "build_folds": int, "build_route_folds": int, "build_route_turns": int, "build_llm": str}))
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
environments = sorted({env_family(e) for e in dataset.environments()}) if dataset is not None else []
if len(environments) > 1:
    st.warning(f"Dataset {md_escape(dataset_name)} mixes {len(environments)} environments "
               f"({md_escape(', '.join(environments))}): a worldbook describes one, choose it below.",
               icon=":material/warning:")

# The name follows the dataset's environment until someone types another one (then it is theirs to keep).
default_name = environments[0] if len(environments) == 1 else "worldbook"
previous_default = st.session_state.get("build_out_default")
if previous_default != default_name:
    if st.session_state.get("build_out") in (None, "", previous_default):
        st.session_state["build_out"] = default_name
    st.session_state["build_out_default"] = default_name

with st.container(border=True):  # not a form: each change is kept (and checked) at once, before Build
    left, right = st.columns(2)
    env = left.selectbox("Environment", ["(all)", *environments], key="build_env",
                         help="a worldbook describes one environment: pick it in a mixed dataset")
    out = right.text_input("Worldbook name", key="build_out")
    left, middle, right = st.columns(3)
    split_options = ["(all)", *splits]  # the train split by default: the others stay held out (a choice, not a rule)
    split = left.selectbox("Build from split", split_options, index=split_options.index(build_split(splits) or "(all)"),
                           key="build_split")
    held = middle.selectbox("Validate on split", ["(default)", *splits], key="build_held",
                            help="default when building from a split: validation, else test")
    folds = right.number_input("Cross-fitting folds (0: none)", min_value=0, max_value=10, value=3, key="build_folds")
    left, middle, _ = st.columns(3)
    route_folds = left.number_input("Route-table folds (0: none)", min_value=0, max_value=10, value=5,
                                    key="build_route_folds",
                                    help="cross-fitting folds that measure which answer source to trust per action")
    route_turns = middle.number_input("Route-table turns (0: all)", min_value=0, value=ROUTE_TURNS, step=1000,
                                      key="build_route_turns",
                                      help="the most held-out turns the route table is measured on: past 3,000 "
                                           "construction turns a sample of 40% of them (within this cap) is held out "
                                           "by trajectory family, so the stage stops growing with the data")
    spec = st.text_input("Model for the rules and notes stages (optional)", key="build_llm",
                         placeholder="tiny:data_samples/models/tiny — empty: the deterministic builder only")
    problem = _name_problem(out)
    if problem:
        st.error(md_escape(problem), icon=":material/error:")
    submitted = st.button("Build", icon=":material/construction:", key="build_run", disabled=bool(problem))

if submitted:
    start_build(root, build_jobs.BuildLaunch(
        out=out.strip(), dataset=dataset_name, split=None if split == "(all)" else split,
        validate_split=None if held == "(default)" else held, env=None if env == "(all)" else env,
        folds=int(folds), route_folds=int(route_folds), route_turns=int(route_turns), llm=spec.strip() or None,
        author="workbench"))

render_build_jobs(root)
