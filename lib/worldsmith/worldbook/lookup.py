"""Entity records by kind and id, read from JSON tool results: what query and precondition rules look up.

A *record* is a JSON object with an identifier. Its *kind* is the name of the key that identifies it
(`order_id`, `id`: stricter than `worldbook.records.ID_KEY`, for which a `name` identifies too: here a name
is an attribute a query matches), or, for a call answered with one object that names no id of its own
(`get_user_details(user_id=...)` -> the user), the argument that selected it. `RecordStore` holds each
record's initial version (construction episodes share one initial world in service APIs: the entity store's
discipline, `worldbook.records.EntityStore`) by kind in the order first seen, with the episodes that showed
it, which lookups scan and index by attribute; `EpisodeRecords` lays what one episode showed since (the
latest version) over it, so a lookup sees both.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.records import arguments_of, learn_readers, parse_json

__all__ = [
    "EpisodeRecords",
    "RecordStore",
    "at_path",
    "id_shape",
    "leaves",
    "records_of",
    "selects_entities",
]

# Keys that name a record's own identifier (a name or a code is an attribute, not an identity).
_OWN_ID = re.compile(r"(^id$|_id$|Id$|^uuid$|_uuid$)")


def selects_entities(argument: str) -> bool:
    """Whether an argument's name says it names a record (`order_id`, `ids`): what lookups select by."""
    return bool(_OWN_ID.search(argument) or re.search(r"(^ids$|_ids$|Ids$)", argument))


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _own_id(record: Mapping[str, Any]) -> str | None:
    """The key of a record's own identifier: `id` if it has one, else the first `*_id` key."""
    if "id" in record and _scalar(record["id"]):
        return "id"
    return next((key for key, value in record.items() if _OWN_ID.search(key) and _scalar(value)), None)


def records_of(value: Any, arguments: Mapping[str, Any] | None = None) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(kind, id, record) for every record at any depth of a tool result. A whole result that names no id of its
    own is keyed by the call's one id-like argument (`get_user_details(user_id=...)` -> kind `user_id`)."""
    arguments = arguments or {}
    top = value if isinstance(value, dict) else None
    if top is not None and len(top) >= 2 and _own_id(top) is None:  # one field: a message, not a record
        ids = [(name, given) for name, given in arguments.items() if _OWN_ID.search(name) and _scalar(given)]
        if len(ids) == 1:
            yield ids[0][0], str(ids[0][1]), top
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            key = _own_id(node)
            if key is not None:
                yield key, str(node[key]), node
            stack.extend(item for item in reversed(list(node.values())) if isinstance(item, dict | list))
        elif isinstance(node, list):
            stack.extend(item for item in reversed(node) if isinstance(item, dict | list))


