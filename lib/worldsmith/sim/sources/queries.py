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

import orjson

from worldsmith.sim.sources.base import CandidateAnswer
from worldsmith.worldbook.model import RuleStatus
from worldsmith.worldbook.queries import QueryIndex, fill_slots, render_answer, run_query
from worldsmith.worldbook.record_store import EpisodeRecords, RecordStore
from worldsmith.worldbook.toolrules import ToolRule

__all__ = ["QuerySource"]


def _call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call as a key: the tool and its arguments, sorted."""
    return name + " " + orjson.dumps(dict(arguments), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


def _judged(rule: ToolRule) -> bool:
    """Whether an empty answer is proposed: a supported one, or a tentative one of a supported query (its store
    may lack the entity: `query_empty` is never trusted unmeasured, so the route table's held-out record per tool
    decides whether "nothing matches" beats nearest evidence)."""
    return rule.executable or (rule.status == RuleStatus.TENTATIVE and rule.query is not None
                               and rule.query.status == RuleStatus.SUPPORTED)


class QuerySource:
    """Answers of supported query rules over the entity store and the episode (module doc)."""

    def __init__(self, rules: Sequence[ToolRule], store: RecordStore) -> None:
        """From the executable tool rules of kind `query` (answers) and `empty` (their no-match text)."""
        self.rules = {r.tool: r.query for r in rules if r.kind == "query" and r.executable and r.query is not None}
        self.empties = {r.tool: r for r in rules if r.kind == "empty" and r.query is not None and _judged(r)}
        self.indexes = {tool: QueryIndex(rule, store) for tool, rule in self.rules.items()}
        self.indexes |= {tool: QueryIndex(rule.query, store) for tool, rule in self.empties.items()
                         if tool not in self.rules and rule.query is not None}
        self.view = EpisodeRecords(store)
        self.reset()

    def reset(self, opening: str = "") -> None:
        self.view.reset()
        self.answered: dict[str, str] = {}  # call key -> this episode's latest answer to that query call

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        self.view.observe(arguments, observation)
        if name in self.indexes:
            self.answered[_call(name, arguments)] = observation

    def propose(self, name: str, arguments: Mapping[str, Any], line: str = "") -> list[CandidateAnswer]:
        empty = self.empties.get(name)
        rule = self.rules.get(name) or (empty.query if empty is not None else None)
        if rule is None:
            return []
        found = run_query(rule, self.view, arguments, self.indexes[name])
        if found is None:
            return []
        compared = ", ".join(f"{m.argument} ~ {'.'.join(m.path)} ({m.mode})" for m in rule.matches)
        if found:
            answer = render_answer(rule, found) if name in self.rules else None
            if answer is None:
                return []
            read = [{"key": [rule.kind, ident], "before": record, "after": record} for ident, record in found[:20]]
            return [CandidateAnswer("query", answer, outcome="success", records=read, notes=[
                f"the {rule.kind} records whose {compared}: {', '.join(i for i, _ in found[:5])}"])]
        text = fill_slots(empty.template, arguments) if empty is not None else None
        if text is None:
            return []
        earlier = self.answered.get(_call(name, arguments))
        if earlier is not None and earlier.strip() != text.strip():
            return []  # this episode answered the same call with a match: "nothing matches" is the store's gap
        return [CandidateAnswer("query_empty", text, rule=empty.id if empty else None,
                         notes=[f"no known {rule.kind} record has {compared}"])]

    def snapshot(self) -> dict[str, Any]:
        return {"queries": sorted(self.rules), "empty answers": sorted(self.empties), "records seen": sorted(
            f"{kind}={ident}" for kind, records in self.view.seen.items() for ident in records)[:50]}
