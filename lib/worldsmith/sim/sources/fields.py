"""Writes to JSON tool state as arithmetic on what the episode showed: a balance minus a price, a list with
an item appended, an id one past the last.

Many tool APIs answer a write with the fields it changed (`fillFuelTank(fuelAmount=7)` -> `{"fuelLevel":
49.0}`, `add_to_watchlist(stock="AAPL")` -> `{"watchlist": ["NVDA", "AAPL"]}`). `FieldTracker` keeps the
last value every top-level field of a JSON answer showed in the episode, and learns from the evidence, per
(action, field), the relation the answered value has to it and to the call's arguments:

- `add` / `sub`: the last value plus / minus a numeric argument;
- `append` / `remove`: the last list with an argument appended / removed;
- `next`: an integer one past the last (a fresh id);
- `keep`: the last value unchanged; `echo`: an argument's value; `const`: the same value in every answer.

A relation is kept when at least `MIN_SUPPORT` answers show it and it holds in `SHARE` of the answers where
it could be checked. A write (an action with a changing relation: `add` to `next`) whose usual answer (its most
common key list) has a kept relation for every field is proposed (`fields`), in the tool's own JSON layout;
reads are left to episode memory and the entity records. Like every tracker it proposes; the route table
decides.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, TrackerSource
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.record_store import dump_layout, layout_of, parse_structured
from worldsmith.worldbook.summaries import EpisodeSummaries

__all__ = ["MIN_SUPPORT", "SHARE", "FieldTracker", "Relation"]

MIN_SUPPORT = 2
SHARE = 0.8
Relation = tuple[str, str | None]  # (kind, the argument it uses); `const` keeps its value in `FieldTracker.consts`
_ORDER = ("add", "sub", "append", "remove", "next", "echo", "keep", "const")  # the first that fits explains a value
_WRITES = frozenset({"add", "sub", "append", "remove", "next"})  # relations that change a field
_UNSEEN: Any = object()  # a field the episode has not shown yet


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _relations(value: Any, last: Any, arguments: Mapping[str, Any]) -> set[Relation]:
    """Every relation `value` has to the field's last value and the arguments."""
    found: set[Relation] = set()
    known = last is not _UNSEEN
    for name, argument in arguments.items():
        if known and _number(value) and _number(last) and _number(argument):
            if abs(value - (last + argument)) < 1e-9:
                found.add(("add", name))
            if abs(value - (last - argument)) < 1e-9:
                found.add(("sub", name))
        if known and isinstance(value, list) and isinstance(last, list) and not isinstance(argument, dict | list):
            if value == [*last, argument]:
                found.add(("append", name))
            if argument in last and value == [item for item in last if item != argument]:
                found.add(("remove", name))
        if value == argument and not isinstance(value, bool):
            found.add(("echo", name))
    if known and isinstance(value, int) and isinstance(last, int) and not isinstance(value, bool) and value == last + 1:
        found.add(("next", None))
    if known and value == last:
        found.add(("keep", None))
    return found


def _answer(text: str) -> dict[str, Any] | None:
    value = parse_structured(text)  # cheap for prose: most text worlds' answers are skipped without a parse
    return value if isinstance(value, dict) else None


