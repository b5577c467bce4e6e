"""Full-text search over a dataset's turns: an SQLite FTS5 trigram index beside the parts, a DuckDB scan without one.

What a query matches is `textmatch`'s rule: every term a case-insensitive substring of one of the turn's text
columns ("mug" finds "mugs", "user" finds "getUserId"), the rule the Traces page's `ILIKE` filter always had, so
the index and the scans give the same hits. Why substrings: agent traces are identifiers, JSON and tool
output (`user_4242`, `getUserId`, `"status":"ok"`) more than prose, and a researcher searches them the way grep
does; whole-word or word-prefix matching misses "user" in "getUserId", and word prefixes would make every term
an FTS5 prefix query, which merges the doclists of all the words it starts (770 ms at 10M turns). The cost,
measured at 1M turns (2-core host, benchmarks/RESULTS.md "Full-text search"): the trigram index is 2.6 GB
against 1.0 GB for the word index, 57 CPU s to build against 18; a trigram lookup merges nothing.

The index (`<dataset>/search.sqlite`) holds one row per turn: its observation, action name, raw action and
arguments, with the turn's episode id and index as the link target. It lists which turns files it covers, so
adding a part indexes that part's rows only, in one SQLite transaction (a crash leaves the part unindexed, never
half). A rebuild writes a fresh file and renames it over the old one; an index of an older rule (the word index of
before) is not used (the scan answers) until `update_index` (an ingest, `worldsmith traces index`) rebuilds it: a
search never starts an hour-long build. Terms of 1-2 characters are no trigram: they filter what the
longer terms find, and a query of only such terms reads the index's text newest first (fast when they are common,
a scan of every turn when they are rare). Without an index search falls back to a DuckDB scan of the parts.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from worldsmith.workspace.dataset import Dataset
from worldsmith.workspace.textmatch import TEXT_COLUMNS, Term, glob, parse_query, scan_clause, snippet

__all__ = ["INDEX_FILE", "IndexStats", "SearchHit", "SearchResult", "build_index", "has_index", "parse_query",
           "scan_turns", "search_turns", "update_index"]

INDEX_FILE = "search.sqlite"
RULE = "substring-trigram-1"  # what the index's rows mean; an index of another rule is rebuilt
_BATCH_ROWS = 20_000
HASH_BYTES = 256 * 1024 * 1024
# bm25 reads every match of each term for its weights, and a term is a phrase of trigrams whose positions must line
# up: ~25 ms per thousand matches of an 11-character word (20k turns, loaded host). A query with a term matching
# more turns than this lists its matches newest first instead (a term that common weighs about the same in every
# turn anyway); probing a term stops at this many.
RANK_LIMIT = 2_000
_SCHEMA = (
    "CREATE VIRTUAL TABLE turns USING fts5(observation, action_name, action_raw, action_arguments, "
    "episode_id UNINDEXED, turn_index UNINDEXED, part UNINDEXED, tokenize = 'trigram');"
    "CREATE TABLE parts (turns TEXT PRIMARY KEY, n_rows INTEGER NOT NULL, seconds REAL NOT NULL);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    f"INSERT INTO meta VALUES ('rule', '{RULE}');"
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


def fts_query(terms: list[Term]) -> str:
    """An FTS5 MATCH expression: every term, each a quoted string (a run of trigrams: a substring)."""
    return " AND ".join('"' + term.text.replace('"', '""') + '"' for term in terms)


# ---------------------------------------------------------------------------------------------- the index


def index_path(dataset: Dataset) -> Path:
    return dataset.path / INDEX_FILE


def has_index(dataset: Dataset) -> bool:
    return index_path(dataset).exists()


def _current(conn: sqlite3.Connection) -> bool:
    """Whether the index follows today's matching rule (an older one, e.g. the word index, does not)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'rule'").fetchone()
    except sqlite3.Error:
        return False
    return row is not None and row[0] == RULE


