"""The Worldbook page's tool rules: what each tool call does to the records it selects, with provenance, editable.

A table of the book's tool rules (writes, queries, preconditions, empty results; filtered by kind, status and
tool, the filters and the open rule bound to the URL like the rule filters) and a card for the open one: its
one-line summary (`worldbook.tool_rule_text`), selector, field changes, response, template and conditions, the
turns behind it as links into Traces, and edits. Every edit (a status with its reason, a template, a field
change's status or its removal) is one `update_tool_rule` patch (`worldbook.tool_rule_edits`) on the version
shown: a new version, undoable from the History tab.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import streamlit as st

from workbench.common.text import md_code, md_escape
from workbench.worldbook.rule_card import render_rule_evidence
from workbench.worldbook.state import submit_patch
from worldsmith.worldbook import (
    TOOL_RULE_KINDS,
    FieldChange,
    PatchOp,
    RuleStatus,
    ToolRule,
    Worldbook,
    WorldbookStore,
    curation,
)

__all__ = ["KINDS", "TOOL_RULE_KEY", "ToolRuleFilter", "changes_frame", "render_tool_rules", "select_tool_rules",
           "tool_rules_frame"]

TOOL_RULE_KEY = "wb_tool_rule"  # the open tool rule (?wb_tool_rule=...); the filters are wb_t_kind/status/tool
KINDS = TOOL_RULE_KINDS
_URL: Literal["query-params"] = "query-params"
_CARD_FIELDS = {"id", "tool", "kind", "changes", "status", "support", "counterexamples", "provenance", "description"}


@dataclass(frozen=True)
class ToolRuleFilter:
    kinds: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()


def select_tool_rules(rules: Sequence[ToolRule], chosen: ToolRuleFilter) -> list[ToolRule]:
    """The rules that pass the filter, by tool then id (a stable order)."""
    kept = [r for r in rules if (not chosen.kinds or r.kind in chosen.kinds)
            and (not chosen.statuses or r.status.value in chosen.statuses)
            and (not chosen.tools or r.tool in chosen.tools)]
    return sorted(kept, key=lambda r: (r.tool, r.id))


def tool_rules_frame(rules: Sequence[ToolRule]) -> pd.DataFrame:
    return pd.DataFrame([{"id": r.id, "tool": r.tool, "kind": r.kind, "status": r.status.value, "support": r.support,
                          "counterexamples": len(r.counterexamples), "summary": curation.describe_tool_rule(r)}
                         for r in rules],
                        columns=["id", "tool", "kind", "status", "support", "counterexamples", "summary"])


def _operand(change: FieldChange) -> str:
    if change.argument:
        return f"argument {change.argument}"
    if change.source:
        return f"field {change.source}"
    if change.fields:
        return ", ".join(f.path for f in change.fields)
    return "" if change.value is None else repr(change.value)


def changes_frame(changes: Sequence[FieldChange]) -> pd.DataFrame:
    """A write rule's field changes: path, op, what from, status, in how many of the turns checked it held."""
    return pd.DataFrame([{"path": c.path, "op": c.op, "from": _operand(c), "status": c.status.value,
                          "held": f"{c.support:d}/{c.checked:d}", "reads as": curation.describe_change(c)}
                         for c in changes],
                        columns=["path", "op", "from", "status", "held", "reads as"])


def _filters(rules: Sequence[ToolRule]) -> ToolRuleFilter:
    first, second, third = st.columns(3)
    kinds = first.multiselect("Kind", list(KINDS), key="wb_t_kind", bind=_URL)
    statuses = second.multiselect("Status", [s.value for s in RuleStatus], key="wb_t_status", bind=_URL)
    tools = third.multiselect("Tool", sorted({r.tool for r in rules}), key="wb_t_tool", bind=_URL)
    return ToolRuleFilter(kinds=tuple(kinds), statuses=tuple(statuses), tools=tuple(tools))


def _table(rules: Sequence[ToolRule]) -> None:
    """The filtered rules; a click on a row opens it (the table's key follows the open rule, as for rules)."""
    ids = [r.id for r in rules]
    current = st.session_state.get(TOOL_RULE_KEY)
    tag = hashlib.blake2b(repr((current, ids)).encode(), digest_size=6).hexdigest()
    event = st.dataframe(tool_rules_frame(rules), hide_index=True, on_select="rerun", selection_mode="single-row",
                         selection_default={"selection": {"rows": [ids.index(current)] if current in ids else []}},
                         key=f"wb_tool_rules_table_{tag}")
    rows = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    if rows and 0 <= rows[0] < len(ids) and ids[rows[0]] != current:
        st.session_state[TOOL_RULE_KEY] = ids[rows[0]]
        st.rerun()


def _save(store: WorldbookStore, name: str, version: str, op: PatchOp | None, message: str, done: str) -> None:
    if op is not None:
        submit_patch(store, name, version, [op], message, done=done)


def _edit_op(build: Callable[..., PatchOp], *args: object) -> PatchOp | None:
    """The op `build(*args)` makes, or None with the reason shown (a bad edit is refused before saving)."""
    try:
        return build(*args)
    except ValueError as error:
        st.error(f"Not saved: {md_escape(error)}", icon=":material/error:")
        return None


