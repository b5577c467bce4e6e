"""Failure tags: a researcher's label and note on one scored turn of an evaluation run, kept in the workspace.

    tags = FailureTags(workspace.root)
    tags.set(FailureKey(run="r1", episode_id="ep-3", turn=4, method="harness"), tag="wrong amount",
             note="the refund ignores the coupon")
    tags.list(run="r1", tag="wrong amount")        # -> [FailureTag, ...]
    tags.export(Path("tags.jsonl"))               # one JSON object a line

A failure is keyed by run, episode, turn and method (the records' columns), so a tag stays with its turn
whatever view shows it, and a rerun under the run's name finds it again. One tag and one note per failure:
setting it again replaces both. The store is one SQLite file (`<root>/annotations.sqlite`); every write is a
transaction, so a crash leaves a tag either written whole or not at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from worldsmith.util.atomic import atomic_write_bytes
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.layout import WorkspaceLayout

__all__ = ["MAX_NOTE", "MAX_TAG", "FailureKey", "FailureTag", "FailureTags"]

MAX_TAG = 64  # characters: a label a filter lists, not a paragraph
MAX_NOTE = 4000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS failure_tags (
    run TEXT NOT NULL, episode_id TEXT NOT NULL, turn INTEGER NOT NULL, method TEXT NOT NULL,
    tag TEXT NOT NULL, note TEXT NOT NULL, updated TEXT NOT NULL,
    PRIMARY KEY (run, episode_id, turn, method))
"""


@dataclass(frozen=True, slots=True)
class FailureKey:
    """Which failure: a run's record of `method` at `turn` of `episode_id` (method "" when the run has one)."""

    run: str
    episode_id: str
    turn: int
    method: str = ""


@dataclass(frozen=True, slots=True)
class FailureTag:
    """A failure's label and note, and when they were last set (ISO 8601, UTC)."""

    run: str
    episode_id: str
    turn: int
    method: str
    tag: str
    note: str
    updated: str

    @property
    def key(self) -> FailureKey:
        return FailureKey(self.run, self.episode_id, self.turn, self.method)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _checked_tag(tag: str) -> str:
    label = tag.strip()
    if not label:
        raise BadInputError("a failure tag cannot be empty", where="tag")
    if len(label) > MAX_TAG or "\n" in label or "\r" in label:
        raise BadInputError(f"a failure tag is one line of at most {MAX_TAG} characters, not {label[:80]!r}",
                            where="tag")
    return label


def _checked_key(key: FailureKey) -> FailureKey:
    for name in ("run", "episode_id"):
        if not str(getattr(key, name)).strip():
            raise BadInputError(f"a failure needs its {name}", where=name)
    if isinstance(key.turn, bool) or not isinstance(key.turn, int):
        raise BadInputError(f"turn must be an integer, not {key.turn!r}", where="turn")
    return key


class FailureTags:
    """The failure tags of one workspace."""

    def __init__(self, root: str | Path) -> None:
        self.path = WorkspaceLayout.of(root).annotations_path

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        if not write and not self.path.exists():  # reading creates nothing
            connection = sqlite3.connect(":memory:")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=30)
        with closing(connection):
            connection.execute(_SCHEMA)
            with connection:  # commits, or rolls back on an error
                yield connection

    def set(self, key: FailureKey, *, tag: str, note: str = "") -> FailureTag:
        """Tag a failure (replacing its tag and note if it had them)."""
        key = _checked_key(key)
        if len(note) > MAX_NOTE:
            raise BadInputError(f"a note holds at most {MAX_NOTE} characters, not {len(note)}", where="note")
        saved = FailureTag(key.run, key.episode_id, key.turn, key.method, _checked_tag(tag), note.strip(),
                           datetime.now(UTC).isoformat(timespec="seconds"))
        with self._transaction(write=True) as connection:
            connection.execute("INSERT OR REPLACE INTO failure_tags VALUES (?, ?, ?, ?, ?, ?, ?)",
                               (saved.run, saved.episode_id, saved.turn, saved.method, saved.tag, saved.note,
                                saved.updated))
        return saved

    def remove(self, key: FailureKey) -> bool:
        """Untag a failure; False when it had no tag."""
        with self._transaction(write=True) as connection:
            cursor = connection.execute(
                "DELETE FROM failure_tags WHERE run = ? AND episode_id = ? AND turn = ? AND method = ?",
                (key.run, key.episode_id, key.turn, key.method))
        return cursor.rowcount > 0

    def list(self, *, run: str | None = None, tag: str | None = None) -> list[FailureTag]:
        """The tags (of one run, of one label), by run, episode, turn and method."""
        where, values = [], []
        for column, value in (("run", run), ("tag", tag)):
            if value is not None:
                where.append(f"{column} = ?")
                values.append(value)
        query = "SELECT * FROM failure_tags" + (" WHERE " + " AND ".join(where) if where else "") \
            + " ORDER BY run, episode_id, turn, method"
        with self._transaction(write=False) as connection:
            return [FailureTag(*row) for row in connection.execute(query, values)]

    def labels(self, *, run: str | None = None) -> dict[str, int]:
        """Each label in use (of one run) with how many failures carry it, most used first."""
        counts: dict[str, int] = {}
        for item in self.list(run=run):
            counts[item.tag] = counts.get(item.tag, 0) + 1
        return dict(sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))

    def export(self, path: Path, *, run: str | None = None, tag: str | None = None) -> int:
        """Write the tags (of one run, of one label) as JSON lines, atomically; returns how many."""
        rows = self.list(run=run, tag=tag)
        atomic_write_bytes(Path(path), b"".join(orjson.dumps(row.to_json()) + b"\n" for row in rows))
        return len(rows)