def _open(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 60000")
    return conn


def _rows(turns_file: Path, part: str) -> Iterator[tuple[Any, ...]]:
    handle = pq.ParquetFile(turns_file)
    columns = [*TEXT_COLUMNS, "episode_id", "turn_index"]
    for batch in handle.iter_batches(batch_size=_BATCH_ROWS, columns=columns):
        values = [batch.column(name).to_pylist() for name in columns]
        for observation, name, raw, arguments, *link in zip(*values, strict=True):
            # A raw action equal to its arguments (tool calls) adds no match: indexed once, ~15% less to build.
            yield observation, name, None if raw == arguments else raw, arguments, *link, part


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
        current = _current(conn)
    if not current:
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
            # FTS5 writes a segment per `hashsize` of pending terms (1 MB by default) and merges them over and over;
            # 256 MB halves a trigram build's CPU (100k turns: 8.4 s -> 4.6 s) for as much memory while indexing.
            conn.execute("INSERT INTO turns (turns, rank) VALUES ('hashsize', ?)", [HASH_BYTES])
            added, rows = _add_parts(conn, dataset)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    with contextlib.closing(_open(path)) as conn:
        return _stats(conn, dataset, added, rows, started)


# ---------------------------------------------------------------------------------------------- search


def search_turns(dataset: Dataset, query: str, *, limit: int = 20, marks: tuple[str, str] = ("[", "]"),
                 refresh: bool = True) -> SearchResult:
    """The turns matching `query` (`textmatch`: every term a case-insensitive substring), best first (bm25) with a
    snippet around the match (`marks` around it); newest first instead where a term matches more than `RANK_LIMIT`
    turns or no term has 3 characters (`ranked` says which).

    With an index (`refresh`: first index the parts it lacks), else a scan of the turns in dataset order.
    """
    started = time.perf_counter()
    terms = parse_query(query)
    if not terms or limit < 1:
        return SearchResult(query=query)
    if has_index(dataset):
        with contextlib.closing(_open(index_path(dataset))) as conn:
            current = _current(conn)
        if refresh and current:  # an index of an older rule is rebuilt by `traces index` or an ingest, not here
            with contextlib.suppress(sqlite3.Error, OSError):  # a read-only workspace: search what is indexed
                update_index(dataset)
        with contextlib.closing(_open(index_path(dataset))) as conn:
            if current:
                hits, ranked = _search_index(conn, dataset.name, terms, limit, marks)
                return SearchResult(query=query, hits=hits, used_index=True, ranked=ranked,
                                    seconds=time.perf_counter() - started)
    return SearchResult(query=query, hits=scan_turns(dataset, terms, limit=limit, marks=marks),
                        seconds=time.perf_counter() - started)


def _search_index(conn: sqlite3.Connection, name: str, terms: list[Term], limit: int, marks: tuple[str, str]
                  ) -> tuple[list[SearchHit], bool]:
    """Terms of >= 3 characters through MATCH; shorter ones as `GLOB`s on the rows it finds (or on every row)."""
    long = [term for term in terms if term.indexed]
    where, params = [], []
    if long:
        where.append("turns MATCH ?")
        params.append(fts_query(long))
    for term in terms:
        if not term.indexed:
            where.append("(" + " OR ".join(f"{c} GLOB ?" for c in TEXT_COLUMNS) + ")")
            params.extend([glob(term)] * len(TEXT_COLUMNS))
    ranked = bool(long) and not any(_common(conn, term) for term in long)
    rows = conn.execute(
        f"SELECT episode_id, turn_index, {'rank' if ranked else 'NULL'}, {', '.join(TEXT_COLUMNS)} "
        f"FROM turns WHERE {' AND '.join(where)} ORDER BY {'rank' if ranked else 'rowid DESC'} LIMIT ?",
        [*params, int(limit)],
    ).fetchall()
    # The snippet is cut here, not by FTS5's snippet(): SQLite 3.40's trigram highlight can split a multi-byte
    # character (the row then fails to decode), and one function for index and scan shows the same window.
    first = long[0] if long else terms[0]
    return [SearchHit(name, r[0], int(r[1]), snippet(r[3:], first, marks), None if r[2] is None else float(r[2]))
            for r in rows], ranked


def _common(conn: sqlite3.Connection, term: Term) -> bool:
    """Whether `term` matches more than RANK_LIMIT turns (reads its doclist only that far)."""
    row = conn.execute("SELECT count(*) FROM (SELECT rowid FROM turns WHERE turns MATCH ? LIMIT ?)",
                       [fts_query([term]), RANK_LIMIT + 1]).fetchone()
    return int(row[0]) > RANK_LIMIT


def scan_turns(dataset: Dataset, terms: list[Term], *, limit: int, marks: tuple[str, str] = ("[", "]")
               ) -> list[SearchHit]:
    """The search without an index: the same rule (`textmatch.scan_clause`) over the parts, in dataset order."""
    if not terms:
        return []
    condition, params = scan_clause(terms)
    sql = f"SELECT episode_id, turn_index, {', '.join(TEXT_COLUMNS)} FROM turns WHERE {condition} LIMIT ?"
    rows = dataset.connect().execute(sql, [*params, int(limit)]).fetchall()
    first = next((term for term in terms if term.indexed), terms[0])
    return [SearchHit(dataset.name, row[0], int(row[1]), snippet(row[2:], first, marks)) for row in rows]
