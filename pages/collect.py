"""Collect: play a policy in a real environment and store the episodes as a dataset.

The same library call as `worldsmith collect` (worldsmith.envs.collect.collect): resumable,
parallel, with per-episode timeouts; the new dataset appears in Traces. The Explore mode is
`worldsmith explore` (worldsmith.evals.explore): rounds of real steps, the book rebuilt and scored on a
held-out set between them (`workbench.collect.explore`).
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from workbench.collect.envs import render_env_picker, render_mcp_server, render_task_picker
from workbench.collect.explore import render_explore
from workbench.common import data
from workbench.common.jobs import remaining_s, seconds_text
from workbench.common.page_state import PageState, keep
from workbench.common.paths import page_file
from workbench.common.ray_option import render_ray_option
from workbench.common.text import md_code, md_escape
from worldsmith.envs import POLICIES, EnvError, spec
from worldsmith.envs import collect as collection
from worldsmith.llm import default_model_spec
from worldsmith.workspace import validate_dataset_name

root = data.workspace_root()
# The settings, kept across Back, reload and the sidebar (`workbench.common.page_state`).
keep(PageState({"co_mode": str, "co_policy": str, "co_episodes": int, "co_seed": int, "co_max_steps": int,
                "co_workers": int, "co_timeout": int, "co_keep": str, "co_model": str, "co_dataset": str,
                "co_ex_book": str, "co_ex_budget": int, "co_ex_rounds": int, "co_ex_strategy": str,
                "co_ex_seed": int, "co_ex_heldout": str, "co_ex_split": str, "co_ex_dataset": str}))
workspace = data.get_workspace(root)
st.title("Collect", anchor=False)
st.markdown("Play a policy in a real environment; every episode records its reward and whether it succeeded. "
            "Episodes finished by an earlier run into the same dataset are not redone.")

env = render_env_picker("co_env")
if env is None:
    st.stop()
env_kwargs = render_mcp_server("co") if env == "mcp" else {}  # the MCP server `mcp` is
if env_kwargs is None:
    st.stop()
tasks = render_task_picker(env, "co_tasks", multiple=True, env_kwargs=env_kwargs)
mode = st.radio("Mode", ["Collect", "Explore"], horizontal=True, key="co_mode",
                help="Collect: play a policy over the tasks. Explore: spend a budget of real steps in rounds, "
                     "rebuilding the book after each and scoring it on a held-out set.")
if mode == "Explore":
    render_explore(workspace, env, tasks, env_kwargs)
    st.stop()
left, middle, right = st.columns(3)
policy = left.selectbox("Policy", [p for p in POLICIES if p != "replay"], key="co_policy")
episodes = middle.number_input("Episodes (0 = one per task)", min_value=0, value=min(3, max(1, len(tasks) or 3)),
                               key="co_episodes")
seed = right.number_input("Seed", min_value=0, value=0, key="co_seed")
left, middle, right = st.columns(3)
max_steps = left.number_input("Step cap", min_value=1, value=spec(env).max_steps, key="co_max_steps")
workers = middle.number_input("Parallel workers", min_value=1, max_value=8, value=1, key="co_workers")
timeout = right.number_input("Timeout per episode (s)", min_value=5, value=600, key="co_timeout")
keep = st.radio("Store", ["success", "all"], index=0 if policy == "expert" else 1, horizontal=True, key="co_keep",
                format_func={"success": "successful episodes only", "all": "every episode"}.__getitem__)
model = None
if policy == "llm":
    model = st.text_input("Model spec", value=default_model_spec() or "", key="co_model",
                          help="tiny:PATH, hf:PATH, vllm:PATH or openai:MODEL@URL; calls are cached and logged (Models page)")
policy_options: dict[str, float | int] = {}
if policy == "curious":
    with st.expander("Curious policy: how it mixes its moves", icon=":material/explore:"):
        st.caption("Weights of the expert's action, a random admissible one, a revisit (a place or a read seen "
                   "before), a read after a write, and an invalid action; at least this many steps per episode.")
        columns = st.columns(6)
        for column, (option, default) in zip(columns, (("expert", 0.4), ("random", 0.2), ("revisit", 0.2),
                                                       ("read_after_write", 0.1), ("invalid", 0.1)), strict=False):
            policy_options[option] = column.number_input(md_escape(option.replace("_", " ")), min_value=0.0,
                                                         value=default, step=0.05, key=f"co_curious_{option}")
        policy_options["min_steps"] = int(columns[5].number_input("min steps", min_value=0, value=10,
                                                                 key="co_curious_min_steps"))
ray_address = render_ray_option("co_ray")
dataset = st.text_input("Dataset", value=f"{env}-{policy}", key="co_dataset")

if st.button("Collect", type="primary", icon=":material/play_arrow:", key="co_run"):
    try:
        validate_dataset_name(dataset)
    except ValueError as error:
        st.error(md_escape(error))
        st.stop()
    config = collection.CollectConfig(env=env, tasks=tasks or None, policy=policy, episodes=int(episodes) or None,
                           seed=int(seed), max_steps=int(max_steps), workers=int(workers), ray_address=ray_address,
                           episode_timeout=float(timeout), keep=keep, model=model or None,
                           policy_options=policy_options, env_kwargs=env_kwargs)
    bar = st.progress(0.0, text="Starting the environment…")
    log = st.empty()
    rows: list[dict] = []
    started = time.time()

    def show(progress: collection.CollectProgress) -> None:
        fraction = progress.done / progress.total if progress.total else 1.0
        left = remaining_s(started, progress.done, progress.total)
        bar.progress(fraction, text=f"{progress.done:d}/{progress.total:d} episodes"
                     + (f" · about {seconds_text(left)} left" if left is not None and fraction < 1 else ""))
        if progress.result is not None:
            r = progress.result
            rows.append({"task": r.task, "status": r.status, "success": r.success, "steps": r.steps,
                         "reward": r.reward, "error": r.error})
            log.dataframe(pd.DataFrame(rows), hide_index=True, use_container_width=True)

    try:
        report = collection.collect(workspace, dataset, config, progress=show)
    except (EnvError, ValueError, OSError, RuntimeError) as error:  # ConnectionError: no Ray at the address
        st.error(f"Collection failed: {md_escape(error)}", icon=":material/error:")
        st.stop()
    st.session_state["co_last"] = report.summary()

summary = st.session_state.get("co_last")
if summary:
    rate = "n/a" if summary["win_rate"] is None else f"{summary['win_rate']:.0%}"
    st.success(f"{md_code(summary['env'])} → dataset {md_code(summary['dataset'])}: {md_escape(summary['wins'])} "
               f"won of {md_escape(summary['work_items'])} (win rate {rate}); "
               f"{md_escape(summary['ingested'])} episodes stored, {md_escape(summary['duplicates'])} already there, "
               f"{md_escape(summary['skipped_already_done'])} done by an earlier run.",
               icon=":material/check_circle:")
    if summary["failures"]:
        st.dataframe(pd.DataFrame(summary["failures"])[["task", "status", "steps", "error"]], hide_index=True,
                     use_container_width=True)
    if summary["ingested"] or summary["duplicates"]:
        st.page_link(page_file("traces"), label=f"Open {md_code(summary['dataset'])} in Traces",
                     icon=":material/timeline:", query_params={"dataset": summary["dataset"]})
