"""JSON tool results as records, the argument that selects a record, and the cross-episode entity store.

    for key, ident, record in iter_records(json.loads(observation)): ...   # every identified object, any depth
    selectors = learn_selectors(evidence)          # {tool: (argument, id key)}: get_order(order_id) -> order_id
    store = EntityStore.from_evidence(evidence)    # each record's initial version, merged across episodes
    store.get("order_id", "#W123")                 # its stable fields (None when no episode showed it)

A *record* is a JSON object holding an identifier field (`_ID_KEY`: `id`, `*_id`, `*_number`, `name`, ...),
keyed by (id key, id value as text). A tool's *selector* is the argument whose value equals the id of the
record its results are (or hold, for a write answered with a few fields): the argument names the entity the
call reads or acts on.

The store holds, per record, its *initial* version in each construction episode: the first sighting, by a
tool that never changed a record it showed (a reader), before any call of another tool named the record's
id in its arguments (a write may have changed it since). Fields on which episodes' initial versions disagree
are *unstable* (the record differs per episode: another task's world) and left out. One pass over the
evidence with dict indexes: linear in the number of turns.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from worldsmith.worldbook.induce import group_by_episode
from worldsmith.worldbook.model import Evidence

__all__ = [
    "ID_KEY",
    "EntityStore",
    "Layout",
    "StoredRecord",
    "arguments_of",
    "dump_layout",
    "iter_records",
    "own_records",
    "json_layout",
    "learn_readers",
    "learn_selectors",
    "parse_json",
    "record_key",
    "top_record",
]

ID_KEY = re.compile(r"(^id$|_id$|Id$|^uuid$|_uuid$|_number$|^number$|_code$|^code$|_name$|^name$|^path$|^symbol$)",
                    re.IGNORECASE)
Layout = tuple[str, str, bool]  # (item separator, key separator, ensure_ascii)
RecordKey = tuple[str, str]  # (id key, id value as text)
MIN_SELECTOR_SHARE = 0.5  # an argument selects when it names the result's record on at least half the tool's turns
READER_CHANGE_SHARE = 0.1  # a tool that showed a known record changed on more of its sightings than this writes


def parse_json(text: str) -> Any:
    """The JSON value of a text, or None (cheaply: only texts that start like an object or a list are parsed)."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def json_layout(text: str) -> Layout | None:
    """(item separator, key separator, ensure_ascii) that re-serialize `text` exactly, or None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    for separators in ((", ", ": "), (",", ":"), (",", ": ")):
        for ascii_only in (False, True):
            if json.dumps(value, separators=separators, ensure_ascii=ascii_only) == text.strip():
                return separators[0], separators[1], ascii_only
    return None


def dump_layout(value: Any, layout: Layout) -> str:
    """`value` as JSON in a tool's own layout."""
    return json.dumps(value, separators=(layout[0], layout[1]), ensure_ascii=layout[2])


@lru_cache(maxsize=65536)
def _id_name(key: str) -> bool:
    return bool(ID_KEY.search(key))


def _identifier(key: Any, item: Any) -> bool:
    return isinstance(item, str | int) and not isinstance(item, bool) and _id_name(str(key))


def iter_records(value: Any) -> Iterable[tuple[str, Any, dict[str, Any]]]:
    """(id key, id value, record) for every object at any depth holding an identifier field."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                if _identifier(key, item):
                    yield str(key), item, node
                if isinstance(item, dict | list):
                    stack.append(item)
        elif isinstance(node, list):
            stack.extend(node)


def own_records(value: Any) -> Iterable[tuple[str, Any, dict[str, Any]]]:
    """(id key, id value, record) for every object at any depth, by its own identifier: the first identifier field
    in its key order (an order `{"order_id": ..., "user_id": ...}` is the order, not the user)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            own = next(((k, v) for k, v in node.items() if _identifier(k, v)), None)
            if own is not None:
                yield str(own[0]), own[1], node
            stack.extend(item for item in node.values() if isinstance(item, dict | list))
        elif isinstance(node, list):
            stack.extend(node)


def top_record(value: Any, argument_value: Any) -> tuple[str, Any] | None:
    """(id key, id value) when the whole result is the record the argument names."""
    if not isinstance(value, dict):
        return None
    for key, item in value.items():
        if item == argument_value and _identifier(key, item):
            return str(key), item
    return None


def record_key(key: str, ident: Any) -> RecordKey:
    return (key, str(ident))


