"""Traces: import trace files, browse datasets and episodes, read an episode turn by turn.

Deep links: ?dataset=<name>&turn=<episode_id>%23<index> (or &episode=<id>); build them with
workbench.common.links.turn_link.
"""

from __future__ import annotations

import streamlit as st

from workbench.common import data, state
from workbench.common.page_state import keep
from workbench.common.text import md_code
from workbench.traces.dataset_tools import render_export_form, render_relabel_form, render_split_form
from workbench.traces.datasets import find_turn_dataset, render_dataset_picker
from workbench.traces.episodes import render_episode_picker, render_episode_table, render_filters
from workbench.traces.import_report import render_import_history
from workbench.traces.importer import render_import_form
from workbench.traces.timeline import render_episode_header, render_timeline
from workbench.traces.turn_search import render_turn_search

root = data.workspace_root()
workspace = data.get_workspace(root)
state.init_state()
keep(state.FILTER_STATE)
datasets = data.list_datasets(root)
state.apply_query_params(datasets, find_turn=lambda turn: find_turn_dataset(root, datasets, turn))
if state.current_dataset() not in datasets:
    state.select_dataset(datasets[0] if datasets else None)

st.title("Traces", anchor=False)
for message in state.take_notices():
    st.warning(message, icon=":material/link_off:")

with st.expander("Import traces", expanded=not datasets or bool(st.session_state.get(state.LAST_REPORT)),
                 icon=":material/upload_file:"):
    render_import_form(workspace, root=root)

if not datasets:
    st.info("No datasets yet: drop trace files into the import box above.", icon=":material/info:")
    state.sync_query_params()
    st.stop()

dataset = render_dataset_picker(root, datasets)
if dataset is None:
    state.sync_query_params()
    st.stop()
name, revision = dataset.name, dataset.revision

with st.expander("Import history of this dataset", icon=":material/history:"):
    render_import_history(data.dataset_reports(root, name, revision), root=root, key="tr_history")

environments, splits = data.dataset_facets(root, name, revision)
with st.expander("Splits, environment and export", icon=":material/call_split:"):
    split_tab, env_tab, export_tab = st.tabs(["Assign splits", "Relabel environment", "Export"])
    with split_tab:
        render_split_form(workspace, name)
    with env_tab:
        render_relabel_form(workspace, name, environments, data.book_environments(root))
    with export_tab:
        render_export_form(workspace, name, splits)

with st.expander("Search all turns", icon=":material/manage_search:",
                 expanded=bool(st.session_state.get("tr_turn_fts"))):
    render_turn_search(root, name, revision)

st.subheader("Episodes", anchor=False)
where = render_filters(environments, splits)
page_ids = render_episode_table(root, name, revision, where)

st.divider()
render_episode_picker(page_ids)
episode_id = state.current_episode()
if episode_id:
    header = data.episode_header(root, name, revision, episode_id)
    if header is None:
        st.warning(f"Episode {md_code(episode_id)} is not in dataset {md_code(name)}.", icon=":material/search_off:")
    else:
        episode, n_turns = header
        render_episode_header(episode, n_turns, root=root)
        render_timeline(root, name, revision, episode, n_turns)

state.sync_query_params()
