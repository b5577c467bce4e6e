"""The tool-API sources of a harness, over one entity store: `query` / `query_empty` and `precondition`."""

from __future__ import annotations

from collections.abc import Sequence

from worldsmith.sim.sources.preconditions import PreconditionSource
from worldsmith.sim.sources.queries import QuerySource
from worldsmith.worldbook.lookup import RecordStore
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.preconditions import learn_preconditions
from worldsmith.worldbook.queries import learn_queries

__all__ = ["tool_sources"]


def tool_sources(evidence: Sequence[Evidence]) -> tuple[QuerySource, PreconditionSource]:
    """The query and precondition sources learned from a book's evidence, sharing its entity store."""
    store = RecordStore.from_evidence(evidence)
    return QuerySource(learn_queries(evidence, store), store), PreconditionSource(learn_preconditions(evidence, store),
                                                                                  store)
