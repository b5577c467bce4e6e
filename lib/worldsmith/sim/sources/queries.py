"""The `query` and `query_empty` sources: a query tool answered from the entity store and the episode's records.

A supported query rule (`worldbook.queries`) finds the records whose attributes match the call's arguments
among the records of the construction episodes (the book's entity store) and those this episode showed, and
renders their ids in the tool's own form (`query`). When none matches, the rule's learned empty answer with the
arguments slotted is proposed under its own name (`query_empty`): a held-out task may name a real entity the
store never saw, so the route table judges per tool whether "nothing matches" is to be believed.

When nothing matches but every value the call compares was told to the session (the task, the opening, an earlier
answer: the user gave their email), the entity exists and no log showed it: `query_invented` answers with a fresh id
of the kind's shape (`UnseenEntities.fresh_id`, seeded by the call, so the same call gets the same id), and once that
answer is committed the records source holds the entity with the compared values as fields
(`RecordTracker.adopt`), so reading it answers about it: the user found by their email has that email.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from worldsmith.sim.sources.base import CandidateAnswer
from worldsmith.sim.sources.unseen import mentions, seeded, unechoed
from worldsmith.worldbook.lookup_specs import QueryRule
from worldsmith.worldbook.model import RuleStatus
from worldsmith.worldbook.queries import QueryIndex, fill_slots, render_answer, run_query
from worldsmith.worldbook.record_store import EpisodeRecords, RecordStore
from worldsmith.worldbook.toolrules import ToolRule

if TYPE_CHECKING:
    from worldsmith.sim.sources.records import RecordTracker

__all__ = ["QuerySource", "call_key"]


def call_key(name: str, arguments: Mapping[str, Any]) -> str:
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

    def __init__(self, rules: Sequence[ToolRule], store: RecordStore, recorded: Iterable[str] = ()) -> None:
        """From the executable tool rules of kind `query` (answers) and `empty` (their no-match text); `recorded`:
        the call keys (`call_key`) the evidence answered, whose entities exist in the book whatever the store says."""
        self.recorded = frozenset(recorded)
        self.rules = {r.tool: r.query for r in rules if r.kind == "query" and r.executable and r.query is not None}
        self.empties = {r.tool: r for r in rules if r.kind == "empty" and r.query is not None and _judged(r)}
        self.indexes = {tool: QueryIndex(rule, store) for tool, rule in self.rules.items()}
        self.indexes |= {tool: QueryIndex(rule.query, store) for tool, rule in self.empties.items()
                         if tool not in self.rules and rule.query is not None}
        self.view = EpisodeRecords(store)
        self.reset()

    entities: RecordTracker | None = None  # the records source's tracker: fresh ids, and the entities invented here

    def reset(self, opening: str = "") -> None:
        self.view.reset()
        self.answered: dict[str, str] = {}  # call key -> this episode's latest answer to that query call
        self.texts: list[str] = [opening]  # what the episode was told and answered
        self.invented: dict[str, tuple[str, str, dict[str, Any], str]] = {}  # call key -> (kind, id, record, answer)

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        self.view.observe(arguments, observation)
        self.texts.append(unechoed(observation, arguments))
        if name in self.indexes:
            key = call_key(name, arguments)
            self.answered[key] = observation
            made = self.invented.get(key)
            if made is not None and made[3] == observation and self.entities is not None:
                self.entities.adopt(made[0], made[1], made[2])

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
        earlier = self.answered.get(call_key(name, arguments))
        if earlier is None:
            made = self._invent(name, rule, arguments)
            if made is not None:
                return [made]
        text = fill_slots(empty.template, arguments) if empty is not None else None
        if text is None:
            return []
        if earlier is not None and earlier.strip() != text.strip():
            return []  # this episode answered the same call with a match: "nothing matches" is the store's gap
        return [CandidateAnswer("query_empty", text, rule=empty.id if empty else None,
                         notes=[f"no known {rule.kind} record has {compared}"])]

    def _invent(self, name: str, rule: QueryRule, arguments: Mapping[str, Any]) -> CandidateAnswer | None:
        """An entity no record shows, found by values this episode was told (module doc); None otherwise."""
        given = [m for m in rule.matches if m.argument in arguments]
        if self.entities is None or name not in self.rules or rule.form not in ("bare", "json", "field") or not all(
                isinstance(arguments[m.argument], str) and any(mentions(t, arguments[m.argument]) for t in self.texts)
                for m in given):
            return None
        example = next(iter(self.view.store.of_kind(rule.kind)), None)
        if example is None:
            return None
        key = call_key(name, arguments)
        if key in self.recorded:  # the evidence answered this very call: the entity is the book's, not unseen
            return None
        ident = str(self.entities.unseen.fresh_id(rule.kind, example, seeded("query", key)))
        record: dict[str, Any] = {rule.kind: ident}
        for match in given:
            at = record
            for step in match.path[:-1]:
                at = at.setdefault(step, {})
            at[match.path[-1]] = arguments[match.argument]
        answer = render_answer(rule, [(ident, record)])
        if answer is None:
            return None
        self.invented[key] = (rule.kind, ident, record, answer)
        told = ", ".join(f"{m.argument}={arguments[m.argument]!r}" for m in given)
        return CandidateAnswer("query_invented", answer, outcome="success", notes=[
            f"no known {rule.kind} record matches, but this episode was told {told}: a {rule.kind} no log showed, "
            f"invented as {ident!r}"], records=[{"key": [rule.kind, ident], "before": None, "after": record,
                                                "origin": "invented"}])

    def snapshot(self) -> dict[str, Any]:
        return {"queries": sorted(self.rules), "empty answers": sorted(self.empties), "records seen": sorted(
            f"{kind}={ident}" for kind, records in self.view.seen.items() for ident in records)[:50]}
