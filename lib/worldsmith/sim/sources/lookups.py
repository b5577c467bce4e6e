"""The look-up sources of a harness over the record store: `query` / `query_empty` and `precondition` /
`precondition_enum`, registered together as the `lookups` source. The store is the `records` source's (built
once per harness: `sim.sources.records.record_store`), reached through `requires=("records",)`."""

from __future__ import annotations

from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.preconditions import PreconditionSource
from worldsmith.sim.sources.queries import QuerySource, call_key
from worldsmith.sim.sources.records import record_store
from worldsmith.sim.sources.registry import answer_source
from worldsmith.sim.sources.scope import ScopeSource
from worldsmith.worldbook.lookup_rules import learn_lookup_rules
from worldsmith.worldbook.model import Worldbook
from worldsmith.worldbook.record_store import RecordStore

__all__ = ["LOOKUP_KINDS", "LookupSource", "tool_sources"]

LOOKUP_KINDS = frozenset({"query", "empty", "precondition"})


def tool_sources(book: Worldbook | None, store: RecordStore | None = None) -> tuple[QuerySource, PreconditionSource]:
    """The query and precondition sources of a book's look-up tool rules (as curated: only supported ones
    answer, and the tentative empty answers of supported queries, for the route table to judge), over `store`: the record store of its evidence (`record_store`, built here when not given); a book
    built before these rules learns them here."""
    evidence = book.evidence if book is not None else []
    tool_rules = book.tool_rules if book is not None else []
    store = store if store is not None else record_store(evidence, tool_rules)
    rules = [r for r in tool_rules if r.kind in LOOKUP_KINDS]
    if not rules and evidence:
        rules = learn_lookup_rules(evidence, store=store)
    queried = {rule.tool for rule in rules if rule.kind == "query"}
    recorded = (call_key(item.action, item.arguments) for item in evidence
                if item.action in queried and isinstance(item.arguments, dict))
    return QuerySource(rules, store, recorded), PreconditionSource(rules, store)


class LookupSource:
    """Queries and preconditions over one record store: a precondition that holds answers before any query."""

    def __init__(self, context: SourceContext, store: RecordStore | None = None,
                 scope: ScopeSource | None = None) -> None:
        """`store`: the harness's record store (the `records` source's), built from the book when not given;
        `scope`: its refusals the episode contradicts are no empty answer (`ScopeTracker.contradicted`)."""
        self.scope = scope
        book = context.book if context.config.knowledge else None
        self.queries, self.preconditions = tool_sources(book, store if book is not None else None)
        # One episode overlay for both: their reset and observe only keep that view, so it is kept once.
        self.preconditions.view = self.queries.view
        self.gate = context.tracking

    def reset(self, opening: str) -> None:
        self.queries.reset(opening)

    def observe(self, step: Step, observation: str) -> None:
        self.queries.observe(step.name, step.arguments, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        if not self.gate:
            return []
        found = [*self.preconditions.propose(step.name, step.arguments, step.line),
                 *self.queries.propose(step.name, step.arguments, step.line)]
        if self.scope is None or not any(p.source == "query_empty" for p in found):
            return found
        # "nothing matches" worded as a refusal of a thing this episode showed exists: the store lacks it
        contradicted = self.scope.tracker.contradicted(step.name, step.arguments)
        return [p for p in found if p.source != "query_empty" or p.observation not in contradicted]

    def snapshot(self) -> dict[str, Any]:
        return {"queries": self.queries.snapshot(), "preconditions": self.preconditions.snapshot()}


@answer_source("lookups", snapshot_key="lookups", answers=(
        Answer("precondition", rank=-2, trusted=True, per_action=True),
        Answer("precondition_enum", rank=-1, per_action=True, must_win=True),
        Answer("query", rank=32, trusted=True, per_action=True),
        Answer("query_empty", rank=33, per_action=True),
        Answer("query_invented", rank=34, per_action=True, authoritative=True, fix_turns=False)), requires=("records", "scope"))
def _lookups(context: SourceContext) -> AnswerSource:
    """Tool-API look-ups: ids and lists found by attribute, empty answers, learned errors (over the record store
    the `records` source built), and entities found by values the episode was told that no log showed."""
    records = context.source("records").tracker
    source = LookupSource(context, records.store, context.source("scope"))
    source.queries.entities = records
    return source
