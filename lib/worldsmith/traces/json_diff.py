"""What changed between two JSON observations: fields added, removed and changed, by JSON pointer.

Tool results are often JSON; a text diff of two pretty-printed objects shows moved lines and
braces, not what changed. `json_changes` reads an RFC 6902 patch (the `jsonpatch` library) as
a list of changes a person can scan: `/user/balance changed 10 -> 7`, `/items/2 added`.

`observation_diff` is the one diff every screen shows between a before and an after (a held-out turn, a
record, a prediction and its reference): fields by pointer when both texts are JSON, else the words that
differ (`text_diff.word_diff`). `apply_changes` replays the changes, so a diff is checked to say all of it.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any, Literal

import jsonpatch
import jsonpointer

from worldsmith.traces.model import parse_json_text
from worldsmith.traces.text_diff import DiffSegment, word_diff

__all__ = ["JsonChange", "ObservationDiff", "apply_changes", "json_changes", "json_text_changes", "observation_diff"]

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


def apply_changes(before: Any, changes: list[JsonChange]) -> Any:
    """`before` with `changes` applied in order (`json_changes(a, b)` applied to `a` gives `b`); `before` is not
    modified."""
    operations: list[dict[str, Any]] = []
    for change in changes:
        if change.kind == "added":
            operations.append({"op": "add", "path": change.path, "value": change.after})
        elif change.kind == "removed":
            operations.append({"op": "remove", "path": change.path})
        else:
            operations.append({"op": "replace", "path": change.path, "value": change.after})
    return jsonpatch.apply_patch(copy.deepcopy(before), operations)


@dataclass(frozen=True, slots=True)
class ObservationDiff:
    """How `after` differs from `before`: JSON `changes` when both texts are JSON objects or arrays, else word
    `segments` (`equal` in both, `delete` only before, `insert` only after)."""

    kind: Literal["json", "text"]
    changes: tuple[JsonChange, ...] = ()
    segments: tuple[DiffSegment, ...] = ()

    @property
    def same(self) -> bool:
        """Nothing differs."""
        return not self.changes if self.kind == "json" else all(s.op == "equal" for s in self.segments)

    def counts(self) -> dict[str, int]:
        """Fields `added`, `removed` and `changed` (JSON), or words `added` and `removed` (text); zeros left out."""
        if self.kind == "json":
            tally = {kind: sum(1 for c in self.changes if c.kind == kind) for kind in ("added", "removed", "changed")}
        else:
            tally = {kind: sum(len(s.text.split()) for s in self.segments if s.op == op)
                     for kind, op in (("added", "insert"), ("removed", "delete"))}
        return {kind: n for kind, n in tally.items() if n}

    def summary(self) -> str:
        """`1 changed, 2 added` (fields) or `3 words added` (text), or `no difference`: a line a label can hold."""
        unit = "" if self.kind == "json" else " words"
        return ", ".join(f"{n:d}{unit if n != 1 else unit[:-1]} {kind}" for kind, n in self.counts().items()) \
            or "no difference"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "changes": [c.to_json() for c in self.changes],
                "segments": [s.model_dump() for s in self.segments]}


def observation_diff(before: str | None, after: str | None) -> ObservationDiff:
    """The diff of two observation texts: by field when both are JSON objects or arrays, else by word (a missing
    text reads as empty)."""
    changes = json_text_changes(before, after)
    if changes is not None:
        return ObservationDiff("json", changes=tuple(changes))
    return ObservationDiff("text", segments=tuple(word_diff(after or "", before or "")))
