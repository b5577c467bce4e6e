"""Play: type actions into a real environment and see what it answers.

The session is recorded by the same `EpisodeRecorder` that `worldsmith collect` uses, so it
can be saved as an episode (policy `human`) and later compared with a simulator turn by turn.
One live environment per browser session; it is closed when a new one starts.
"""

from __future__ import annotations

import streamlit as st

from workbench.collect.envs import render_env_picker, render_mcp_server, render_task_picker, render_transcript
from workbench.common import data
from workbench.common.paths import page_file
from workbench.common.text import md_code, md_escape
from worldsmith.envs import EnvError, EpisodeRecorder, make
from worldsmith.workspace import validate_dataset_name

SESSION = "pl_session"  # {"recorder": EpisodeRecorder, "steps": [...]}

root = data.workspace_root()
workspace = data.get_workspace(root)
st.title("Play", anchor=False)
st.markdown("Act in a real environment yourself. Save the session as an episode to compare it with a simulator later.")


def _close_session() -> None:
    session = st.session_state.pop(SESSION, None)
    if session is not None:
        session["recorder"].env.close()


with st.container(border=True):
    env_name = render_env_picker("pl_env")
    if env_name is None:
        st.stop()
    env_kwargs = render_mcp_server("pl") if env_name == "mcp" else {}  # the MCP server `mcp` is
    if env_kwargs is None:
        st.stop()
    chosen = render_task_picker(env_name, "pl_task", multiple=False, env_kwargs=env_kwargs)
    if st.button("Start", type="primary", icon=":material/play_arrow:", disabled=not chosen, key="pl_start"):
        _close_session()
        try:
            env = make(env_name, **env_kwargs)
            recorder = EpisodeRecorder(env, chosen[0], policy="human", seed=0, env_kwargs=env_kwargs,
                                       episode_id=f"{env_name}-{chosen[0]}-human-{st.session_state.get('pl_n', 0)}")
        except (EnvError, OSError, ValueError) as error:
            st.error(f"Could not start {md_code(chosen[0])}: {md_escape(error)}", icon=":material/error:")
            st.stop()
        st.session_state["pl_n"] = st.session_state.get("pl_n", 0) + 1
        st.session_state[SESSION] = {"recorder": recorder, "steps": []}

session = st.session_state.get(SESSION)
if session is None:
    st.info("Choose an environment and a task, then Start.", icon=":material/info:")
    st.stop()

recorder: EpisodeRecorder = session["recorder"]
st.subheader(f"{md_escape(recorder.env.name)} · {md_escape(recorder.task)}", anchor=False)
if recorder.initial_info.get("task"):
    st.markdown(f"**Task:** {md_escape(recorder.initial_info['task'])}")


def _act(text: str) -> None:
    try:
        result = recorder.step(text)
    except (EnvError, ValueError) as error:
        recorder.fail(error)
        st.session_state["pl_error"] = md_escape(error)
        return
    session["steps"].append({"action": text, "observation": result.observation.text, "reward": result.reward,
                             "done": result.terminated or result.truncated, "won": result.info.get("won")})


admissible = None if recorder.finished else recorder.env.admissible_actions()
if not recorder.finished:
    with st.form("pl_action", clear_on_submit=True, border=False):
        typed = st.text_input("Action", key="pl_typed", placeholder="type a command, e.g. look")
        submitted = st.form_submit_button("Send", icon=":material/send:")
    if submitted and typed.strip():
        _act(typed.strip())
        st.rerun()  # redraw the choices for the new state
    if admissible:
        picked = st.selectbox(f"…or one of {len(admissible)} admissible actions", admissible, index=None,
                              key=f"pl_pick_{recorder.steps}")
        if picked:
            _act(picked)
            st.rerun()
    if st.button("Show the expert's next action", key="pl_hint"):
        try:
            hint = recorder.env.expert_action()
            st.info(f"Expert: {md_code(hint.raw or hint.name if hint else 'nothing left to do')}",
                    icon=":material/lightbulb:")
        except NotImplementedError:
            st.info("This environment has no expert.", icon=":material/lightbulb:")

if "pl_error" in st.session_state:
    st.error(f"The environment failed: {st.session_state.pop('pl_error')}", icon=":material/error:")
render_transcript(recorder.initial_observation.text, session["steps"])
if recorder.finished:
    won = recorder.last_info.get("won")
    st.success("Episode over" + ("" if won is None else (": won" if won else ": not won")), icon=":material/flag:")

st.divider()
left, right = st.columns([3, 1])
target = left.text_input("Save to dataset", value="play", key="pl_dataset")
if right.button("Save episode", disabled=recorder.steps == 0, icon=":material/save:", key="pl_save"):
    try:
        validate_dataset_name(target)
        report = workspace.add_episodes(target, [recorder.episode(source="workbench play")], label="play")
    except (ValueError, OSError) as error:
        st.error(md_escape(error))
    else:
        st.success(f"Saved {md_code(recorder.episode_id)} to {md_code(target)} "
                   f"({md_escape(report.duplicates)} duplicates).")
        st.page_link(page_file("traces"), label=f"Open {md_code(target)} in Traces", icon=":material/timeline:",
                     query_params={"dataset": target})
