"""Editing a rule in the workbench: its template, outcome, priority, description, conditions and effects.

Conditions and effects are `st.data_editor` tables. Each editor gets a fixed input (the rule as
stored in the version shown) and a key that stays the same while that version is shown, so
Streamlit accumulates every edit in the widget's state; feeding the editor's output back in as
its input would instead reset that state and drop every second edit. An on_change handler keeps
the edited rows under `DRAFTS` in session_state. "Save rule" turns the whole form into ONE
`update_rule` patch on the version shown (a new version); an invalid edit saves nothing and
names the field, a stale one is refused by the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from workbench.common.text import md_code, md_escape
from workbench.worldbook.rule_edits import (
    CONDITION_COLUMNS,
    CONDITION_OPS,
    EFFECT_COLUMNS,
    EFFECT_OPS,
    Row,
    RuleDraft,
    RuleEditError,
    apply_editor_state,
    changed_fields,
    condition_rows,
    condition_text,
    effect_rows,
    new_item_id,
    rows_to_conditions,
    rows_to_effects,
    show_cell,
    validation_problems,
)
from workbench.worldbook.rule_guard import guarded_submit
from workbench.worldbook.state import submit_patch
from worldsmith.worldbook import Condition, Effect, PatchOp, Rule, RuleStatus, Worldbook, WorldbookStore

__all__ = [
    "DRAFTS",
    "EditorKeys",
    "current_rows",
    "editor_keys",
    "remember_rows",
    "render_add_rule_form",
    "render_rule_editor",
    "show_edit_error",
]

DRAFTS = "wb_rule_drafts"  # {editor key: the rows the editor shows}


@dataclass(frozen=True)
class EditorKeys:
    """The widget keys of one rule's editing form (stable while one version of the rule is shown)."""

    template: str
    outcome: str
    priority: str
    description: str
    conditions: str
    effects: str
    save: str


def editor_keys(rule_id: str, version: str) -> EditorKeys:
    prefix = f"wb_edit:{version}:{rule_id}:"
    return EditorKeys(*(prefix + part for part in
                        ("template", "outcome", "priority", "description", "conditions", "effects", "save")))


def remember_rows(key: str, base: Sequence[Row], columns: Sequence[str]) -> None:
    """on_change handler of a rows editor: store the rows it now shows under DRAFTS[key]."""
    st.session_state.setdefault(DRAFTS, {})[key] = apply_editor_state(base, st.session_state.get(key), columns)


def current_rows(key: str, base: Sequence[Row], columns: Sequence[str]) -> list[Row]:
    """The rows the editor `key` shows: its edit state applied to `base` (else the stored draft, else `base`)."""
    state = st.session_state.get(key)
    if state is not None:
        return apply_editor_state(base, state, columns)
    return [dict(row) for row in st.session_state.get(DRAFTS, {}).get(key, base)]


def _rows_editor(key: str, base: list[Row], columns: Sequence[str], ops: Sequence[str]) -> list[Row]:
    if key not in st.session_state:  # a fresh editor shows `base`: a draft of an earlier one is stale
        st.session_state.get(DRAFTS, {}).pop(key, None)
    config: dict[str, Any] = {column: st.column_config.TextColumn(column) for column in columns}
    config["op"] = st.column_config.SelectboxColumn("op", options=list(ops), required=True)
    config["value"] = st.column_config.TextColumn("value", help="JSON when it parses (3, [1, 2], true), else text")
    st.data_editor(pd.DataFrame(base, columns=list(columns), dtype="string"), key=key, num_rows="dynamic",
                   hide_index=True, column_config=config, on_change=remember_rows, args=(key, base, columns))
    return current_rows(key, base, columns)


def show_edit_error(error: RuleEditError) -> None:
    """The problems of an invalid edit, each with the field it concerns."""
    lines = "\n".join(f"- {md_code(where)}: {md_escape(why)}" for where, why in error.problems)
    st.error(f"{md_escape(error.item)} not saved:\n{lines}", icon=":material/error:")


def _preview(lines: list[str]) -> None:
    st.caption(" · ".join(md_code(line) for line in lines) if lines else "(none)")


def _preview_conditions(rows: list[Row]) -> None:
    lines = []
    for number, row in enumerate(rows_to_conditions(rows)):
        try:
            lines.append(condition_text(Condition.model_validate(row)))
        except ValueError:
            lines.append(f"row {number + 1}: not valid yet")
    _preview(lines)