def leaves(record: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, value) of every scalar (and every list of scalars) inside a record, through nested objects."""
    if isinstance(record, dict):
        for key, value in record.items():
            yield from leaves(value, (*prefix, str(key)))
    elif isinstance(record, list):
        if all(not isinstance(item, dict | list) for item in record):
            yield prefix, record
    else:
        yield prefix, record


def at_path(record: Any, path: Sequence[str]) -> Any:
    """The value at a path of nested keys in a record, None where a key is missing."""
    for step in path:
        if not isinstance(record, dict) or step not in record:
            return None
        record = record[step]
    return record


def id_shape(value: Any) -> str:
    """An id's form: each run of letters and digits as `x`, the other characters kept (`#O50174` -> `#x`,
    `cu_9228d2` -> `x_x`): coarse on purpose, so hex or numeric ids of one kind share their form."""
    return re.sub(r"[A-Za-z0-9]+", "x", str(value))


@dataclass
class RecordStore:
    """Each record's initial version (fields two episodes disagree on dropped, fields only a later view showed
    added) per kind in first-seen order, and the episodes and trajectory families that showed each id (how
    complete the store is for a kind: `coverage`)."""

    kinds: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    episodes: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    families: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # the trajectory families (tasks)

    @classmethod
    def from_evidence(cls, evidence: Sequence[Evidence], readers: set[str] | None = None,
                      families: Mapping[str, str] | None = None) -> RecordStore:
        """Each record's initial version per episode, as `worldbook.records.EntityStore` takes it (a sighting by
        a reader tool before any other tool's arguments named its id), merged across episodes: fields a later
        sighting adds are kept, fields two episodes disagree on are dropped (another task's world)."""
        from worldsmith.worldbook.induce import group_by_episode

        store = cls()
        readers = learn_readers(evidence) if readers is None else readers
        unstable: set[tuple[str, str, str]] = set()
        for episode, items in group_by_episode(evidence).items():
            touched: set[str] = set()
            for item in items:
                arguments = arguments_of(item)
                value = parse_json(item.observation) if item.action in readers else None
                for kind, ident, record in records_of(value, arguments) if value is not None else ():
                    if ident not in touched and episode not in store.episodes.get((kind, ident), ()):
                        store._merge(kind, ident, record, unstable)
                        store.episodes.setdefault((kind, ident), set()).add(episode)
                        store.families.setdefault((kind, ident), set()).add((families or {}).get(episode, episode))
                if item.action not in readers:
                    touched.update(str(v) for v in arguments.values() if _scalar(v))
        return store

    def _merge(self, kind: str, ident: str, record: dict[str, Any], unstable: set[tuple[str, str, str]]) -> None:
        records = self.kinds.setdefault(kind, {})
        known = records.get(ident)
        if known is None:
            records[ident] = dict(record)
            return
        for name, value in record.items():
            if (kind, ident, name) in unstable:
                continue
            if name not in known:
                known[name] = value
            elif known[name] != value:
                unstable.add((kind, ident, name))
                del known[name]

    def get(self, kind: str, ident: Any) -> dict[str, Any] | None:
        return self.kinds.get(kind, {}).get(str(ident))

    def kinds_of(self, ident: Any) -> list[str]:
        return [kind for kind, records in self.kinds.items() if str(ident) in records]

    def coverage(self, kind: str, idents: Sequence[Any]) -> float:
        """The share of these ids (selected by successful calls) that more than one trajectory family (task)
        showed: near 1 when every task meets the same records (the store is complete for the kind: an unknown id
        is likely absent), low when each task has its own (a held-out task's records are unknown, not absent).
        Families come from `from_evidence(families=...)`; without them each episode is its own."""
        if not idents:
            return 0.0
        shared = sum(len(self.families.get((kind, str(i)), ())) >= 2 for i in idents)
        return shared / len(idents)

    def shapes(self, kind: str) -> set[str]:
        return {id_shape(ident) for ident in self.kinds.get(kind, {})}


class EpisodeRecords:
    """The store with one episode's observed records (latest versions, newly seen ones after) laid over it."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.reset()

    def reset(self) -> None:
        self.seen: dict[str, dict[str, dict[str, Any]]] = {}

    def observe(self, arguments: Mapping[str, Any], observation: str) -> list[tuple[str, str, dict[str, Any]]]:
        value = parse_json(observation)
        if value is None:
            return []
        found = list(records_of(value, arguments))
        for kind, ident, record in found:
            self.seen.setdefault(kind, {})[ident] = record
        return found

    def get(self, kind: str, ident: Any) -> dict[str, Any] | None:
        found = self.seen.get(kind, {}).get(str(ident))
        return found if found is not None else self.store.get(kind, ident)

    def known(self, kind: str, ident: Any) -> bool:
        return self.get(kind, ident) is not None

    def all(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """Every record of a kind, store order first, then the episode's new ones; latest versions."""
        seen = self.seen.get(kind, {})
        base = self.store.kinds.get(kind, {})
        out = [(ident, seen.get(ident, record)) for ident, record in base.items()]
        out += [(ident, record) for ident, record in seen.items() if ident not in base]
        return out
