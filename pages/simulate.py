"""Simulate: act in a worldbook's simulator, see each prediction's audit, fork a session, compare two.

The "Side by side" view steps several world models through a real episode beside its observations
(`workbench.simulate.side_by_side`, over `worldsmith.sim.sidebyside`).

Sessions live in `<workspace>/sessions/` (the same folders `worldsmith simulate` and `worldsmith
play` use), so a session started here can be continued from the command line and back. Every
step is one atomic commit; if someone else moved the session on meanwhile, the step is refused.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench.common import data
from workbench.common.page_state import PageState, record, restore
from workbench.common.text import md_code, md_escape
from workbench.simulate.side_by_side import AT, SIDE_BY_SIDE_STATE, apply_simulate_link, render_side_by_side
from workbench.simulate.simulator import compare_frame, render_turn, turns_frame
from workbench.simulate.uncertainty import (
    assess_step,
    candidates_frame,
    rank_candidates,
    recorded_admissible,
    render_uncertainty,
)
from worldsmith.llm import LLMError, default_model_spec, open_llm
from worldsmith.sim import (
    Session,
    SessionError,
    find_sessions,
    make_world_model,
    new_session_name,
    session_name,
    takes_llm,
    world_model_spec,
    world_models,
)
from worldsmith.workspace import EpisodeFilter, WorkspaceLayout
from worldsmith.worldbook import WorldbookError, WorldbookStore

NEW = "(new session)"
# The page's choices, kept across Back, reload and the sidebar (`workbench.common.page_state`).
SIMULATE_STATE = PageState({"sim_view": str, "sim_book": str, "sim_model": str, "sim_session": str,
                            "sim_ep_dataset": str, "sim_ep_episode": str, "sim_max_tokens": int})

root = Path(data.workspace_root())
store = WorldbookStore.of_workspace(root)
sessions_dir = WorkspaceLayout.of(root).sessions_dir
st.title("Simulate", anchor=False)
st.markdown("Play a worldbook as an environment. Each action is predicted by the chosen world model and committed "
            "to a session you can reopen, fork at any turn and compare with another.")

names = store.names()
if not names:
    st.info("No worldbooks in this workspace yet (`worldsmith build` makes one).", icon=":material/info:")
    st.stop()
for kept in (SIMULATE_STATE, SIDE_BY_SIDE_STATE):
    restore(kept)
apply_simulate_link(names)  # simulate?dataset=&episode=&turn=[&book=] opens the side-by-side view at that turn
for kept in (SIMULATE_STATE, SIDE_BY_SIDE_STATE):
    record(kept)
if st.radio("View", ["Sessions", "Side by side"], key="sim_view", horizontal=True,
            help="Side by side: world models stepped through a real episode beside its observations") == "Side by side":
    render_side_by_side(root, store)
    st.stop()
st.query_params.pop(AT, None)  # the side-by-side view's steps: not this view's


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def _llm(spec: str, workspace: str):
    return open_llm(spec, workspace, component="simulate")


def _create_session() -> None:
    state = st.session_state
    book_name = state["sim_book"]
    try:
        name = session_name(state.get("sim_new_name") or "")
        Session.create(sessions_dir / name, book_ref=f"{book_name}@{store.head(book_name)}",
                       model=state.get("sim_model"), initial_observation=state.get("sim_new_opening") or "",
                       task=(state.get("sim_new_task") or None)).close()
    except (SessionError, WorldbookError) as error:
        state["sim_error"] = md_escape(error)
        return
    state["sim_session"] = name
    state["sim_notice"] = f"Session {md_code(name)} created."


def _create_from_episode() -> None:
    """A new session opened as the chosen recorded episode (its initial observation, task and environment)."""
    state = st.session_state
    dataset_name, episode_id, book_name = state.get("sim_ep_dataset"), state.get("sim_ep_episode"), state["sim_book"]
    dataset = data.open_dataset(str(root), dataset_name)
    if dataset is None or not episode_id:
        state["sim_error"] = "Choose a dataset and one of its episodes first."
        return
    name = new_session_name(book_name)
    try:
        episode = dataset.episode(episode_id, with_state=False)
        Session.from_episode(sessions_dir / name, episode, book_ref=f"{book_name}@{store.head(book_name)}",
                             model=state.get("sim_model"), dataset=dataset_name).close()
    except KeyError:
        state["sim_error"] = f"Episode {md_code(episode_id)} is not in dataset {md_code(dataset_name)}."
        return
    except (SessionError, WorldbookError) as error:
        state["sim_error"] = md_escape(error)
        return
    state["sim_session"] = name
    state["sim_notice"] = (f"Session {md_code(name)} created, opening as episode {md_code(episode_id)} of "
                           f"{md_code(dataset_name)}.")


def _fork(directory: Path) -> None:
    state = st.session_state
    at_turn = int(state.get("sim_fork_at") or 0)
    try:
        with Session.open(directory) as session, session.fork(at_turn) as forked:
            name = forked.directory.name
    except SessionError as error:
        state["sim_error"] = md_escape(error)
        return
    state["sim_session"] = name
    state["sim_notice"] = f"Forked at turn {at_turn:d} into {md_code(name)}."


left, right = st.columns(2)
book_name = left.selectbox("Worldbook", names, key="sim_book")
kind = right.selectbox("World model", list(world_models()), key="sim_model",
                       format_func=lambda key: f"{key}: {world_model_spec(key).description}")
spec = None
if takes_llm(kind):
    spec_column, tokens_column = st.columns([3, 1])
    optional = world_model_spec(kind).llm == "optional"  # the harness answers without a model; one adds the agent route
    spec = spec_column.text_input("Model spec" + (" (optional: the agent route)" if optional else ""),
                                  value="" if optional else default_model_spec() or "", key=f"sim_llm_{optional}")
    tokens_column.number_input("Max tokens", min_value=1, max_value=4096, value=128, key="sim_max_tokens")

for key, show in (("sim_error", st.error), ("sim_notice", st.success)):
    if st.session_state.get(key):
        show(st.session_state.pop(key))

session_names = [p.name for p in find_sessions(sessions_dir)]
if st.session_state.get("sim_session") not in (NEW, *session_names):
    st.session_state["sim_session"] = NEW
chosen = st.selectbox("Session", [NEW, *session_names], key="sim_session")

if chosen == NEW:
    datasets = data.list_datasets(str(root))
    with st.expander("Start from a recorded episode", expanded=bool(datasets), icon=":material/history:"):
        if not datasets:
            st.caption("No datasets in this workspace: import traces on the Traces page.")
        else:
            left, right = st.columns(2)
            dataset_name = left.selectbox("Dataset", datasets, key="sim_ep_dataset")
            opened = data.open_dataset(str(root), dataset_name)
            episode_ids = ([str(e) for e in data.episode_page(str(root), dataset_name, opened.revision,
                                                               data.filter_key(EpisodeFilter()), 500, 0)["episode_id"]]
                           if opened is not None else [])
            right.selectbox("Episode", episode_ids, key="sim_ep_episode", index=None, placeholder="choose an episode")
            st.button("Start a session from its opening", key="sim_from_episode", on_click=_create_from_episode,
                      icon=":material/play_circle:", disabled=not st.session_state.get("sim_ep_episode"))
    with st.form("sim_new"):
        st.text_input("Name", value=new_session_name(book_name), key="sim_new_name")
        st.text_area("Opening observation", key="sim_new_opening", height=100)
        st.text_input("Task (optional)", key="sim_new_task")
        st.form_submit_button("Create session", on_click=_create_session)
    st.stop()

directory = sessions_dir / chosen
try:
    session = Session.open(directory)
except SessionError as error:
    st.error(md_escape(error), icon=":material/error:")
    st.stop()

meta = session.meta
stored_book, _, stored_version = (meta.get("book_ref") or f"{book_name}@").partition("@")
try:
    book = store.load(stored_book, stored_version or None)
except WorldbookError as error:
    session.close()
    st.error(f"This session's worldbook cannot be loaded: {md_escape(error)}", icon=":material/error:")
    st.stop()
if stored_book != book_name:
    st.info(f"This session simulates {md_code(meta.get('book_ref'))}, not the worldbook selected above.")
caption = st.empty()  # filled once this run's step (if any) is committed: it counts what the table shows
if meta.get("metadata", {}).get("from_episode"):
    source = meta["metadata"]["from_episode"]
    st.caption(f"Opens as episode {md_code(source.get('episode'))} of {md_code(source.get('dataset'))} "
               f"({md_escape(source.get('turns'))} recorded turns).")

with st.expander("Opening observation", expanded=len(session) == 0):
    st.code(meta.get("initial_observation") or "(none)", language=None, wrap_lines=True)
    if meta.get("task"):
        st.text(f"Task: {meta['task']}")

with st.form("sim_act", clear_on_submit=True):
    action = st.text_input("Action", key="sim_action", placeholder="a text command, or a JSON action object")
    step = st.form_submit_button("Step", icon=":material/play_arrow:")
if step and action.strip():
    try:
        llm = _llm(spec, str(root)) if spec and takes_llm(kind) else None
        options = {"max_tokens": int(st.session_state.get("sim_max_tokens", 128))} if llm is not None else {}
        model = make_world_model(kind, book, llm=llm, **options)
        unsure = assess_step(session, book, action.strip())  # the book's harness: no model call
        session.attach(model)
        turn = session.play(model, action.strip())
        st.session_state["sim_last"] = (chosen, turn.index)
        st.session_state["sim_unsure"] = (chosen, turn.index, unsure)
    except (SessionError, LLMError, ValueError) as error:
        st.error(md_escape(error), icon=":material/error:")

turns = session.turns()
caption.caption(f"{md_code(meta.get('book_ref'))} · {len(turns):d} turns · revision {session.revision:d}"
                + (f" · forked from {md_code(Path(meta['parent']).name)} at turn {md_escape(meta['forked_at'])}"
                   if meta.get("parent") else ""))
last = st.session_state.get("sim_last")
if turns:
    shown = last[1] if last and last[0] == chosen and last[1] < len(turns) else len(turns) - 1
    with st.container(border=True):
        render_turn(turns[shown])
        unsure_at = st.session_state.get("sim_unsure")
        if unsure_at and unsure_at[0] == chosen and unsure_at[1] == shown:
            built_from = next((s for s in store.info(stored_book, stored_version or store.head(stored_book)).sources
                               if isinstance(s, dict) and s.get("dataset")), {})
            render_uncertainty(unsure_at[2], dataset=built_from.get("dataset"), run=meta.get("book_ref"),
                               split=(built_from["split"] or "all") if "split" in built_from else None)
    st.dataframe(turns_frame(session), hide_index=True)
    if kind == "harness":
        with st.expander("What the harness tracks (place, map, entity records, shell)", icon=":material/map:"):
            tracker = make_world_model(kind, book)
            session.attach(tracker)
            st.json(tracker.tracked(), expanded=True)

with st.expander("Rank candidate actions by how unsure the book is", icon=":material/explore:"):
    st.caption("Each candidate is assessed at the end of this session by the book's harness (nothing is played): "
               "what would answer it, the evidence behind that, and whether the book ever saw the action (type, "
               "and in this situation). The most informative first.")
    if meta.get("metadata", {}).get("from_episode") and st.button(
            "Use the recorded episode's admissible actions", key="sim_use_admissible"):
        listed = recorded_admissible(str(root), session)
        st.session_state["sim_candidates"] = "\n".join(listed)
        if not listed:
            st.caption("The recorded episode lists no admissible actions at this turn.")
    typed = st.text_area("Candidate actions (one a line)", key="sim_candidates", height=120)
    if st.button("Rank", key="sim_rank", icon=":material/sort:"):
        if typed.strip():
            st.dataframe(candidates_frame(rank_candidates(session, book, typed.splitlines())), hide_index=True,
                         key="sim_ranked")
        else:
            st.caption("Type a candidate action first (one a line).")

history_tab, compare_tab = st.tabs(["Fork", "Compare"])
with history_tab:
    st.number_input("Keep the first N turns", min_value=0, max_value=len(turns), value=len(turns), key="sim_fork_at")
    st.button("Fork into a new session", key="sim_fork", on_click=_fork, args=(directory,),
              icon=":material/fork_right:")
    st.json(session.state, expanded=False)
with compare_tab:
    others = [name for name in session_names if name != chosen]
    other_name = st.selectbox("Compare with", others, index=None, key="sim_compare", placeholder="another session")
    if other_name:
        with Session.open(sessions_dir / other_name) as other:
            rows = session.compare(other)
        differing = next((row["turn"] for row in rows if not (row["same_action"] and row["same_observation"])), None)
        st.caption("identical" if differing is None else f"first difference at turn {differing:d}")
        st.dataframe(compare_frame(rows), hide_index=True)
session.close()
