"""Rule edits as plain data: editor rows <-> conditions/effects, the changed fields, readable errors.

No Streamlit here, so the whole edit path (what a person typed -> the one `update_rule` patch
it becomes) is testable on its own. Editor cells are text: a cell is read as JSON when it parses
(numbers, lists, objects, `true`, `null`), else kept as the string typed; a string that would
read as something else is shown JSON-quoted, so showing then reading a value gives it back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import ValidationError

from worldsmith.worldbook import Condition, Effect, Rule, Worldbook

__all__ = [
    "CONDITION_COLUMNS",
    "CONDITION_OPS",
    "EDITABLE_FIELDS",
    "EFFECT_COLUMNS",
    "EFFECT_OPS",
    "RuleDraft",
    "RuleEditError",
    "apply_editor_state",
    "changed_fields",
    "condition_rows",
    "condition_text",
    "effect_rows",
    "new_item_id",
    "parse_cell",
    "rows_to_conditions",
    "rows_to_effects",
    "show_cell",
    "validation_problems",
]

Row = dict[str, str | None]

CONDITION_COLUMNS = ("path", "arg", "op", "value")
EFFECT_COLUMNS = ("op", "path", "value")
CONDITION_OPS: tuple[str, ...] = get_args(Condition.model_fields["op"].annotation)
EFFECT_OPS: tuple[str, ...] = get_args(Effect.model_fields["op"].annotation)
# What a person may change in the rule card (confidence and support are computed from evidence,
# status has its own buttons, provenance comes from the traces).
EDITABLE_FIELDS = ("template", "outcome", "priority", "description", "conditions", "effects")


class RuleEditError(ValueError):
    """An edit that does not make a valid item; each problem names the field (e.g. `effects.0.path`) and why."""

    def __init__(self, item: str, problems: list[tuple[str, str]]) -> None:
        self.item = item
        self.problems = problems
        super().__init__(f"{item} not saved: " + "; ".join(f"{where}: {why}" for where, why in problems))


def parse_cell(text: Any) -> Any:
    """An editor cell as a value: JSON when it parses, else the text; blank is None."""
    if text is None:
        return None
    if not isinstance(text, str):
        return text
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def show_cell(value: Any) -> str | None:
    """The text shown for a value, such that `parse_cell(show_cell(v)) == v`."""
    if value is None:
        return None
    if isinstance(value, str) and parse_cell(value) == value:
        return value
    return json.dumps(value, ensure_ascii=False)


def _subject(value: Any) -> str | None:
    text = "" if value is None else str(value).strip()
    return text or None


def condition_rows(rule: Rule) -> list[Row]:
    return [{"path": c.path, "arg": c.arg, "op": c.op, "value": show_cell(c.value)} for c in rule.conditions]


def effect_rows(rule: Rule) -> list[Row]:
    return [{"op": e.op, "path": e.path, "value": show_cell(e.value)} for e in rule.effects]


def _blank(row: Mapping[str, Any]) -> bool:
    return all(_subject(value) is None for value in row.values())


def rows_to_conditions(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Condition dicts from editor rows (rows left entirely blank are dropped)."""
    return [{"path": _subject(row.get("path")), "arg": _subject(row.get("arg")), "op": _subject(row.get("op")),
             "value": parse_cell(row.get("value"))} for row in rows if not _blank(row)]


def rows_to_effects(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Effect dicts from editor rows (rows left entirely blank are dropped)."""
    return [{"op": _subject(row.get("op")), "path": _subject(row.get("path")), "value": parse_cell(row.get("value"))}
            for row in rows if not _blank(row)]


def apply_editor_state(base: Sequence[Row], state: Mapping[str, Any] | None, columns: Sequence[str]) -> list[Row]:
    """The rows an `st.data_editor` shows: its input `base` with its edit state applied.

    The state holds every edit since the editor was created, relative to `base`, in the order
    Streamlit applies them: cell edits by row position, then deletions, then added rows.
    """
    rows = [dict(row) for row in base]
    if not state:
        return rows
    for position, changes in (state.get("edited_rows") or {}).items():
        index = int(position)
        if 0 <= index < len(rows):
            rows[index].update({column: value for column, value in changes.items() if column in columns})
    deleted = {int(position) for position in state.get("deleted_rows") or []}
    rows = [row for index, row in enumerate(rows) if index not in deleted]
    for added in state.get("added_rows") or []:
        rows.append({column: added.get(column) for column in columns})
    return rows


def validation_problems(error: ValidationError) -> list[tuple[str, str]]:
    """(field location such as `effects.0.path`, reason) for each problem pydantic found."""
    return [(".".join(str(part) for part in problem["loc"]) or "(item)", problem["msg"].removeprefix("Value error, "))
            for problem in error.errors()]


def condition_text(condition: Condition) -> str:
    """A condition as one readable line: `world.door eq "open"`, `arg.object exists`."""
    subject = condition.path or f"arg.{condition.arg}"
    value = show_cell(condition.value)
    return f"{subject} {condition.op}" + ("" if value is None else f" {value}")


@dataclass
class RuleDraft:
    """What the rule card's forms hold: the editable fields, conditions and effects as editor rows."""

    template: str
    outcome: str
    priority: int
    description: str
    conditions: list[Row] = field(default_factory=list)
    effects: list[Row] = field(default_factory=list)

    @classmethod
    def of(cls, rule: Rule) -> RuleDraft:
        return cls(template=rule.template, outcome=rule.outcome, priority=rule.priority,
                   description=rule.description, conditions=condition_rows(rule), effects=effect_rows(rule))


def changed_fields(rule: Rule, draft: RuleDraft) -> dict[str, Any]:
    """The fields of `rule` that `draft` changes (JSON values, as an `update_rule` patch takes them).

    Raises RuleEditError naming the field when the edited rule would not be valid.
    """
    proposed: dict[str, Any] = {
        "template": draft.template, "outcome": draft.outcome.strip(), "priority": draft.priority,
        "description": draft.description, "conditions": rows_to_conditions(draft.conditions),
        "effects": rows_to_effects(draft.effects),
    }
    try:
        edited = Rule.model_validate({**rule.model_dump(mode="json"), **proposed})
    except ValidationError as error:
        raise RuleEditError(f"rule {rule.id!r}", validation_problems(error)) from None
    before, after = rule.model_dump(mode="json"), edited.model_dump(mode="json")
    return {key: after[key] for key in EDITABLE_FIELDS if after[key] != before[key]}


def new_item_id(book: Worldbook, stem: str, kind: str = "rule") -> str:
    """A fresh id `<stem>-<n>` for a rule or note of `book` (the stem cleaned to the id alphabet)."""
    cleaned = "".join(ch if ch.isalnum() or ch in "_.:-" else "-" for ch in stem.strip()).strip("-") or kind
    taken = {item.id for item in (book.rules if kind == "rule" else book.notes)}
    number = 1
    while f"{cleaned}-{number}" in taken:
        number += 1
    return f"{cleaned}-{number}"
