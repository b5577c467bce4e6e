"""Paths into entity records and what names an entity: the shared vocabulary of query and precondition rules.

The entities themselves (read from JSON tool results by `worldbook.record_store.entity_records`, kept by
`records.RecordStore` with the episode's overlay `records.EpisodeRecords`) are the record store's; here is how a
rule addresses them: the arguments that select entities (`selects_entities`), the scalar leaves of a record and
the value at a path (`leaves`, `at_path`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from worldsmith.worldbook.record_store import ENTITY_ID

__all__ = ["at_path", "leaves", "selects_entities"]

_SELECTS = re.compile(rf"({ENTITY_ID}|^ids$|_ids$|Ids$)")


def selects_entities(argument: str) -> bool:
    """Whether an argument's name says it names a record (`order_id`, `ids`): what lookups select by."""
    return bool(_SELECTS.search(argument))


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
