"""Full-text search over a dataset's turns: an SQLite FTS5 index beside the parts, a DuckDB scan without one.

The index (`<dataset>/search.sqlite`) holds one row per turn: its observation, action name, raw action and
arguments, with the turn's episode id and index as the link target. It lists which turns files it covers, so
adding a part indexes that part's rows only, in one SQLite transaction (a crash leaves the part unindexed, never
half). A rebuild writes a fresh file and renames it over the old one. Without an index (an older dataset, a
deleted file) search falls back to the `ILIKE` scan it replaces: same results for plain words, slower.

Query syntax: words (all must occur, case-insensitive), `"a phrase"`, and `prefix*`. The index matches whole
words, so a scan's substring match inside a longer word ("mug" in "mugs") is a prefix query here ("mug*").
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from worldsmith.workspace.dataset import Dataset

__all__ = ["INDEX_FILE", "IndexStats", "SearchHit", "SearchResult", "build_index", "has_index", "search_turns",
           "update_index"]

INDEX_FILE = "search.sqlite"
TEXT_COLUMNS = ("observation", "action_name", "action_raw", "action_arguments")
_BATCH_ROWS = 20_000
# bm25 counts every match of each term for its weights: ~40 ms per million matches, seconds for a common word at
# 10M turns. A query with a term matching more turns than this lists its matches newest first instead (a word that
# common weighs about the same in every turn anyway); probing a term stops at this many.
RANK_LIMIT = 50_000
_TERM = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"\w+")
_SCHEMA = (
    "CREATE VIRTUAL TABLE turns USING fts5(observation, action_name, action_raw, action_arguments, "
    "episode_id UNINDEXED, turn_index UNINDEXED, part UNINDEXED, tokenize = 'unicode61 remove_diacritics 0');"
    "CREATE TABLE parts (turns TEXT PRIMARY KEY, n_rows INTEGER NOT NULL, seconds REAL NOT NULL);"
)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching turn and where to open it: dataset, episode id, turn index (`turn_id` joins the two)."""

    dataset: str
    episode_id: str
    turn_index: int
    snippet: str
    rank: float | None = None  # bm25 (lower is better); None from the scan, which lists in dataset order

    @property
    def turn_id(self) -> str:
        return f"{self.episode_id}#{self.turn_index}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "turn_id": self.turn_id}


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    hits: list[SearchHit] = field(default_factory=list)
    used_index: bool = False
    ranked: bool = False  # best first (bm25); else newest first (a term matched over RANK_LIMIT turns, or the scan)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "used_index": self.used_index, "ranked": self.ranked,
                "seconds": round(self.seconds, 4),
                "hits": [hit.to_json() for hit in self.hits]}


@dataclass(frozen=True, slots=True)
class IndexStats:
    dataset: str
    parts: int
    added_parts: int
    rows: int
    added_rows: int
    bytes: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- query text


def parse_query(text: str) -> list[tuple[list[str], bool]]:
    """The query as terms: (words of a word or phrase, prefix?); punctuation splits words as the index does."""
    terms: list[tuple[list[str], bool]] = []
    for phrase, bare in _TERM.findall(text):
        raw = phrase if phrase else bare
        prefix = not phrase and raw.endswith("*")
        words = _WORD.findall(raw)
        if words:
            terms.append((words, prefix))
    return terms


def fts_query(terms: list[tuple[list[str], bool]]) -> str:
    """An FTS5 MATCH expression: every term must match; a term of several words is a phrase."""
    return " AND ".join('"' + " ".join(words) + '"' + ("*" if prefix else "") for words, prefix in terms)


# ---------------------------------------------------------------------------------------------- the index


def index_path(dataset: Dataset) -> Path:
    return dataset.path / INDEX_FILE


def has_index(dataset: Dataset) -> bool:
    return index_path(dataset).exists()