def _preview_effects(rows: list[Row]) -> None:
    lines = []
    for number, row in enumerate(rows_to_effects(rows)):
        try:
            effect = Effect.model_validate(row)
            value = show_cell(effect.value)
            lines.append(f"{effect.op} {effect.path}" + ("" if value is None else f" {value}"))
        except ValueError:
            lines.append(f"row {number + 1}: not valid yet")
    _preview(lines)


def render_rule_editor(store: WorldbookStore, name: str, version: str, rule: Rule, book: Worldbook) -> None:
    """The editing form of `rule` as stored in `version`, and its Save button (guarded: a supported rule that
    would fail its own evidence is held back for an explicit "Save anyway")."""
    keys = editor_keys(rule.id, version)
    drafts = st.session_state.get(DRAFTS, {})
    for stale in [key for key in drafts if key not in (keys.conditions, keys.effects)]:
        del drafts[stale]  # another rule's or another version's editor, no longer shown
    template = st.text_area("Observation template", value=rule.template, key=keys.template,
                            help="Slots: {arg.name} for action arguments, {world.path} for state.")
    left, right = st.columns(2)
    outcome = left.text_input("Outcome", value=rule.outcome, key=keys.outcome, help="success or failure:<kind>")
    priority = right.number_input("Priority", value=rule.priority, step=1, key=keys.priority)
    description = st.text_area("Description", value=rule.description, key=keys.description, height=68)
    st.markdown("**Conditions** (a state `path` or an action `arg`, not both; blank rows are ignored)")
    conditions = _rows_editor(keys.conditions, condition_rows(rule), CONDITION_COLUMNS, CONDITION_OPS)
    _preview_conditions(conditions)
    st.markdown("**Effects** (in order)")
    effects = _rows_editor(keys.effects, effect_rows(rule), EFFECT_COLUMNS, EFFECT_OPS)
    _preview_effects(effects)
    if not st.button("Save rule", key=keys.save, type="primary", icon=":material/save:"):
        return
    draft = RuleDraft(template=template, outcome=outcome, priority=int(priority), description=description,
                      conditions=conditions, effects=effects)
    try:
        fields = changed_fields(rule, draft)
    except RuleEditError as error:
        show_edit_error(error)
        return
    if not fields:
        st.info("Nothing changed: no new version.", icon=":material/info:")
        return
    changed = ", ".join(fields)
    guarded_submit(store, name, version, book, [PatchOp(op="update_rule", id=rule.id, fields=fields)],
                   message=f"{rule.id}: edit {changed}", done=f"Saved {md_code(rule.id)} ({md_escape(changed)})")


def render_add_rule_form(store: WorldbookStore, name: str, version: str, book: Worldbook) -> None:
    """A new tentative rule (action, template, outcome; id `<action>-<n>` unless given)."""
    known = sorted({a.name for a in book.action_schema.actions} | {r.action for r in book.rules})
    with st.form("wb_add_rule", border=True):
        st.markdown("**Add a rule** (status tentative: it runs once a person marks it supported)")
        left, right = st.columns(2)
        action = left.text_input("Action", key="wb_new_rule_action",
                                 help=md_escape("Known actions: " + ", ".join(known)) if known else None)
        rule_id = right.text_input("Id (blank: <action>-<n>)", key="wb_new_rule_id")
        template = st.text_area("Observation template", key="wb_new_rule_template", height=68)
        outcome = st.text_input("Outcome", value="success", key="wb_new_rule_outcome")
        submitted = st.form_submit_button("Add rule", icon=":material/add:")
    if not submitted:
        return
    rule_id = rule_id.strip() or new_item_id(book, action.strip() or "rule")
    value = {"action": action.strip(), "template": template, "outcome": outcome.strip(),
             "status": RuleStatus.TENTATIVE.value}
    try:
        Rule.model_validate({**value, "id": rule_id})
    except ValidationError as error:
        show_edit_error(RuleEditError(f"new rule {rule_id!r}", validation_problems(error)))
        return
    if any(r.id == rule_id for r in book.rules):
        show_edit_error(RuleEditError(f"new rule {rule_id!r}", [("id", "a rule with this id exists")]))
        return
    submit_patch(store, name, version, [PatchOp(op="add_rule", id=rule_id, value=value)],
                 message=f"add rule {rule_id}", done=f"Added {md_code(rule_id)}")
