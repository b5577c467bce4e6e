"""Notes in the workbench: read, edit, remove and add them, each change one patch (a new version)."""

from __future__ import annotations

from typing import Any, get_args

import streamlit as st
from pydantic import ValidationError

from workbench.common.text import md_code, md_escape
from workbench.worldbook.rule_card import render_turn_links
from workbench.worldbook.rule_editor import show_edit_error
from workbench.worldbook.rule_edits import RuleEditError, new_item_id, validation_problems
from workbench.worldbook.state import submit_patch
from worldsmith.worldbook import Note, PatchOp, Worldbook, WorldbookStore

__all__ = ["NOTE_KINDS", "note_keys", "render_add_note_form", "render_notes"]

NOTE_KINDS: tuple[str, ...] = get_args(Note.model_fields["kind"].annotation)


def note_keys(note_id: str, version: str) -> dict[str, str]:
    """Widget keys of one note's form: kind, text, save, remove."""
    return {part: f"wb_note:{version}:{note_id}:{part}" for part in ("kind", "text", "save", "remove")}


def _valid(item: str, value: dict[str, Any]) -> bool:
    try:
        Note.model_validate(value)
    except ValidationError as error:
        show_edit_error(RuleEditError(item, validation_problems(error)))
        return False
    return True


def _render_note(store: WorldbookStore, name: str, version: str, note: Note, dataset: str | None) -> None:
    keys = note_keys(note.id, version)
    with st.expander(f"{md_escape(note.kind)} · {md_escape(note.text[:90])}", expanded=False):
        kind = st.selectbox("Kind", NOTE_KINDS, index=NOTE_KINDS.index(note.kind), key=keys["kind"])
        text = st.text_area("Text", value=note.text, key=keys["text"])
        st.caption(f"id {md_escape(note.id)}")
        if note.provenance:
            render_turn_links("Turns", note.provenance, dataset, key=f"{keys['text']}:turns")
        left, right = st.columns(2)
        if left.button("Save note", key=keys["save"], icon=":material/save:"):
            fields = {key: value for key, value in (("kind", kind), ("text", text)) if getattr(note, key) != value}
            if not fields:
                st.info("Nothing changed: no new version.", icon=":material/info:")
            elif _valid(f"note {note.id!r}", {**note.model_dump(mode="json"), **fields}):
                submit_patch(
                    store,
                    name,
                    version,
                    [PatchOp(op="update_note", id=note.id, fields=fields)],
                    message=f"{note.id}: edit {', '.join(fields)}",
                    done=f"Saved note {md_code(note.id)}",
                )
        if right.button("Remove note", key=keys["remove"], icon=":material/delete:"):
            submit_patch(
                store,
                name,
                version,
                [PatchOp(op="remove_note", id=note.id)],
                message=f"remove note {note.id}",
                done=f"Removed note {md_code(note.id)}",
            )


def render_notes(store: WorldbookStore, name: str, version: str, book: Worldbook, dataset: str | None) -> None:
    """Every note of `book` (as stored in `version`) with its edit form."""
    if not book.notes:
        st.caption("No notes.")
    for note in book.notes:
        _render_note(store, name, version, note, dataset)


def render_add_note_form(store: WorldbookStore, name: str, version: str, book: Worldbook) -> None:
    with st.form("wb_add_note", border=True):
        st.markdown("**Add a note** (conventions, formats, constraints, facts that are not rules)")
        kind = st.selectbox("Kind", NOTE_KINDS, index=NOTE_KINDS.index("convention"), key="wb_new_note_kind")
        text = st.text_area("Text", key="wb_new_note_text")
        submitted = st.form_submit_button("Add note", icon=":material/add:")
    if not submitted:
        return
    if not text.strip():
        show_edit_error(RuleEditError("new note", [("text", "write the note first")]))
        return
    note_id = new_item_id(book, "note", kind="note")
    value = {"kind": kind, "text": text.strip()}
    if _valid(f"new note {note_id!r}", {**value, "id": note_id}):
        submit_patch(
            store,
            name,
            version,
            [PatchOp(op="add_note", id=note_id, value=value)],
            message=f"add note {note_id}",
            done=f"Added note {md_code(note_id)}",
        )
