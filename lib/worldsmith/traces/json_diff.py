"""What changed between two JSON observations: fields added, removed and changed, by JSON pointer.

Tool results are often JSON; a text diff of two pretty-printed objects shows moved lines and
braces, not what changed. `json_changes` reads an RFC 6902 patch (the `jsonpatch` library) as
a list of changes a person can scan: `/user/balance changed 10 -> 7`, `/items/2 added`.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any, Literal

import jsonpatch
import jsonpointer

from worldsmith.traces.model import parse_json_text

__all__ = ["JsonChange", "json_changes", "json_text_changes"]

ChangeKind = Literal["added", "removed", "changed"]


@dataclass(frozen=True, slots=True)
class JsonChange:
    """One change at `path` (a JSON pointer; "" is the whole document)."""

    path: str
    kind: ChangeKind
    before: Any = None
    after: Any = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def json_changes(before: Any, after: Any) -> list[JsonChange]:
    """The changes that turn `before` into `after`, in the order a patch applies them (none when equal)."""
    changes: list[JsonChange] = []
    document = copy.deepcopy(before)
    for operation in jsonpatch.make_patch(before, after):
        op, path = operation["op"], operation["path"]
        if op == "add":
            changes.append(JsonChange(path, "added", after=operation["value"]))
        elif op == "remove":
            changes.append(JsonChange(path, "removed", before=jsonpointer.resolve_pointer(document, path)))
        elif op == "replace":
            changes.append(JsonChange(path, "changed", jsonpointer.resolve_pointer(document, path),
                                      operation["value"]))
        elif op in ("move", "copy"):
            value = jsonpointer.resolve_pointer(document, operation["from"])
            if op == "move":
                changes.append(JsonChange(operation["from"], "removed", before=value))
            changes.append(JsonChange(path, "added", after=value))
        document = jsonpatch.apply_patch(document, [operation])
    return changes


def json_text_changes(before: str | None, after: str | None) -> list[JsonChange] | None:
    """`json_changes` of two texts when both are JSON objects or arrays; None when either is not."""
    if before is None or after is None:
        return None
    parsed_before, parsed_after = parse_json_text(before), parse_json_text(after)
    if parsed_before is None or parsed_after is None:
        return None
    return json_changes(parsed_before, parsed_after)