def arguments_of(item: Evidence) -> dict[str, Any]:
    return item.arguments if isinstance(item.arguments, dict) else {}


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _answer_votes(value: Any, arguments: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(argument, id key) pairs where the argument names the answer's record: the whole answer's own id (its first
    identifier field), else another identifier of the whole answer, else a record inside it."""
    scalars = {name: str(argument) for name, argument in arguments.items() if _scalar(argument)}
    if isinstance(value, dict):
        ids = [(str(k), str(v)) for k, v in value.items() if _identifier(k, v)]
        for found in (ids[:1], ids[1:]):
            votes = {(name, key) for key, ident in found for name, text in scalars.items() if text == ident}
            if votes:
                return votes
    inner: dict[str, set[str]] = defaultdict(set)
    for key, ident, _ in iter_records(value):
        inner[str(ident)].add(key)
    return {(name, key) for name, text in scalars.items() for key in inner.get(text, ())}


def learn_selectors(evidence: Sequence[Evidence]) -> dict[str, tuple[str, str]]:
    """Per tool, (argument, id key) when the argument's value is the id of a record its results show (the whole
    result, else one at any depth: a write answered with `{"order_id": ..., "status": ...}` or a wrapper), on at
    least `MIN_SELECTOR_SHARE` of the tool's JSON answers. A tool whose answers show no record (a write answered
    "Return requested.") selects by the argument whose value is the id of a record the episode showed before."""
    votes: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    turns: Counter[str] = Counter()
    earlier: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)  # votes from records shown before the call
    for items in group_by_episode(evidence).values():
        shown: dict[str, set[str]] = defaultdict(set)  # id value as text -> id keys the episode showed it under
        for item in items:
            arguments = arguments_of(item)
            for name, argument in arguments.items():
                if _scalar(argument):
                    for key in shown.get(str(argument), ()):
                        earlier[item.action][(name, key)] += 1
            value = parse_json(item.observation)
            if value is None:
                continue
            for key, ident, _ in own_records(value):
                shown[str(ident)].add(key)
            if arguments:
                turns[item.action] += 1
                votes[item.action].update(_answer_votes(value, arguments))
    out: dict[str, tuple[str, str]] = {}
    for tool, counts in votes.items():
        if not counts:
            continue
        pair, count = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        if count >= max(1, MIN_SELECTOR_SHARE * turns[tool]):
            out[tool] = pair
    for tool, counts in earlier.items():
        if tool not in out and tool not in turns and counts:
            out[tool] = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
    return out


def learn_readers(evidence: Sequence[Evidence]) -> set[str]:
    """The tools that never (or rarely: `READER_CHANGE_SHARE`) showed a record changed since the episode last
    showed it: what they answer is the record as it is, so their sightings are versions, not effects."""
    same: Counter[str] = Counter()
    changed: Counter[str] = Counter()
    shown: set[str] = set()
    for items in group_by_episode(evidence).values():
        last: dict[RecordKey, dict[str, Any]] = {}
        for item in items:
            value = parse_json(item.observation)
            if value is None:
                continue
            shown.add(item.action)
            for key, ident, record in own_records(value):
                before = last.get(record_key(key, ident))
                if before is not None:
                    common = before.keys() & record.keys()
                    differs = any(before[k] != record[k] for k in common)
                    (changed if differs else same)[item.action] += 1
                last[record_key(key, ident)] = record
    return {tool for tool in shown if changed[tool] <= READER_CHANGE_SHARE * (changed[tool] + same[tool])}


@dataclass
class StoredRecord:
    """One record's initial version merged over the episodes that showed it."""

    key: RecordKey
    fields: dict[str, Any]  # the stable fields, in the key order of the first sighting
    unstable: set[str] = field(default_factory=set)  # fields whose initial versions disagree across episodes
    episodes: list[str] = field(default_factory=list)  # the episodes that showed an initial version
    turns: list[str] = field(default_factory=list)  # the first sighting's turn id per episode

    @property
    def stable(self) -> bool:
        """Every field agrees across the episodes that showed the record."""
        return not self.unstable


class EntityStore:
    """Records' initial versions from construction evidence, merged across episodes (see the module doc)."""

    def __init__(self) -> None:
        self.records: dict[RecordKey, StoredRecord] = {}
        self.by_ident: dict[str, list[RecordKey]] = defaultdict(list)  # id value as text -> its record keys

    @classmethod
    def from_evidence(cls, evidence: Sequence[Evidence], readers: set[str] | None = None) -> EntityStore:
        store = cls()
        readers = learn_readers(evidence) if readers is None else readers
        for episode, items in group_by_episode(evidence).items():
            touched: set[str] = set()  # ids another tool's arguments named earlier in the episode
            seen: set[RecordKey] = set()
            for item in items:
                value = parse_json(item.observation) if item.action in readers else None
                if value is not None:
                    for key, ident, record in own_records(value):
                        rkey = record_key(key, ident)
                        if rkey not in seen and str(ident) not in touched:
                            store._merge(rkey, record, episode, item.turn_id)
                        seen.add(rkey)
                if item.action not in readers:
                    touched.update(str(v) for v in arguments_of(item).values() if _scalar(v))
        return store

    def _merge(self, key: RecordKey, record: Mapping[str, Any], episode: str, turn_id: str) -> None:
        stored = self.records.get(key)
        if stored is None:
            self.records[key] = StoredRecord(key, dict(record), episodes=[episode], turns=[turn_id])
            self.by_ident[key[1]].append(key)
            return
        if episode in stored.episodes:
            return
        stored.episodes.append(episode)
        stored.turns.append(turn_id)
        for name, value in record.items():  # a field one sighting lacks is not a disagreement (another projection)
            if name in stored.unstable:
                continue
            if name not in stored.fields:
                stored.fields[name] = value
            elif stored.fields[name] != value:
                stored.unstable.add(name)
                del stored.fields[name]

    def get(self, key: str, ident: Any, *, stable_only: bool = True) -> dict[str, Any] | None:
        """The record's stable fields (a copy); None when no episode showed it, or (with `stable_only`) when some
        of its fields differ across episodes."""
        stored = self.records.get(record_key(key, ident))
        if stored is None or (stable_only and not stored.stable):
            return None
        return json.loads(json.dumps(stored.fields))

    def keys_for(self, ident: Any) -> list[RecordKey]:
        """Every record key whose id value is `ident` (a record may be named by `id` in one tool, `order_id` in
        another)."""
        return list(self.by_ident.get(str(ident), ()))

    def __len__(self) -> int:
        return len(self.records)

    def summary(self) -> dict[str, Any]:
        return {"records": len(self.records), "stable": sum(r.stable for r in self.records.values()),
                "id_keys": dict(Counter(k for k, _ in self.records).most_common())}
