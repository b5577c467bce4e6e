"""Worldbook: read the rules a simulator runs on, follow their evidence, change their status, go back.

Every change is a patch on the version shown (a new immutable version, parent recorded); if
someone else changed the same rule meanwhile, the change is refused and the page says so.
Provenance links open the exact supporting and contradicting turns in Traces.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402
from workbench.components import data  # noqa: E402
from workbench.components.links import turn_query  # noqa: E402
from workbench.components.paths import page_file  # noqa: E402

from worldsmith.worldbook import (  # noqa: E402
    Patch,
    PatchOp,
    RuleStatus,
    WorldbookError,
    WorldbookStore,
    diff_worldbooks,
)

root = Path(data.workspace_root())
store = WorldbookStore(root / "worldbooks")
st.title("Worldbook", anchor=False)

names = store.names()
if not names:
    st.info("No worldbooks in this workspace yet (`worldsmith build` makes one).", icon=":material/info:")
    st.stop()
name = st.selectbox("Worldbook", names, key="wb_name")
head = store.head(name)
try:
    book = store.load(name, head)
except WorldbookError as error:
    st.error(str(error), icon=":material/error:")
    st.stop()
info = store.info(name, head)
source_dataset = next((s.get("dataset") for s in info.sources if isinstance(s, dict) and s.get("dataset")), None)
st.caption(f"`{name}` · version `{head}` (parent `{info.parent}`) · {info.author}: {info.message or 'no message'}")

for message in st.session_state.pop("wb_notices", []):
    st.success(message, icon=":material/check_circle:")

rules_tab, schema_tab, notes_tab, history_tab = st.tabs(["Rules", "Schemas", "Notes", "History"])

with rules_tab:
    left, middle, right = st.columns(3)
    statuses = left.multiselect("Status", [s.value for s in RuleStatus], key="wb_f_status")
    actions = middle.multiselect("Action", sorted({r.action for r in book.rules}), key="wb_f_action")
    search = right.text_input("Search (id, template, description)", key="wb_f_search").strip().lower()
    rules = [r for r in book.rules
             if (not statuses or r.status.value in statuses) and (not actions or r.action in actions)
             and (not search or search in f"{r.id} {r.template} {r.description}".lower())]
    rules.sort(key=lambda r: (-r.support, r.id))
    table = pd.DataFrame([{"id": r.id, "action": r.action, "status": r.status.value, "outcome": r.outcome,
                           "support": r.support, "confidence": r.confidence,
                           "contradicting": len(r.provenance.contradicting), "template": r.template[:120]}
                          for r in rules])
    st.caption(f"{len(rules)} of {len(book.rules)} rules")
    if not table.empty:
        st.dataframe(table, hide_index=True, use_container_width=True)
    chosen = st.selectbox("Open a rule", [r.id for r in rules], index=None, key="wb_rule",
                          placeholder="choose a rule")
    if chosen:
        rule = book.rule(chosen)
        with st.container(border=True):
            st.subheader(rule.id, anchor=False)
            st.markdown(f"**Action** `{rule.action}` · **outcome** `{rule.outcome}` · **status** `{rule.status.value}` · "
                        f"support {rule.support} · confidence {rule.confidence:.2f}")
            if rule.description:
                st.markdown(rule.description)
            st.markdown("**Conditions**")
            st.code("\n".join(f"{c.path or 'arg.' + str(c.arg)} {c.op} {c.value!r}" for c in rule.conditions)
                    or "(always)", language=None)
            st.markdown("**Effects**")
            st.code("\n".join(f"{e.op} {e.path} {e.value!r}" for e in rule.effects) or "(none)", language=None)
            st.markdown("**Observation template**")
            st.code(rule.template or "(empty)", language=None, wrap_lines=True)
            for label, turns in (("Supporting turns", rule.provenance.supporting),
                                 ("Contradicting turns", rule.provenance.contradicting + rule.counterexamples)):
                st.markdown(f"**{label}** ({len(turns)})")
                for turn in list(dict.fromkeys(turns))[:20]:
                    st.page_link(page_file("traces"), label=turn, icon=":material/link:",
                                 query_params=turn_query(source_dataset, turn))
            st.markdown("**Change the status** (makes a new version)")
            buttons = st.columns(len(RuleStatus))
            for column, status in zip(buttons, RuleStatus, strict=True):
                if column.button(status.value, key=f"wb_set_{status.value}", disabled=status == rule.status):
                    patch = Patch(base=head, author="workbench", message=f"{rule.id}: {status.value}",
                                  ops=[PatchOp(op="update_rule", id=rule.id, fields={"status": status.value})])
                    try:
                        new = store.patch(name, patch)
                    except WorldbookError as error:
                        st.error(str(error), icon=":material/error:")
                    else:
                        st.session_state["wb_notices"] = [f"`{rule.id}` is now {status.value}: version `{new.version}`"]
                        st.rerun()

with schema_tab:
    st.markdown("**Actions**")
    st.dataframe(pd.DataFrame([{"name": a.name, "aliases": ", ".join(a.aliases),
                                "arguments": ", ".join(f"{x.name}:{x.type}{'' if x.required else '?'}" for x in a.arguments),
                                "pattern": a.pattern} for a in book.action_schema.actions]),
                 hide_index=True, use_container_width=True)
    st.markdown("**State paths**")
    st.dataframe(pd.DataFrame([p.model_dump() for p in book.state_schema.paths]), hide_index=True,
                 use_container_width=True)

with notes_tab:
    for note in book.notes:
        st.markdown(f"- **{note.kind}** · {note.text}  \n  <small>{note.id} · {', '.join(note.provenance)}</small>",
                    unsafe_allow_html=False)
    if not book.notes:
        st.caption("No notes.")

with history_tab:
    chain = store.history(name)
    st.dataframe(pd.DataFrame([{"version": v.version, "parent": v.parent, "created": v.created, "author": v.author,
                                "message": v.message} for v in chain]), hide_index=True, use_container_width=True)
    if info.parent is not None:
        difference = diff_worldbooks(store.load(name, info.parent), book)
        st.markdown(f"**Changes in `{head}`** against its parent")
        st.json(difference, expanded=True)
        if st.button("Undo this version", icon=":material/undo:", key="wb_undo"):
            undone = store.undo(name, author="workbench")
            st.session_state["wb_notices"] = [f"Back to the content of `{info.parent}`: version `{undone.version}`"]
            st.rerun()