def _status_editor(store: WorldbookStore, name: str, version: str, rule: ToolRule) -> None:
    st.markdown("**Change the status** (makes a new version; only supported rules execute)")
    reason = st.text_input("Why (kept in the version's message; required)", key=f"wb_tstatus_reason:{rule.id}")
    for column, status in zip(st.columns(len(RuleStatus)), RuleStatus, strict=True):
        if column.button(md_escape(status.value), key=f"wb_tset_{status.value}",
                         disabled=status == rule.status or not reason.strip()):
            _save(store, name, version, curation.tool_rule_status_op(rule, status),
                  f"{rule.id}: {status.value}: {reason.strip()}", f"{md_code(rule.id)} is now {md_escape(status.value)}")


def _template_editor(store: WorldbookStore, name: str, version: str, rule: ToolRule) -> None:
    with st.form(f"wb_ttemplate_form:{rule.id}"):
        template = st.text_area("Answer template ({arg.x} slots the call's argument x)", value=rule.template,
                                key=f"wb_ttemplate:{rule.id}", height=90)
        if st.form_submit_button("Save the template", icon=":material/save:") and template != rule.template:
            _save(store, name, version, _edit_op(curation.template_op, rule, template), f"{rule.id}: template edited",
                  f"{md_code(rule.id)}'s template saved")


def _changes_editor(store: WorldbookStore, name: str, version: str, rule: ToolRule) -> None:
    st.markdown("**Edit a field change** (makes a new version)")
    paths = [c.path for c in rule.changes]
    left, middle, right = st.columns([2, 2, 1], vertical_alignment="bottom")
    path = left.selectbox("Field change", paths, key=f"wb_tchange:{rule.id}")
    change = next(c for c in rule.changes if c.path == path)
    statuses = [s.value for s in RuleStatus]
    status = middle.selectbox("Its status", statuses, index=statuses.index(change.status.value),
                              key=f"wb_tchange_status:{rule.id}:{path}",
                              help="the verdict on this change; the rule's own status decides whether it executes")
    if right.button("Set", key="wb_tchange_set", disabled=status == change.status.value):
        _save(store, name, version, _edit_op(curation.change_status_op, rule, path, status),
              f"{rule.id}: change {path}: {status}", f"{md_code(rule.id)}: the change of {md_code(path)} is {md_escape(status)}")
    if st.button(f"Drop the change of {md_escape(path)}", key="wb_tchange_drop", icon=":material/delete:",
                 help="the rule no longer sets this field; the field keeps its value when the rule executes"):
        _save(store, name, version, _edit_op(curation.drop_change_op, rule, path),
              f"{rule.id}: dropped the change of {path}", f"{md_code(rule.id)} no longer changes {md_code(path)}")


def _card(store: WorldbookStore, name: str, version: str, rule: ToolRule, dataset: str | None) -> None:
    st.subheader(md_escape(rule.id), anchor=False)
    st.markdown(f"**Tool** {md_code(rule.tool)} · **kind** {md_code(rule.kind)} · **status** "
                f"{md_code(rule.status.value)} · support {rule.support:d} · "
                f"{len(rule.counterexamples):d} counterexamples")
    st.text(curation.describe_tool_rule(rule))
    if rule.description:
        st.caption(md_escape(rule.description))
    if rule.changes:
        st.markdown("**Field changes**")
        st.dataframe(changes_frame(rule.changes), hide_index=True, key=f"wb_tchanges_{rule.id}_{version}")
    extra = {key: value for key, value in rule.model_dump(mode="json", exclude_defaults=True).items()
             if key not in _CARD_FIELDS}  # selector, response, template, conditions, other kinds' specs
    if extra:
        with st.expander("Selector, response, conditions and template", icon=":material/data_object:"):
            st.json(extra, expanded=True)
    render_rule_evidence(rule, dataset)
    st.divider()
    _status_editor(store, name, version, rule)
    if rule.kind in curation.TEMPLATED_KINDS:
        _template_editor(store, name, version, rule)
    if rule.kind == "write" and rule.changes:
        _changes_editor(store, name, version, rule)


def render_tool_rules(store: WorldbookStore, name: str, version: str, book: Worldbook, dataset: str | None) -> None:
    """The whole tab: filters, table, picker and the open rule's card."""
    if not book.tool_rules:
        st.info("This worldbook has no tool rules (a build learns them from JSON tool answers: writes, queries, "
                "preconditions).", icon=":material/info:")
        return
    rules = select_tool_rules(book.tool_rules, _filters(book.tool_rules))
    st.caption(f"{len(rules)} of {len(book.tool_rules)} tool rules")
    if rules:
        st.caption("Click a row to open its rule.")
        _table(rules)
    chosen = st.selectbox("Open a tool rule", [r.id for r in rules], index=None, key=TOOL_RULE_KEY,
                          placeholder="choose a tool rule", bind=_URL)
    rule = next((r for r in book.tool_rules if r.id == chosen), None)
    if rule is not None:
        with st.container(border=True):
            _card(store, name, version, rule, dataset)
