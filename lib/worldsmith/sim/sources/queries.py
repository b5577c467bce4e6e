"""The `query` and `query_empty` sources: a query tool answered from the entity store and the episode's records.

A supported query rule (`worldbook.queries`) finds the records whose attributes match the call's arguments
among the records of the construction episodes (the book's entity store) and those this episode showed, and
renders their ids in the tool's own form (`query`). When none matches, the rule's learned empty answer with the
arguments slotted is proposed under its own name (`query_empty`): a held-out task may name a real entity the
store never saw, so the route table judges per tool whether "nothing matches" is to be believed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worldsmith.sim.trackers import Proposal
from worldsmith.worldbook.lookup import EpisodeRecords, RecordStore
from worldsmith.worldbook.queries import QueryIndex, QueryRule, fill_slots, render_answer, run_query

__all__ = ["QuerySource"]


class QuerySource:
    """Answers of supported query rules over the entity store and the episode (module doc)."""

    def __init__(self, rules: Sequence[QueryRule], store: RecordStore) -> None:
        self.rules = {rule.action: rule for rule in rules if rule.status == "supported"}
        self.indexes = {action: QueryIndex(rule, store) for action, rule in self.rules.items()}
        self.view = EpisodeRecords(store)
        self.reset()

    def reset(self, opening: str = "") -> None:
        self.view.reset()

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        self.view.observe(arguments, observation)

    def propose(self, name: str, arguments: Mapping[str, Any], line: str = "") -> list[Proposal]:
        rule = self.rules.get(name)
        if rule is None:
            return []
        found = run_query(rule, self.view, arguments, self.indexes[name])
        if found is None:
            return []
        compared = ", ".join(f"{m.argument} ~ {'.'.join(m.path)} ({m.mode})" for m in rule.matches)
        if found:
            answer = render_answer(rule, found)
            if answer is None:
                return []
            return [Proposal("query", answer, outcome="success", notes=[
                f"the {rule.kind} records whose {compared}: {', '.join(i for i, _ in found[:5])}"])]
        if rule.empty is None:
            return []
        text = fill_slots(rule.empty, arguments)
        if text is None:
            return []
        return [Proposal("query_empty", text, notes=[f"no known {rule.kind} record has {compared}"])]

    def snapshot(self) -> dict[str, Any]:
        return {"queries": sorted(self.rules), "records seen": sorted(
            f"{kind}={ident}" for kind, records in self.view.seen.items() for ident in records)[:50]}
