"""Entity records read from JSON tool results, keyed by their identifiers at any depth: the `entities` source.

`EntityTracker` learns from evidence which argument selects the record a call answers with
(`get_reservation_details(reservation_id)` answers with the record whose `reservation_id` equals the
argument); a read of a record already shown in the episode (or changed since by a write that returned
it) is answered with that record in the tool's own JSON layout and key order, and a write that always
sets the same fields of the record it answers with (`cancel_reservation` -> status "cancelled") is
answered with the record as last shown, those fields set (`entity`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, TrackerSource
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.record_store import (
    ID_KEY,
    dump_layout,
    iter_records,
    layout_of,
    parse_structured,
    structured_layout,
    top_record,
)
from worldsmith.worldbook.summaries import EpisodeSummaries

__all__ = ["EntityTracker", "structured_layout"]

# The JSON record primitives live in `worldbook.record_store` (the builder's write learning and the entity store read
# results the same way); the names below are the ones this module has always used.
_ID_KEY = ID_KEY
_records = iter_records
_top_record = top_record


class EntityTracker:
    """Records keyed by identifiers, read from JSON tool results at any depth (see the module doc).

    Learned from evidence: which argument selects the record a call answers with (`selector`), how each
    action writes JSON (`layout`), and for writes that answer with the record they changed, the fields
    they set to the same value every time (`sets`: `cancel_reservation` -> `{"status": "cancelled"}`).
    """

    def __init__(self, evidence: Sequence[Evidence] = (), *, summaries: EpisodeSummaries | None = None) -> None:
        """`summaries`: observations' layouts read once (`worldbook.summaries`)."""
        self.summaries = summaries
        self.selector: dict[str, tuple[str, str]] = {}  # action -> (argument, id key) its result record is keyed by
        self.layout: dict[str, tuple[str, str, bool]] = {}  # action -> how its results are serialized
        self.sets: dict[str, dict[str, Any]] = {}  # action -> fields it sets on the record it answers with
        self._learn(evidence)
        self.reset()

    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        votes: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
        turns: Counter[str] = Counter()
        layouts: dict[str, Counter[tuple[str, str, bool]]] = defaultdict(Counter)
        for item in evidence:
            value = parse_structured(item.observation)
            if value is None:
                continue
            layout = layout_of(item.observation, self.summaries)
            if layout is not None:
                layouts[item.action][layout] += 1
            turns[item.action] += 1
            for name, argument in _arguments(item).items():
                found = _top_record(value, argument)
                if found is not None:
                    votes[item.action][(name, found[0])] += 1
        for action, counts in votes.items():
            (pair, count), = counts.most_common(1)
            if count >= max(1, turns[action] // 2):
                self.selector[action] = pair
        self.layout = {action: counts.most_common(1)[0][0] for action, counts in layouts.items()}
        changes: dict[str, Counter[str]] = defaultdict(Counter)
        for items in group_by_episode(evidence).values():
            self.reset()
            for item in items:
                before = self._selected(item.action, _arguments(item))
                value = parse_structured(item.observation)
                if before is not None and isinstance(value, dict) and value != before:
                    changed = {k: v for k, v in value.items() if before.get(k, _ABSENT) != v}
                    if set(value) == set(before) and changed:
                        changes[item.action][json.dumps(changed, sort_keys=True)] += 1
                self.observe(item.action, _arguments(item), item.observation)
        for action, seen_changes in changes.items():
            text, count = seen_changes.most_common(1)[0]
            if count >= 2 and count * 2 > sum(seen_changes.values()):
                self.sets[action] = json.loads(text)

    def reset(self, opening: str = "") -> None:
        self.records: dict[tuple[str, str], dict[str, Any]] = {}

    def _selected(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        selector = self.selector.get(name)
        if selector is None or selector[0] not in arguments:
            return None
        return self.records.get((selector[1], str(arguments[selector[0]])))

    def observe(self, name: str, arguments: dict[str, Any], observation: str) -> None:
        value = parse_structured(observation)
        if value is None:
            return
        for key, ident, record in _records(value):
            self.records[(key, str(ident))] = record

    def propose(self, name: str, arguments: dict[str, Any], line: str = "") -> list[CandidateAnswer]:
        record = self._selected(name, arguments)
        layout = self.layout.get(name)
        if record is None or layout is None:
            return []
        key, argument = self.selector[name][1], arguments[self.selector[name][0]]
        notes = [f"the record {key}={argument!r} as last shown"]
        if name in self.sets:
            record = {**record, **self.sets[name]}
            notes.append(f"with what {name!r} sets: {json.dumps(self.sets[name])}")
        text = dump_layout(record, layout)
        return [CandidateAnswer("entity", text, notes=notes)]

    def snapshot(self) -> dict[str, Any]:
        return {"records": sorted(f"{k}={v}" for k, v in self.records)}


_ABSENT = object()


def _arguments(item: Evidence) -> dict[str, Any]:
    return item.arguments if isinstance(item.arguments, dict) else {}


@answer_source("entities", snapshot_key="entities", answers=(Answer("entity", rank=30, trusted=True),))
def _entities(context: SourceContext) -> AnswerSource:
    """Entity records from JSON tool results."""
    return TrackerSource(EntityTracker(context.evidence, summaries=context.summaries), gate=context.tracking)