class FieldTracker:
    """Learned field relations per action, and the last value of every field in one episode (see module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = (), *, summaries: EpisodeSummaries | None = None) -> None:
        """`summaries`: observations' layouts read once (`worldbook.summaries`)."""
        self.summaries = summaries
        self.relations: dict[tuple[str, str], Relation] = {}  # (action, field) -> how its answered value comes
        self.consts: dict[tuple[str, str], Any] = {}
        self.keys: dict[str, list[str]] = {}  # action -> its usual answer's keys, in order
        self.layout: dict[str, tuple[str, str, bool]] = {}
        self._learn(evidence)
        self.reset()

    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        fits: dict[tuple[str, str], Counter[Relation]] = defaultdict(Counter)
        checked: Counter[tuple[str, str]] = Counter()  # answers where the field's last value was known
        seen: Counter[tuple[str, str]] = Counter()
        values: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        keys: dict[str, Counter[tuple[str, ...]]] = defaultdict(Counter)
        layouts: dict[str, Counter[tuple[str, str, bool]]] = defaultdict(Counter)
        for items in group_by_episode(evidence).values():
            last: dict[str, Any] = {}
            for item in items:
                answer = _answer(item.observation)
                if answer is None:
                    continue
                arguments = item.arguments if isinstance(item.arguments, dict) else {}
                keys[item.action][tuple(answer)] += 1
                layout = layout_of(item.observation, self.summaries)
                if layout is not None:
                    layouts[item.action][layout] += 1
                for field, value in answer.items():
                    pair = (item.action, field)
                    previous = last.get(field, _UNSEEN)
                    seen[pair] += 1
                    checked[pair] += previous is not _UNSEEN
                    values[pair][json.dumps(value, sort_keys=True)] += 1
                    for relation in _relations(value, previous, arguments):
                        fits[pair][relation] += 1
                last.update(answer)
        for pair, counts in fits.items():
            for relation in sorted(counts, key=lambda r: (_ORDER.index(r[0]), str(r[1]))):
                needs_last = relation[0] not in ("echo",)
                cases = checked[pair] if needs_last else seen[pair]
                if counts[relation] >= MIN_SUPPORT and counts[relation] >= SHARE * cases:
                    self.relations[pair] = relation
                    break
        for pair, shown in values.items():
            text, count = shown.most_common(1)[0]
            if pair not in self.relations and count >= MIN_SUPPORT and count == seen[pair]:
                self.relations[pair] = ("const", None)
                self.consts[pair] = json.loads(text)
        self.keys = {action: list(counts.most_common(1)[0][0]) for action, counts in keys.items()}
        self.layout = {action: counts.most_common(1)[0][0] for action, counts in layouts.items()}

    def reset(self, opening: str = "") -> None:
        self.last: dict[str, Any] = {}

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        answer = _answer(observation)
        if answer is not None:
            self.last.update(answer)

    def _value(self, name: str, field: str, arguments: Mapping[str, Any]) -> Any:
        kind, argument = self.relations.get((name, field), ("", None))
        last = self.last.get(field, _UNSEEN)
        given = arguments.get(argument, _UNSEEN) if argument is not None else _UNSEEN
        if kind == "const":
            return self.consts[(name, field)]
        if kind == "echo":
            return given
        if last is _UNSEEN:
            return _UNSEEN
        if kind == "keep":
            return last
        if kind == "next":
            return last + 1 if isinstance(last, int) else _UNSEEN
        if kind in ("add", "sub") and _number(last) and _number(given):
            return last + given if kind == "add" else last - given
        if kind in ("append", "remove") and isinstance(last, list) and given is not _UNSEEN:
            return [*last, given] if kind == "append" else [item for item in last if item != given]
        return _UNSEEN

    def propose(self, name: str, arguments: Mapping[str, Any], line: str = "") -> list[CandidateAnswer]:
        keys, layout = self.keys.get(name), self.layout.get(name)
        if not keys or layout is None or not any(self.relations.get((name, k), ("",))[0] in _WRITES for k in keys):
            return []  # no field the call changes: a read, which episode memory and the entity records answer
        answer = {field: self._value(name, field, arguments) for field in keys}
        if any(value is _UNSEEN for value in answer.values()):
            return []
        text = dump_layout(answer, layout)
        how = ", ".join(f"{k}: {self.relations[(name, k)][0]}" for k in keys)
        return [CandidateAnswer("fields", text, notes=[f"each field from the episode's last values and the call ({how})"])]

    def snapshot(self) -> dict[str, Any]:
        return {"fields": sorted(self.last)}


@answer_source("fields", snapshot_key="fields", answers=(Answer("fields", rank=40, per_action=True),))
def _fields(context: SourceContext) -> AnswerSource:
    """JSON writes as arithmetic on the episode's last values."""
    return TrackerSource(FieldTracker(context.evidence, summaries=context.summaries), gate=context.tracking)
