"""Curating tool rules by hand: each edit is one `update_tool_rule` patch op for `WorldbookStore.patch`.

    store.patch(name, Patch(base=version, ops=[drop_change_op(rule, "status")], message="..."))

The ops carry the whole `changes` list (or the one field edited), so the store's conflict check and undo
treat them like any rule edit. Bad edits (a path the rule does not change, a template on a kind that does not
answer with one) raise ValueError naming the rule and the field.
"""

from __future__ import annotations

from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.model import RuleStatus
from worldsmith.worldbook.store import PatchOp
from worldsmith.worldbook.toolrules import ToolRule

__all__ = ["TEMPLATED_KINDS", "change_status_op", "drop_change_op", "template_op", "tool_rule_status_op"]

TEMPLATED_KINDS = ("precondition", "empty")  # kinds that answer with their `template` text


def tool_rule_status_op(rule: ToolRule, status: RuleStatus | str) -> PatchOp:
    """The rule's status set (only supported rules execute)."""
    return PatchOp(op="update_tool_rule", id=rule.id, fields={"status": RuleStatus(status).value})


def template_op(rule: ToolRule, template: str) -> PatchOp:
    """A precondition's or empty result's answer text replaced ({arg.x} slots the argument x)."""
    if rule.kind not in TEMPLATED_KINDS:
        raise BadInputError(f"tool rule {rule.id!r}: a {rule.kind} rule has no template to edit "
                         f"(only {', '.join(TEMPLATED_KINDS)})")
    if not template.strip():
        raise BadInputError(f"tool rule {rule.id!r}: the template is empty")
    fields: dict[str, object] = {"template": template}
    if rule.precondition is not None:  # the precondition source answers with its spec's text: edit both alike
        fields["precondition"] = {**rule.precondition.model_dump(mode="json"), "template": template}
    return PatchOp(op="update_tool_rule", id=rule.id, fields=fields)


def _changes_index(rule: ToolRule, path: str) -> int:
    if rule.kind not in ("write", "effect"):
        raise BadInputError(f"tool rule {rule.id!r} is a {rule.kind} rule: it has no field changes")
    for index, change in enumerate(rule.changes):
        if change.path == path:
            return index
    raise BadInputError(f"tool rule {rule.id!r} changes no field {path!r} "
                     f"(it changes {', '.join(c.path for c in rule.changes) or 'nothing'})")


def change_status_op(rule: ToolRule, path: str, status: RuleStatus | str) -> PatchOp:
    """A write rule's change of field `path` given another status (what the learner thought of it)."""
    index = _changes_index(rule, path)
    changes = [c.model_dump(mode="json") for c in rule.changes]
    changes[index]["status"] = RuleStatus(status).value
    return PatchOp(op="update_tool_rule", id=rule.id, fields={"changes": changes})


def drop_change_op(rule: ToolRule, path: str) -> PatchOp:
    """A write rule without its change of field `path`: the field keeps its value when the rule executes."""
    index = _changes_index(rule, path)
    changes = [c.model_dump(mode="json") for i, c in enumerate(rule.changes) if i != index]
    return PatchOp(op="update_tool_rule", id=rule.id, fields={"changes": changes})