def _open(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 60000")
    return conn


def _rows(turns_file: Path, part: str) -> Iterator[tuple[Any, ...]]:
    handle = pq.ParquetFile(turns_file)
    columns = [*TEXT_COLUMNS, "episode_id", "turn_index"]
    for batch in handle.iter_batches(batch_size=_BATCH_ROWS, columns=columns):
        values = [batch.column(name).to_pylist() for name in columns]
        for row in zip(*values, strict=True):
            yield (*row, part)


def _add_parts(conn: sqlite3.Connection, dataset: Dataset) -> tuple[int, int]:
    """Index the manifest's parts the index lacks and drop those the manifest no longer lists; one
    transaction per part. Returns (parts added, rows added)."""
    listed = {part["turns"] for part in dataset.parts}
    done = {row[0] for row in conn.execute("SELECT turns FROM parts")}
    for gone in done - listed:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM turns WHERE rowid IN (SELECT rowid FROM turns WHERE part = ?)", [gone])
        conn.execute("DELETE FROM parts WHERE turns = ?", [gone])
        conn.execute("COMMIT")
    added = rows = 0
    for part in dataset.parts:
        name = part["turns"]
        if name in done:
            continue
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM parts WHERE turns = ?", [name]).fetchone():  # another writer did it
                conn.execute("ROLLBACK")
                continue
            count = conn.executemany("INSERT INTO turns (observation, action_name, action_raw, action_arguments, episode_id, "
                             "turn_index, part) VALUES (?, ?, ?, ?, ?, ?, ?)", _rows(dataset.path / name, name)).rowcount
            conn.execute("INSERT INTO parts VALUES (?, ?, ?)", [name, count, time.perf_counter() - started])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        added += 1
        rows += count
    return added, rows


def _stats(conn: sqlite3.Connection, dataset: Dataset, added: int, rows: int, started: float) -> IndexStats:
    parts, total = conn.execute("SELECT count(*), coalesce(sum(n_rows), 0) FROM parts").fetchone()
    return IndexStats(dataset=dataset.name, parts=int(parts), added_parts=added, rows=int(total), added_rows=rows,
                      bytes=index_path(dataset).stat().st_size, seconds=time.perf_counter() - started)


def update_index(dataset: Dataset) -> IndexStats:
    """Bring the index up to the manifest (creating it if missing): index new parts only, drop removed ones."""
    started = time.perf_counter()
    path = index_path(dataset)
    if not path.exists():
        return build_index(dataset)
    with contextlib.closing(_open(path)) as conn:
        added, rows = _add_parts(conn, dataset)
        if added > 8:  # many small segments slow queries down: merge them
            conn.execute("INSERT INTO turns (turns) VALUES ('optimize')")
        return _stats(conn, dataset, added, rows, started)


def build_index(dataset: Dataset) -> IndexStats:
    """Build the whole index into a temporary file, then rename it over the old one (atomic)."""
    started = time.perf_counter()
    path = index_path(dataset)
    temp = path.with_name(f".{INDEX_FILE}.{os.getpid()}.tmp")
    temp.unlink(missing_ok=True)
    try:
        with contextlib.closing(_open(temp)) as conn:
            conn.execute("PRAGMA journal_mode = OFF")  # a fresh file: a crash just leaves a temp to delete
            conn.execute("PRAGMA synchronous = OFF")
            conn.executescript(_SCHEMA)
            added, rows = _add_parts(conn, dataset)
            conn.execute("INSERT INTO turns (turns) VALUES ('optimize')")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    with contextlib.closing(_open(path)) as conn:
        return _stats(conn, dataset, added, rows, started)


# ---------------------------------------------------------------------------------------------- search


def search_turns(dataset: Dataset, query: str, *, limit: int = 20, marks: tuple[str, str] = ("[", "]"),
                 refresh: bool = True) -> SearchResult:
    """The turns matching `query`, best first (bm25) with a snippet around the match (`marks` around each hit);
    newest first instead where a term matches more than `RANK_LIMIT` turns (`ranked` says which).

    With an index (`refresh`: first index the parts it lacks), else an `ILIKE` scan of the turns in dataset order.
    """
    started = time.perf_counter()
    terms = parse_query(query)
    if not terms or limit < 1:
        return SearchResult(query=query)
    if has_index(dataset):
        if refresh:
            with contextlib.suppress(sqlite3.Error, OSError):  # a read-only workspace: search what is indexed
                update_index(dataset)
        with contextlib.closing(_open(index_path(dataset))) as conn:
            # A prefix merges the doclists of every word it starts (a probe would cost as much): newest first.
            ranked = not any(prefix or _common(conn, (words, prefix)) for words, prefix in terms)
            order = "rank" if ranked else "rowid DESC"
            rows = conn.execute(
                f"SELECT episode_id, turn_index, snippet(turns, -1, ?, ?, '…', 16), {'rank' if ranked else 'NULL'} "
                f"FROM turns WHERE turns MATCH ? ORDER BY {order} LIMIT ?",
                [marks[0], marks[1], fts_query(terms), int(limit)],
            ).fetchall()
        hits = [SearchHit(dataset.name, r[0], int(r[1]), r[2], None if r[3] is None else float(r[3])) for r in rows]
        return SearchResult(query=query, hits=hits, used_index=True, ranked=ranked,
                            seconds=time.perf_counter() - started)
    return SearchResult(query=query, hits=scan_turns(dataset, terms, limit=limit, marks=marks),
                        seconds=time.perf_counter() - started)


def _common(conn: sqlite3.Connection, term: tuple[list[str], bool]) -> bool:
    """Whether `term` matches more than RANK_LIMIT turns (reads its doclist only that far)."""
    row = conn.execute("SELECT count(*) FROM (SELECT rowid FROM turns WHERE turns MATCH ? LIMIT ?)",
                       [fts_query([term]), RANK_LIMIT + 1]).fetchone()
    return int(row[0]) > RANK_LIMIT


def scan_turns(dataset: Dataset, terms: list[tuple[list[str], bool]], *, limit: int,
               marks: tuple[str, str] = ("[", "]")) -> list[SearchHit]:
    """The old search: every term a substring (`ILIKE`) of one of the text columns, in dataset order."""
    clauses, params = [], []
    for words, _prefix in terms:
        needle = " ".join(words)
        clauses.append("(" + " OR ".join(f"{c} ILIKE ?" for c in TEXT_COLUMNS) + ")")
        params.extend([f"%{needle}%"] * len(TEXT_COLUMNS))
    sql = (f"SELECT episode_id, turn_index, {', '.join(TEXT_COLUMNS)} FROM turns WHERE {' AND '.join(clauses)} "
           "LIMIT ?")
    rows = dataset.connect().execute(sql, [*params, int(limit)]).fetchall()
    first = " ".join(terms[0][0])
    return [SearchHit(dataset.name, row[0], int(row[1]), _snippet(row[2:], first, marks)) for row in rows]


def _snippet(texts: tuple[Any, ...], needle: str, marks: tuple[str, str], width: int = 60) -> str:
    """A window of the first text holding `needle`, the match between `marks`."""
    for text in texts:
        if not text:
            continue
        at = text.lower().find(needle.lower())
        if at < 0:
            continue
        start, end = max(0, at - width), min(len(text), at + len(needle) + width)
        return ("…" if start else "") + text[start:at] + marks[0] + text[at:at + len(needle)] + marks[1] + \
            text[at + len(needle):end] + ("…" if end < len(text) else "")
    return ""
