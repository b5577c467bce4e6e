"""Which tool calls may change an upstream server's state: what a hybrid proxy must never answer from the book.

A simulator that answers a write itself leaves the real server behind (the row never inserted, the order never
cancelled), and from then on the two disagree. So a tool counts as a read, answerable from the book, only on
positive evidence, and anything the book learned against it wins:

- a write: the book learned it changes records (`write` / `effect` tool rules); the upstream declares it
  destructive or not read-only (MCP tool annotations); or the book does not know it. (A text rule's effects
  are not evidence either way: they keep the simulator's own bookkeeping, such as the item a read last showed);
- a read: not a write, and the upstream declares it read-only (`readOnlyHint`), or the person running the proxy
  says so (`read_only`), or the book saw it show records that never changed since it last showed them
  (`learn_readers`: its answers are the record as it is; an answer holding no record is no evidence);
- anything else is treated as a write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from worldsmith.worldbook.model import Worldbook
from worldsmith.worldbook.record_store import learn_readers, own_records, parse_structured

__all__ = ["StateChanges", "state_changes"]


@dataclass(frozen=True, slots=True)
class StateChanges:
    """The tools a book may answer (`reads`), and why every other tool is forwarded (`why_write`)."""

    reads: frozenset[str]
    why_write: Mapping[str, str]

    def may_change(self, tool: str) -> bool:
        return tool not in self.reads

    def reason(self, tool: str) -> str:
        if tool in self.reads:
            return "a read"
        return self.why_write.get(tool, "neither the upstream, the book nor you said it only reads")


def _declared(annotations: Any, key: str) -> Any:
    if annotations is None:
        return None
    if isinstance(annotations, Mapping):
        return annotations.get(key, annotations.get(_snake(key)))
    return getattr(annotations, _snake(key), None)


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def _showed_records(book: Worldbook) -> set[str]:
    """The tools whose recorded answers showed at least one record: an answer that parses but holds none
    (`[{'affected_rows': 1}]`, `{"status": "ok"}`) is no evidence that the tool only reads."""
    return {item.action for item in book.evidence
            if next(iter(own_records(parse_structured(item.observation))), None) is not None}


def state_changes(book: Worldbook, upstream_tools: Iterable[Mapping[str, Any]], read_only: Iterable[str] = ()) -> StateChanges:
    """What `book` may answer for an upstream whose `tools/list` is `upstream_tools` (each with `name` and, where
    declared, `annotations`), `read_only` the tools a person says only read (see the module doc)."""
    known = {spec.name for spec in book.action_schema.actions}
    why: dict[str, str] = {}
    for rule in book.tool_rules:
        if rule.kind in ("write", "effect"):
            why.setdefault(rule.tool, f"the book learned it changes records ({rule.kind} rule {rule.id})")
    declared_reads: set[str] = set()
    for tool in upstream_tools:
        name = str(tool.get("name", ""))
        annotations = tool.get("annotations")
        if _declared(annotations, "destructiveHint") is True or _declared(annotations, "readOnlyHint") is False:
            why.setdefault(name, "the upstream declares it not read-only")
        elif _declared(annotations, "readOnlyHint") is True:
            declared_reads.add(name)
    for name in set(declared_reads) | set(read_only):
        if name not in known:
            why.setdefault(name, "the book has never seen it")
    evidenced = learn_readers(book.evidence) & _showed_records(book)
    reads = frozenset(name for name in (declared_reads | set(read_only) | evidenced) if name in known and name not in why)
    return StateChanges(reads=reads, why_write=why)
