"""Structured tool results (JSON, YAML, Python literals: `answer_formats`) as records, the argument that selects a record, and the cross-episode record store.

    for key, ident, record in iter_records(json.loads(observation)): ...   # every identified object, any depth
    selectors = learn_selectors(evidence)          # {tool: (argument, id key)}: get_order(order_id) -> order_id
    store = RecordStore.from_evidence(evidence)    # each record's initial version, merged across episodes
    store.get("order_id", "#W123")                 # its stable fields (None when no episode showed it)
    store.entity("user_id", "u1"); store.of_kind("order_id")   # what query and precondition rules look up
    view = EpisodeRecords(store)                   # one episode's latest versions laid over the store

A *record* is an object holding an identifier field (`_ID_KEY`: `id`, `id_`, `*_id`, `*_number`, `name`, ...),
keyed by (id key, id value as text). A tool's *selector* is the argument whose value equals the id of the
record its results are (or hold, for a write answered with a few fields): the argument names the entity the
call reads or acts on.

The store holds, per record, its *initial* version in each construction episode: the first sighting, by a
tool that never changed a record it showed (a reader), before any call of another tool named the record's
id in its arguments (a write may have changed it since). Fields on which episodes' initial versions disagree
are *unstable* (the record differs per episode: another task's world) and left out; each record keeps the
episodes and trajectory families (tasks) that showed it. One pass over the evidence with dict indexes: linear
in the number of turns. It is built once per book build (write and look-up rules) and once per harness
(shared by the `records` and `lookups` sources).

An answer is read two ways into the one store, because writes and look-ups name a record differently: by its
own identifier (`own_records`: the first identifier field, where a `name` identifies too) for write rules and
record reads, and by *entity kind* (`entity_records`: `id` / `*_id` only, a name being an attribute a query
matches; a whole answer that names no id of its own keyed by the argument that selected it) for queries and
preconditions.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from worldsmith.worldbook.answer_formats import Layout, dump_layout, parse_structured, structured_layout
from worldsmith.worldbook.induce import group_by_episode
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.summaries import EpisodeSummaries, summarized

__all__ = [
    "ENTITY_ID",
    "ID_KEY",
    "OWN_ID",
    "EpisodeRecords",
    "Layout",
    "RecordStore",
    "StoredRecord",
    "arguments_of",
    "dump_layout",
    "entity_records",
    "id_shape",
    "iter_records",
    "own_records",
    "structured_layout",
    "learn_readers",
    "learn_selectors",
    "learn_unchanging",
    "parse_structured",
    "record_key",
    "top_record",
    "layout_of",
]

# Keys that name an entity's own identifier (`id_`: a Python model's `id`); the other id patterns extend this one.
ENTITY_ID = r"^id$|^id_$|_id$|Id$|^uuid$|_uuid$"
ID_KEY = re.compile(rf"({ENTITY_ID}|_number$|^number$|_code$|^code$|_name$|^name$|^path$|^symbol$)", re.IGNORECASE)
RecordKey = tuple[str, str]  # (id key, id value as text)
MIN_SELECTOR_SHARE = 0.5  # an argument selects when it names the result's record on at least half the tool's turns
READER_CHANGE_SHARE = 0.1  # a tool that showed a known record changed on more of its sightings than this writes


def layout_of(text: str, summaries: EpisodeSummaries | None = None) -> Layout | None:
    """`structured_layout(text)`, read once per text into `summaries` when given (the cross-fit folds' learners and
    trackers ask it of the same observations)."""
    return structured_layout(text) if summaries is None else summaries.of_text("structured_layout", text,
                                                                                structured_layout)


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


_Votes = dict[str, Counter[tuple[str, str]]]


def _selector_votes(items: Sequence[Evidence]) -> tuple[_Votes, Counter[str], _Votes]:
    """One episode's selector votes: (per tool, its answers' votes), (per tool, its JSON answers to calls with
    arguments), (per tool, votes from records the episode showed before the call): what `learn_selectors` adds up."""
    votes: _Votes = defaultdict(Counter)
    turns: Counter[str] = Counter()
    earlier: _Votes = defaultdict(Counter)  # votes from records shown before the call
    shown: dict[str, set[str]] = defaultdict(set)  # id value as text -> id keys the episode showed it under
    for item in items:
        arguments = arguments_of(item)
        for name, argument in arguments.items():
            if _scalar(argument):
                for key in shown.get(str(argument), ()):
                    earlier[item.action][(name, key)] += 1
        value = parse_structured(item.observation)
        if value is None:
            continue
        for key, ident, _ in own_records(value):
            shown[str(ident)].add(key)
        if arguments:
            turns[item.action] += 1
            votes[item.action].update(_answer_votes(value, arguments))
    return dict(votes), turns, dict(earlier)


def learn_selectors(evidence: Sequence[Evidence], *,
                    summaries: EpisodeSummaries | None = None) -> dict[str, tuple[str, str]]:
    """Per tool, (argument, id key) when the argument's value is the id of a record its results show (the whole
    result, else one at any depth: a write answered with `{"order_id": ..., "status": ...}` or a wrapper), on at
    least `MIN_SELECTOR_SHARE` of the tool's JSON answers. A tool whose answers show no record (a write answered
    "Return requested.") selects by the argument whose value is the id of a record the episode showed before.
    The votes are counted per episode and added up (`summaries`: those counts reused, see `worldbook.summaries`)."""
    votes: _Votes = defaultdict(Counter)
    turns: Counter[str] = Counter()
    earlier: _Votes = defaultdict(Counter)
    for episode_votes, episode_turns, episode_earlier in summarized(
            "selectors", list(group_by_episode(evidence).values()), _selector_votes, summaries):
        for tool, counts in episode_votes.items():
            votes[tool].update(counts)
        turns.update(episode_turns)
        for tool, counts in episode_earlier.items():
            earlier[tool].update(counts)
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
            value = parse_structured(item.observation)
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


def learn_unchanging(evidence: Sequence[Evidence], min_support: int = 2,
                     readers: set[str] | None = None) -> set[tuple[str, str]]:
    """(tool, argument) pairs whose call leaves the record the argument names as the episode last showed it (its own
    answer included): on at least `min_support` calls the record was shown again with no other tool naming it in
    between, and never with a field changed. A card named as the source of a top-up is shown the same after it:
    it stays known; a payment's target is not. A change with two tools' calls in between blames neither (a read
    between a write and the next read is not blamed for the write's change), nor credits them when none; nor does
    a change a call that is not a reader (`learn_readers`, when not given) shows in its own answer."""
    readers = learn_readers(evidence) if readers is None else readers
    named: Counter[tuple[str, str]] = Counter()
    changed: Counter[tuple[str, str]] = Counter()
    for items in group_by_episode(evidence).values():
        last: dict[str, dict[str, Any]] = {}  # id as text -> its record as last shown
        since: dict[str, set[tuple[str, str]]] = defaultdict(set)  # id -> (tool, argument) naming it since
        for item in items:
            value = parse_structured(item.observation)
            shown = set()
            for _, ident, record in own_records(value) if value is not None else ():
                ident = str(ident)
                shown.add(ident)
                pairs = since.pop(ident, None)
                if pairs and item.action not in readers:
                    pairs |= {(item.action, k) for k, v in arguments_of(item).items() if _scalar(v) and str(v) == ident}
                if pairs and len({tool for tool, _ in pairs}) == 1:
                    before = last[ident]
                    differs = any(before[k] != record[k] for k in before.keys() & record.keys())
                    for pair in pairs:
                        named[pair] += 1
                        changed[pair] += differs
                last[ident] = record
            for name, argument in arguments_of(item).items():  # what its answer showed is as the call left it
                if _scalar(argument) and str(argument) in last and str(argument) not in shown:
                    since[str(argument)].add((item.action, name))
    return {pair for pair, count in named.items() if count >= min_support and not changed[pair]}


# Keys that name an entity's own identifier for look-ups (a name or a code is an attribute a query matches).
OWN_ID = re.compile(f"({ENTITY_ID})")


def _entity_id(record: Mapping[str, Any]) -> str | None:
    """The key of an entity's own identifier: `id` if it has one, else the first `*_id` key."""
    if "id" in record and _scalar(record["id"]):
        return "id"
    return next((key for key, value in record.items() if OWN_ID.search(key) and _scalar(value)), None)


def entity_records(value: Any, arguments: Mapping[str, Any] | None = None) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(kind, id, record) for every entity at any depth of a tool result, the look-ups' reading: the kind is the
    key of its `OWN_ID` identifier (stricter than `ID_KEY`), and a whole result that names no id of its own is
    keyed by the call's one id-like argument (`get_user_details(user_id=...)` -> kind `user_id`)."""
    arguments = arguments or {}
    top = value if isinstance(value, dict) else None
    if top is not None and len(top) >= 2 and _entity_id(top) is None:  # one field: a message, not a record
        ids = [(name, given) for name, given in arguments.items() if OWN_ID.search(name) and _scalar(given)]
        if len(ids) == 1:
            yield ids[0][0], str(ids[0][1]), top
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            key = _entity_id(node)
            if key is not None:
                yield key, str(node[key]), node
            stack.extend(item for item in reversed(list(node.values())) if isinstance(item, dict | list))
        elif isinstance(node, list):
            stack.extend(item for item in reversed(node) if isinstance(item, dict | list))


def id_shape(value: Any) -> str:
    """An id's form: each run of letters and digits as `x`, the other characters kept (`#O50174` -> `#x`,
    `cu_9228d2` -> `x_x`): coarse on purpose, so hex or numeric ids of one kind share their form."""
    return re.sub(r"[A-Za-z0-9]+", "x", str(value))


@dataclass
class StoredRecord:
    """One record's initial version merged over the episodes that showed it."""

    key: RecordKey  # (kind: the id key, id value as text)
    fields: dict[str, Any]  # the stable fields, in the key order of the first sighting
    unstable: set[str] = field(default_factory=set)  # fields whose initial versions disagree across episodes
    episodes: list[str] = field(default_factory=list)  # the episodes that showed an initial version
    turns: list[str] = field(default_factory=list)  # the first sighting's turn id per episode
    families: set[str] = field(default_factory=set)  # the trajectory families (tasks) of those episodes

    @property
    def stable(self) -> bool:
        """Every field agrees across the episodes that showed the record."""
        return not self.unstable

    def merge(self, record: Mapping[str, Any], episode: str, turn_id: str, family: str) -> None:
        """Another episode's initial version: fields it adds are kept, fields that disagree become unstable. A later
        sighting in the same episode only adds the fields the earlier ones lacked (a search shows a product's name,
        the read after it the whole record): no call that names it came between (the store's `touched` guard)."""
        if episode in self.episodes:
            for name, value in record.items():
                if name not in self.fields and name not in self.unstable:
                    self.fields[name] = value
            return
        self.episodes.append(episode)
        self.turns.append(turn_id)
        self.families.add(family)
        for name, value in record.items():  # a field one sighting lacks is not a disagreement (another projection)
            if name in self.unstable:
                continue
            if name not in self.fields:
                self.fields[name] = value
            elif self.fields[name] != value:
                self.unstable.add(name)
                del self.fields[name]


def _merge(index: dict[Any, StoredRecord], at: Any, key: RecordKey, record: Mapping[str, Any], episode: str,
           turn_id: str, family: str) -> bool:
    """Merge a sighting into an index (at `at`); whether it is a new entry."""
    stored = index.get(at)
    if stored is not None:
        stored.merge(record, episode, turn_id, family)
        return False
    index[at] = StoredRecord(key, dict(record), episodes=[episode], turns=[turn_id], families={family})
    return True


class RecordStore:
    """Records' initial versions from construction evidence, merged across episodes (see the module doc), under
    two readings of each answer, both built in the one pass: by *own identifier* (`own_records`: the first
    identifier field, a name too), what write rules and record reads select (`get`, `keys_for`); and by *entity
    kind* (`entity_records`: `id` / `*_id`, or the argument that selected a whole answer), what queries and
    preconditions look up (`entity`, `of_kind`, `coverage`), in first-seen order per kind."""

    def __init__(self) -> None:
        self.records: dict[RecordKey, StoredRecord] = {}
        self.by_ident: dict[str, list[RecordKey]] = defaultdict(list)  # id value as text -> its record keys
        self.by_kind: dict[str, dict[str, StoredRecord]] = {}  # kind -> id -> entity, in first-seen order

    @classmethod
    def from_evidence(cls, evidence: Sequence[Evidence], readers: set[str] | None = None,
                      families: Mapping[str, str] | None = None) -> RecordStore:
        """`readers`: the tools whose answers are record versions (learned when not given); `families`: episode id
        -> trajectory family (task), so `coverage` counts tasks, not recordings (each episode its own without)."""
        store = cls()
        readers = learn_readers(evidence) if readers is None else readers
        for episode, items in group_by_episode(evidence).items():
            family = (families or {}).get(episode, episode)
            touched: set[str] = set()  # ids another tool's arguments named earlier in the episode
            for item in items:
                arguments = arguments_of(item)
                value = parse_structured(item.observation) if item.action in readers else None
                if value is not None:
                    store._observe(value, arguments, touched, episode, item.turn_id, family)
                if item.action not in readers:
                    touched.update(str(v) for v in arguments.values() if _scalar(v))
        return store

    def _observe(self, value: Any, arguments: Mapping[str, Any], touched: set[str], episode: str, turn_id: str,
                 family: str) -> None:
        for key, ident, record in own_records(value):
            rkey = record_key(key, ident)
            if rkey[1] not in touched and _merge(self.records, rkey, rkey, record, episode, turn_id, family):
                self.by_ident[rkey[1]].append(rkey)
        for kind, text, record in entity_records(value, arguments):
            if text not in touched:
                _merge(self.by_kind.setdefault(kind, {}), text, (kind, text), record, episode, turn_id, family)

    # ------------------------------------------------------------------ by own identifier (writes, reads)
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
                "id_keys": dict(Counter(k for k, _ in self.records).most_common()),
                "entities": sum(map(len, self.by_kind.values())), "kinds": {k: len(v) for k, v in self.by_kind.items()}}

    # ------------------------------------------------------------------ by entity kind (queries, preconditions)
    def entity(self, kind: str, ident: Any) -> dict[str, Any] | None:
        """The entity's merged fields (stable ones; the store's own dict, not a copy), None when none showed it."""
        stored = self.by_kind.get(kind, {}).get(str(ident))
        return stored.fields if stored is not None else None

    def of_kind(self, kind: str) -> dict[str, dict[str, Any]]:
        """id -> fields of every entity of a kind, in first-seen order."""
        return {ident: stored.fields for ident, stored in self.by_kind.get(kind, {}).items()}

    def has_kind(self, kind: str) -> bool:
        return kind in self.by_kind

    def kinds_of(self, ident: Any) -> list[str]:
        return [kind for kind, entities in self.by_kind.items() if str(ident) in entities]

    def coverage(self, kind: str, idents: Sequence[Any]) -> float:
        """The share of these ids (selected by successful calls) that more than one trajectory family (task)
        showed: near 1 when every task meets the same records (the store is complete for the kind: an unknown id
        is likely absent), low when each task has its own (a held-out task's records are unknown, not absent)."""
        if not idents:
            return 0.0
        known = self.by_kind.get(kind, {})
        shared = sum(len(known[str(i)].families) >= 2 for i in idents if str(i) in known)
        return shared / len(idents)

    def shapes(self, kind: str) -> set[str]:
        return {id_shape(ident) for ident in self.by_kind.get(kind, {})}


class EpisodeRecords:
    """The store's entities with one episode's observed ones (latest versions, newly seen ones after) laid over."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.reset()

    def reset(self) -> None:
        self.seen: dict[str, dict[str, dict[str, Any]]] = {}

    def observe(self, arguments: Mapping[str, Any], observation: str) -> list[tuple[str, str, dict[str, Any]]]:
        value = parse_structured(observation)
        if value is None:
            return []
        found = list(entity_records(value, arguments))
        for kind, ident, record in found:
            self.seen.setdefault(kind, {})[ident] = record
        return found

    def get(self, kind: str, ident: Any) -> dict[str, Any] | None:
        found = self.seen.get(kind, {}).get(str(ident))
        return found if found is not None else self.store.entity(kind, ident)

    def known(self, kind: str, ident: Any) -> bool:
        return self.get(kind, ident) is not None

    def all(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """Every entity of a kind, store order first, then the episode's new ones; latest versions."""
        seen = self.seen.get(kind, {})
        base = self.store.by_kind.get(kind, {})
        out = [(ident, seen.get(ident, stored.fields)) for ident, stored in base.items()]
        out += [(ident, record) for ident, record in seen.items() if ident not in base]
        return out
