"""Tool rules in one line a person can scan: what a call selects, changes and answers.

    describe_tool_rule(rule)
    # "cancel_order selects order by order_id; sets status='cancelled'; copies reason → cancel_reason;
    #  appends payments entry (kind, payment_method_id, amount); answers the updated record"

The Worldbook page's tool-rules table and card show it beside the rule's own data, so a curator reads the
learned behaviour without unfolding the JSON. A change not (yet) supported is marked `[tentative]` etc.
"""

from __future__ import annotations

import json
from typing import Any

from worldsmith.worldbook.model import RuleStatus
from worldsmith.worldbook.toolrules import FieldChange, ResponseSpec, Selector, ToolRule

__all__ = ["describe_change", "describe_response", "describe_selector", "describe_tool_rule"]

_VALUE_CHARS = 40
_TEXT_CHARS = 60


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS - 1] + "…"


def _short(text: str, limit: int = _TEXT_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _keys(fields: list[FieldChange]) -> str:
    return ", ".join(f.path for f in fields)


def describe_change(change: FieldChange) -> str:
    """One field change as a phrase (`sets status='cancelled'`, `copies reason → cancel_reason`)."""
    path, op = change.path, change.op
    phrases = {
        "set": lambda: f"sets {path}={_value(change.value)}",
        "copy": lambda: f"copies {change.argument} → {path}",
        "field": lambda: f"copies field {change.source} → {path}",
        "keep": lambda: f"keeps {path}",
        "add": lambda: f"adds {change.argument} to {path}",
        "sub": lambda: f"subtracts {change.argument} from {path}",
        "sum": lambda: f"sums {change.source} over {change.argument} → {path}",
        "append": lambda: (f"appends {change.argument} to {path}" if change.argument
                           else f"appends {path} entry ({_keys(change.fields)})" if change.fields
                           else f"appends the answer's id to {path}"),
        "upsert": lambda: f"sets the answer's records in {path}",
        "remove": lambda: f"removes the {change.argument} items from {path}",
        "move": lambda: f"moves the {change.argument} items of {change.source} → {path}",
        "sorted_arg": lambda: f"sets {path} to {change.argument}, sorted",
        "object": lambda: _object(change),
    }
    text = phrases[op]()
    return text if change.status == RuleStatus.SUPPORTED else f"{text} [{change.status.value}]"


def _object(change: FieldChange) -> str:
    """`builds address from line1, city, zip, with country from address.country`."""
    copied = [f.argument for f in change.fields if f.op == "copy" and f.argument]
    others = [f"{f.path} from {f.source}" if f.op == "field" else
              f"{f.path}={_value(f.value)}" if f.op == "set" else describe_change(f)
              for f in change.fields if not (f.op == "copy" and f.argument)]
    parts = [f"builds {change.path}"] + ([f"from {', '.join(copied)}"] if copied else [])
    return " ".join(parts) + (f", with {', '.join(others)}" if others else "")


def describe_selector(selector: Selector) -> str:
    """`selects order by order_id` (the record named after its id key; the argument when it differs)."""
    key = selector.key
    noun = key[:-3] if key.endswith("_id") and len(key) > 3 else "record"
    via = "" if selector.argument == key else f" = {selector.argument}"
    return f"selects {noun} by {key}{via}"


def describe_response(response: ResponseSpec) -> str:
    if response.kind == "record":
        return "answers the updated record"
    if response.kind == "fields":
        return f"answers {{{', '.join(response.keys)}}}"
    return f"answers {_short(json.dumps(response.text, ensure_ascii=False))}"


def _is_identity(change: FieldChange, selector: Selector | None) -> bool:
    """The selected record's own id copied from the argument that selected it: true of every call, so noise."""
    return (selector is not None and change.op == "copy" and change.argument == selector.argument
            and change.path == selector.key)


def describe_tool_rule(rule: ToolRule) -> str:
    """The rule in one line: for a write (an effect) its selector, changes and answer (the answers it acts after);
    for the other kinds (queries,
    preconditions, empty results) the learner's description and the text the rule answers with."""
    if rule.kind in ("write", "effect"):
        parts = [describe_selector(rule.selector)] if rule.selector is not None else []
        parts += [describe_change(c) for c in rule.changes if not _is_identity(c, rule.selector)]
        if rule.response is not None:
            parts.append(describe_response(rule.response))
        parts += [f"after answers like {_short(json.dumps(c['answer_form'], ensure_ascii=False))}"
                  for c in rule.conditions if "answer_form" in c]
        return f"{rule.tool} " + "; ".join(parts) if parts else f"{rule.tool} changes nothing"
    line = f"{rule.tool} ({rule.kind})"
    if rule.description:
        line += f": {_short(rule.description, 160)}"
    if rule.template:
        line += f" → {_short(json.dumps(rule.template, ensure_ascii=False))}"
    return line
