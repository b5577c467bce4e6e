"""Worldbook: read the rules a simulator runs on, follow their evidence, edit them, go back.

Every change (a rule's fields, conditions and effects, its status, a new rule, a note, a tool rule's status,
template or field changes) is one
patch on the version shown, saved as a new immutable version with its parent recorded; if
someone else changed the same rule or note meanwhile, the change is refused and the page says
so. Provenance and counterexample links open the exact turns in Traces; a rule can be replayed
on the worldbook's evidence to see where it matches and where it fails.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.common import data
from workbench.common.page_state import PageState, keep
from workbench.common.text import md_code, md_escape
from workbench.worldbook.heldout_panel import HELDOUT_STATE, render_heldout_chooser, render_heldout_delta
from workbench.worldbook.notes_editor import render_add_note_form, render_notes
from workbench.worldbook.route_table import render_route_table
from workbench.worldbook.rule_card import render_rule_evidence, render_rule_header
from workbench.worldbook.rule_editor import render_add_rule_form, render_rule_editor
from workbench.worldbook.rule_guard import guarded_submit, render_pending_save
from workbench.worldbook.rule_proposals import render_rule_proposals
from workbench.worldbook.rule_replay import render_rule_replay
from workbench.worldbook.rule_table import (
    RULE_KEY,
    render_rule_filters,
    render_rule_table,
    select_rules,
)
from workbench.worldbook.schema_browser import render_schema_browser
from workbench.worldbook.serve_panel import render_serve_panel
from workbench.worldbook.state import (
    notice,
    show_version,
    shown_version,
    take_notices,
)
from workbench.worldbook.tool_rules import render_tool_rules
from workbench.worldbook.tools import render_package, render_search
from workbench.worldbook.url import TOOL_RULE_KEYS, remember_place, restore_place
from workbench.worldbook.version_compare import render_version_compare
from worldsmith.worldbook import PatchOp, RuleStatus, WorldbookError, WorldbookStore

root = Path(data.workspace_root())
store = WorldbookStore.of_workspace(root)
TAB_KEY = "wb_tab"  # the open tab
st.title("Worldbook", anchor=False)

names = store.names()
if not names:
    st.info("No worldbooks in this workspace yet (`worldsmith build` makes one).", icon=":material/info:")
    st.stop()
restore_place(names)  # Back from a Traces link lands on an entry without the page's parameters
keep(HELDOUT_STATE)  # the held-out set and the open tab survive Back, a reload and the sidebar
keep(PageState({TAB_KEY: str}))
# A link such as worldbook?book=alfworld&rule=take.r1 opens that rule; once followed, its parameters give way to the
# page's own (wb_name, wb_rule: bound to the URL), so the history entry says the book shown and Back returns to it,
# and following the same link again later opens it again.
linked = (st.query_params.get("book"), st.query_params.get("rule"))
if linked[0] is None:
    st.session_state.pop("wb_linked", None)
follow_link = linked[0] in names and st.session_state.get("wb_linked") != linked
if follow_link:
    st.session_state["wb_linked"] = linked
    st.session_state["wb_name"] = linked[0]
name = st.selectbox("Worldbook", names, key="wb_name", bind="query-params")  # in the URL: Back returns here
head = store.head(name)
version = shown_version(store, name)
try:
    book = store.load(name, version)
except WorldbookError as error:
    st.error(md_escape(error), icon=":material/error:")
    st.stop()
if follow_link and linked[1] and any(rule.id == linked[1] for rule in book.rules):
    st.session_state["wb_rule"] = linked[1]
if follow_link:
    for key in ("book", "rule"):  # the bound widgets carry them from here on
        if key in st.query_params:
            del st.query_params[key]
info = store.info(name, version)
source_dataset = next((s.get("dataset") for s in info.sources if isinstance(s, dict) and s.get("dataset")), None)
st.caption(f"{md_code(name)} · version {md_code(version)} (parent {md_code(info.parent)}) · "
           f"{md_code(info.author)}: {md_code(info.message or 'no message')}")

notices = take_notices()  # an edit was just saved: its held-out delta is brought into view below
for message in notices:
    st.success(message, icon=":material/check_circle:")
if version != head:
    st.warning(f"This worldbook changed since you opened it: the current version is {md_code(head)}. Edits here "
               "are made against the version shown; one that touches a rule or note changed since is refused.",
               icon=":material/sync_problem:")
    st.button("Show the current version", key="wb_show_head", on_click=show_version, args=(name, head))

with st.container(border=True):  # the loop: every edit's held-out delta, on the set chosen once
    workspace = data.get_workspace(str(root))
    source_env = next((s.get("env") for s in info.sources if isinstance(s, dict) and s.get("env")), None)
    heldout = render_heldout_chooser(workspace, book, source_dataset, source_env)
    if heldout is not None:
        render_heldout_delta(store, workspace, name, version, info.parent, heldout, scroll_into_view=bool(notices))

render_serve_panel(book, name, version if version != head else None, root)

if follow_link and linked[1]:
    st.session_state[TAB_KEY] = "Rules"  # a rule's link lands on its rule, whichever tab was open
elif TAB_KEY not in st.session_state and any(key in st.query_params for key in TOOL_RULE_KEYS):
    st.session_state[TAB_KEY] = "Tool rules"  # a new session on a tool rule's URL (a shared link, a refresh)
# Only the open tab is drawn (a rerun on switching; benchmarks/page_load.py): drawing all eight cost the browser
# most of a second per load, for tabs nobody looks at. Tracked, so a saved edit (a rerun with a notice above) stays
# on its tab.
rules_tab, tool_rules_tab, routes_tab, schema_tab, notes_tab, search_tab, history_tab, package_tab = st.tabs(
    ["Rules", "Tool rules", "Routes", "Schemas", "Notes", "Search", "History", "Export / import"],
    key=TAB_KEY, on_change="rerun")

if rules_tab.open:
    with rules_tab:
        rules = select_rules(book.rules, render_rule_filters(book.rules))
        st.caption(f"{len(rules)} of {len(book.rules)} rules")
        if rules:
            st.caption("Click a row to open its rule.")
            render_rule_table(rules)
        chosen = st.selectbox("Open a rule", [r.id for r in rules], index=None, key=RULE_KEY,
                              placeholder="choose a rule", bind="query-params")
        if chosen:
            rule = book.rule(chosen)
            with st.container(border=True):
                render_rule_header(rule)
                st.markdown("**Change the status** (makes a new version)")
                reason = st.text_input("Why (kept in the version's message; required)",
                                       key=f"wb_status_reason:{rule.id}")
                for column, status in zip(st.columns(len(RuleStatus)), RuleStatus, strict=True):
                    if column.button(md_escape(status.value), key=f"wb_set_{status.value}",
                                     disabled=status == rule.status or not reason.strip()):
                        guarded_submit(store, name, version, book,
                                       [PatchOp(op="update_rule", id=rule.id, fields={"status": status.value})],
                                       message=f"{rule.id}: {status.value}: {reason.strip()}",
                                       done=f"{md_code(rule.id)} is now {md_escape(status.value)}")
                render_rule_evidence(rule, source_dataset)
                render_rule_replay(book, version, rule, source_dataset)
                if book.evidence:
                    split = heldout.split if heldout and heldout.dataset == source_dataset else None
                    render_rule_proposals(root, store, name, version, rule.id, split=split)
                st.divider()
                render_rule_editor(store, name, version, rule, book)
                render_pending_save(store, name, version, source_dataset)
        with st.expander("Add a rule", icon=":material/add:"):
            render_add_rule_form(store, name, version, book)

if tool_rules_tab.open:
    with tool_rules_tab:  # what tool-API calls do to the records they select (writes, queries, preconditions)
        render_tool_rules(store, name, version, book, source_dataset)

if routes_tab.open:
    with routes_tab:
        built_from = next((s for s in info.sources if isinstance(s, dict) and s.get("dataset")), {})
        render_route_table(book, dataset=source_dataset, run=f"{name}@{version}",
                           split=(built_from["split"] or "all") if "split" in built_from else None)

if schema_tab.open:
    with schema_tab:
        render_schema_browser(book)

if notes_tab.open:
    with notes_tab:
        render_notes(store, name, version, book, source_dataset)
        render_add_note_form(store, name, version, book)

if search_tab.open:
    with search_tab:
        render_search(store, name, version, book, source_dataset)

if package_tab.open:
    with package_tab:
        render_package(store, name, version)

if history_tab.open:
    with history_tab:
        chain = store.history(name)
        st.dataframe(pd.DataFrame([{"version": v.version, "parent": v.parent, "created": v.created,
                                    "author": v.author, "message": v.message} for v in chain]), hide_index=True)
        if len(chain) > 1:
            render_version_compare(store, name, [v.version for v in chain], version, info.parent)
        if info.parent is not None:
            if version == head and st.button("Undo this version", icon=":material/undo:", key="wb_undo"):
                undone = store.undo(name, author="workbench")
                show_version(name, undone.version)
                notice(f"Back to the content of {md_code(info.parent)}: version {md_code(undone.version)}")
                st.rerun()

remember_place()  # after every tab: a tab not drawn keeps its widgets' values in the session
