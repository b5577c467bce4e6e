"""The look-up sources of a harness over one record store: `query` / `query_empty` and `precondition`."""

from __future__ import annotations

from worldsmith.sim.sources.preconditions import PreconditionSource
from worldsmith.sim.sources.queries import QuerySource
from worldsmith.worldbook.lookup import RecordStore
from worldsmith.worldbook.lookup_rules import learn_lookup_rules
from worldsmith.worldbook.model import Worldbook

__all__ = ["LOOKUP_KINDS", "tool_sources"]

LOOKUP_KINDS = frozenset({"query", "empty", "precondition"})


def tool_sources(book: Worldbook | None) -> tuple[QuerySource, PreconditionSource]:
    """The query and precondition sources of a book's look-up tool rules (as curated: only supported ones
    answer), over the record store of its evidence (the tools that write, as its write rules name them, show
    no initial versions); a book built before these rules learns them here."""
    evidence = book.evidence if book is not None else []
    writes = {r.tool for r in book.tool_rules if r.kind == "write"} if book is not None else set()
    readers = {item.action for item in evidence} - writes if writes else None  # as the tools stage took them
    store = RecordStore.from_evidence(evidence, readers)
    rules = [r for r in book.tool_rules if r.kind in LOOKUP_KINDS] if book is not None else []
    if not rules and evidence:
        rules = learn_lookup_rules(evidence, store=store)
    return QuerySource(rules, store), PreconditionSource(rules, store)
