"""A named dataset: immutable Parquet parts listed in a manifest, queried through DuckDB.

Each ingest adds one part (an episodes file and a turns file) and then rewrites
`manifest.json` atomically; readers only see parts the manifest lists, so a failed or
interrupted ingest never leaves a half-written dataset. Split assignments live beside the
parts in `splits.parquet` and are joined in at query time.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from worldsmith.traces.import_report import ImportReport
from worldsmith.traces.model import Episode, Turn, split_turn_id
from worldsmith.traces.rows import episode_from_rows, turn_from_row
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.errors import BadInputError, NotFoundError
from worldsmith.util.names import check_name
from worldsmith.workspace.storage import EPISODE_SCHEMA, TURN_SCHEMA, episodes_from_tables
from worldsmith.workspace.textmatch import parse_query, scan_clause

if TYPE_CHECKING:  # pandas is imported by DuckDB when a query asks for a DataFrame, not at start-up
    import pandas as pd

__all__ = ["Dataset", "DatasetNotFound", "EpisodeFilter", "EpisodeNotFound", "dataset_lock", "validate_dataset_name"]

MANIFEST = "manifest.json"
SPLITS = "splits.parquet"
# What a listing shows of an episode, and the order it lists episodes in (import order).
# `success` is the outcome the stats and the outcome filter count: the recorded flag, else reward > 0;
# `dialogue_only`: an episode without a tool turn (`Episode.dialogue_only`).
_SUMMARY_COLUMNS = ("episode_id, env_id, task_id, left(task, 200) AS task, n_turns, n_turns = 0 AS dialogue_only, "
                    "reward, coalesce(success, reward > 0) AS success, split, family, source_format, source_path")
_IMPORT_ORDER = "ingest_id, source_path, source_line NULLS LAST, episode_id"


@contextlib.contextmanager
def dataset_lock(path: Path) -> Iterator[None]:
    """The writer lock of the dataset folder `path`, also before its manifest exists (the first ingest creates
    it under the lock, so two first ingests never write one manifest over the other's commit)."""
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _nulls_as_none(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the missing values of its text, list and struct columns as None instead of NaN (pandas 3's
    `str` dtype marks a missing string NaN; such a column becomes `object` where it has one)."""
    for column in frame.columns:
        values = frame[column]
        if values.dtype.kind != "O":  # object and str columns; numbers, booleans and times keep their NaN / NaT
            continue
        missing = values.isna()
        if missing.any():
            frame[column] = values.astype(object).where(~missing, None)
    return frame


class DatasetNotFound(NotFoundError):
    """No dataset of this name in the workspace."""


class EpisodeNotFound(NotFoundError, KeyError):
    """No episode (or turn) of this id in the dataset; a `KeyError`, as `Dataset.episode` always raised."""


def validate_dataset_name(name: str) -> str:
    return check_name(name, "dataset")


@dataclass(frozen=True, slots=True)
class EpisodeFilter:
    """Filters for browsing episodes; None means 'any'."""

    env_id: str | None = None
    task_contains: str | None = None
    outcome: str | None = None  # "success" | "failure" | "unknown"
    min_turns: int | None = None
    max_turns: int | None = None
    split: str | None = None
    search: str | None = None  # episode id or task substring
    dialogue_only: bool | None = None  # True: only episodes without a tool turn; False: only those with one

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.env_id:
            clauses.append("env_id = ?")
            params.append(self.env_id)
        if self.task_contains:
            clauses.append("task ILIKE ?")
            params.append(f"%{self.task_contains}%")
        if self.outcome == "success":
            clauses.append("(success OR (success IS NULL AND reward > 0))")
        elif self.outcome == "failure":
            clauses.append("(NOT success OR (success IS NULL AND reward <= 0))")
        elif self.outcome == "unknown":
            clauses.append("(success IS NULL AND reward IS NULL)")
        if self.min_turns is not None:
            clauses.append("n_turns >= ?")
            params.append(int(self.min_turns))
        if self.max_turns is not None:
            clauses.append("n_turns <= ?")
            params.append(int(self.max_turns))
        if self.split:
            clauses.append("split = ?")
            params.append(self.split)
        if self.search:
            clauses.append("(episode_id ILIKE ? OR task ILIKE ?)")
            params.extend([f"%{self.search}%"] * 2)
        if self.dialogue_only is not None:
            clauses.append("n_turns = 0" if self.dialogue_only else "n_turns > 0")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


class Dataset:
    """One named dataset inside a workspace."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = self.path.name
        if not (self.path / MANIFEST).exists():
            raise DatasetNotFound(f"dataset {self.name!r} not found at {self.path}")
        self._local = threading.local()

    # ---------------------------------------------------------------- manifest and files
    @property
    def manifest(self) -> dict[str, Any]:
        return orjson.loads((self.path / MANIFEST).read_bytes())

    @property
    def revision(self) -> int:
        return int(self.manifest.get("revision", 0))

    @property
    def parts(self) -> list[dict[str, Any]]:
        return list(self.manifest.get("parts", []))


    @staticmethod
    def create(path: Path, *, description: str = "") -> Dataset:
        path.mkdir(parents=True, exist_ok=True)
        if not (path / MANIFEST).exists():
            atomic_write_json(path / MANIFEST, {
                "name": path.name, "description": description, "revision": 0, "parts": [], "ingests": [],
                "splits": None,
            })
        return Dataset(path)

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Serialise writers of this dataset (ingest commits, split assignment)."""
        return dataset_lock(self.path)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        manifest["revision"] = int(manifest.get("revision", 0)) + 1
        atomic_write_json(self.path / MANIFEST, manifest)

    # ---------------------------------------------------------------- DuckDB
    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with views `episodes` and `turns` over the current parts.

        Cached per thread and per manifest revision (DuckDB connections are not thread-safe).
        """
        manifest = self.manifest  # read once: revision and parts must agree
        revision = int(manifest.get("revision", 0))
        cached = getattr(self._local, "conn", None)
        if cached is not None and cached[0] == revision:
            return cached[1]
        conn = duckdb.connect(database=":memory:")
        conn.execute("SET threads TO 2")
        # DuckDB draws its progress bar on stdout after 2 s: it would corrupt `--json` output on large datasets.
        conn.execute("SET enable_progress_bar = false")
        parts = manifest.get("parts", [])
        episodes = [str(self.path / part["episodes"]) for part in parts]
        turns = [str(self.path / part["turns"]) for part in parts]
        if episodes:
            conn.execute(f"CREATE VIEW raw_episodes AS SELECT * FROM read_parquet({_sql_list(episodes)}, union_by_name = true)")
            conn.execute(f"CREATE VIEW raw_turns AS SELECT * FROM read_parquet({_sql_list(turns)}, union_by_name = true)")
            # The same rows with their place in the files: a listing sorts narrow keys, then reads only its page.
            conn.execute(f"CREATE VIEW located_episodes AS SELECT * FROM read_parquet({_sql_list(episodes)}, "
                         "union_by_name = true, filename = true, file_row_number = true)")
        else:
            conn.execute(f"CREATE TABLE raw_episodes ({_sql_columns(EPISODE_SCHEMA)})")
            conn.execute(f"CREATE TABLE raw_turns ({_sql_columns(TURN_SCHEMA)})")
            conn.execute("CREATE VIEW located_episodes AS SELECT *, '' AS filename, 0::BIGINT AS file_row_number "
                         "FROM raw_episodes")
        conn.execute("CREATE VIEW turns AS SELECT episode_id || '#' || turn_index AS turn_id, * FROM raw_turns")
        splits = self.path / SPLITS
        if splits.exists() and episodes:
            conn.execute(f"CREATE VIEW assigned_splits AS SELECT episode_id, split FROM read_parquet('{_sql_escape(str(splits))}')")
        else:
            conn.execute("CREATE TABLE assigned_splits (episode_id VARCHAR, split VARCHAR)")
        conn.execute(
            "CREATE VIEW episodes AS SELECT e.* REPLACE (coalesce(s.split, e.split) AS split) "
            "FROM raw_episodes e LEFT JOIN assigned_splits s USING (episode_id)"
        )
        if cached is not None:
            cached[1].close()
        self._local.conn = (revision, conn)
        return conn

    def query(self, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
        """Run SQL over the views `episodes` and `turns`; returns a DataFrame.

        A NULL in a text column reads as None, never NaN: DuckDB hands pandas NaN (a float) for the NULLs of a
        text column (pandas 3's `str` dtype), so callers would see a float where they expect a string.
        """
        return _nulls_as_none(self.connect().execute(sql, params or []).df())

    # ---------------------------------------------------------------- reading
    def stats(self) -> dict[str, Any]:
        """Counts: episodes, turns, environments, dialogue-only episodes, successes (the recorded success flag,
        else reward > 0) and `with_outcome`, the episodes that record either at all: a log that records no
        outcome has 0 successes because nothing says, not because every episode failed."""
        row = _aggregate(self.connect(),  # splits change none of these: skip joining them in
                         "SELECT count(*), coalesce(sum(n_turns), 0), count(DISTINCT env_id), "
                         "count(*) FILTER (WHERE success OR (success IS NULL AND reward > 0)), "
                         "count(*) FILTER (WHERE n_turns = 0), "
                         "count(*) FILTER (WHERE success IS NOT NULL OR reward IS NOT NULL) FROM raw_episodes", [])
        return {"name": self.name, "episodes": row[0], "turns": int(row[1]), "environments": row[2],
                "successes": row[3], "dialogue_only": row[4], "with_outcome": row[5], "revision": self.revision}

    def environments(self) -> list[str]:
        rows = self.connect().execute("SELECT DISTINCT env_id FROM raw_episodes WHERE env_id IS NOT NULL ORDER BY 1")
        return [r[0] for r in rows.fetchall()]

    def splits(self) -> list[str]:
        rows = self.connect().execute("SELECT DISTINCT split FROM episodes WHERE split IS NOT NULL ORDER BY 1")
        return [r[0] for r in rows.fetchall()]

    def count_episodes(self, where: EpisodeFilter | None = None) -> int:
        """How many episodes match, counted in DuckDB (split assignments are joined in only to filter on them)."""
        where = where or EpisodeFilter()
        clause, params = where.where()
        table = "episodes" if where.split else "raw_episodes"
        return int(_aggregate(self.connect(), f"SELECT count(*) FROM {table}{clause}", params)[0])

    def list_episodes(self, where: EpisodeFilter | None = None, *, limit: int = 50, offset: int = 0) -> pd.DataFrame:
        """One page of episode summaries (never the turns), in import order.

        DuckDB filters and orders only the sort keys and each row's place (file, row number), cuts the
        page there, then reads the summary columns of the page's rows alone and joins only them with the
        split assignments (the whole dataset is joined only to filter on a split).
        """
        if limit < 0 or offset < 0:
            raise BadInputError(f"limit and offset must not be negative (got {limit}, {offset})")
        where = where or EpisodeFilter()
        clause, params = where.where()
        rows = ("(SELECT e.* REPLACE (coalesce(s.split, e.split) AS split) FROM located_episodes e "
                "LEFT JOIN assigned_splits s USING (episode_id))") if where.split else "located_episodes"
        page = (f"SELECT filename, file_row_number FROM {rows}{clause} "
                f"ORDER BY {_IMPORT_ORDER} LIMIT ? OFFSET ?")
        return self.query(
            f"SELECT {_SUMMARY_COLUMNS.replace('split', 'coalesce(s.split, p.split) AS split')} "
            f"FROM located_episodes p SEMI JOIN ({page}) k ON p.filename = k.filename "
            "AND p.file_row_number = k.file_row_number "
            f"LEFT JOIN assigned_splits s USING (episode_id) ORDER BY {_IMPORT_ORDER}",
            [*params, int(limit), int(offset)],
        )

    def episode(self, episode_id: str, *, with_state: bool = True) -> Episode:
        """One whole episode; `with_state=False` drops the ground-truth state snapshots."""
        conn = self.connect()
        rows = _fetch(conn, "SELECT * FROM episodes WHERE episode_id = ?", [episode_id])
        if not rows:
            raise EpisodeNotFound(f"episode {episode_id!r} not in dataset {self.name!r}")
        turns = _fetch(conn, "SELECT * FROM turns WHERE episode_id = ? ORDER BY turn_index", [episode_id])
        episode = episode_from_rows(rows[0], turns)
        return episode if with_state else episode.without_state()

    def episode_header(self, episode_id: str) -> tuple[Episode, int]:
        """The episode without its turns (task, initial observation, metadata) and its turn count.

        For views of long episodes that page through turns with `turns_page` instead. The header holds no turns,
        so its `dialogue_only` says nothing: the count does (0 for a dialogue-only episode).
        """
        rows = _fetch(self.connect(), "SELECT * FROM episodes WHERE episode_id = ?", [episode_id])
        if not rows:
            raise EpisodeNotFound(f"episode {episode_id!r} not in dataset {self.name!r}")
        return episode_from_rows(rows[0], []), int(rows[0]["n_turns"] or 0)

    def turns_page(self, episode_id: str, *, limit: int = 50, offset: int = 0, search: str | None = None) -> list[Turn]:
        """A page of one episode's turns, optionally only those matching `search` (the rule of the full-text search,
        `textmatch`: every term a case-insensitive substring of the action or observation)."""
        sql = "SELECT * FROM turns WHERE episode_id = ?"
        params: list[Any] = [episode_id]
        if search:
            condition, values = _episode_filter(search)
            sql += f" AND {condition}"
            params.extend(values)
        sql += " ORDER BY turn_index LIMIT ? OFFSET ?"
        params.extend([int(limit), int(offset)])
        return [turn_from_row(row) for row in _fetch(self.connect(), sql, params)]

    def count_turns(self, episode_id: str, search: str | None = None) -> int:
        sql = "SELECT count(*) FROM turns WHERE episode_id = ?"
        params: list[Any] = [episode_id]
        if search:
            condition, values = _episode_filter(search)
            sql += f" AND {condition}"
            params.extend(values)
        return int(_aggregate(self.connect(), sql, params)[0])

    def turn(self, turn_id: str) -> Turn:
        episode_id, index = split_turn_id(turn_id)
        rows = _fetch(self.connect(), "SELECT * FROM turns WHERE episode_id = ? AND turn_index = ?", [episode_id, index])
        if not rows:
            raise EpisodeNotFound(f"turn {turn_id!r} not in dataset {self.name!r}")
        return turn_from_row(rows[0])

    def has_turn(self, turn_id: str) -> bool:
        try:
            episode_id, index = split_turn_id(turn_id)
        except ValueError:
            return False
        row = _aggregate(self.connect(), "SELECT count(*) FROM turns WHERE episode_id = ? AND turn_index = ?",
                         [episode_id, index])
        return bool(row[0])

    def iter_episodes(self, split: str | None = None, *, with_state: bool = False) -> Iterator[Episode]:
        """Stream every episode (with split assignments applied), part by part.

        Ground-truth state snapshots (recorded by `worldsmith collect`) are for evaluation: they are
        dropped unless `with_state=True`, so a worldbook builder cannot peek at them by accident.
        """
        assigned = self.split_assignments()
        for part in self.parts:
            for episode in episodes_from_tables(self.path / part["episodes"], self.path / part["turns"]):
                if episode.id in assigned:
                    episode.split = assigned[episode.id]
                if split is None or episode.split == split:
                    yield episode if with_state else episode.without_state()

    def episode_ids(self) -> set[str]:
        return _column_set(self.connect(), "SELECT episode_id FROM raw_episodes")

    def content_hashes(self) -> set[str]:
        return _column_set(self.connect(), "SELECT content_hash FROM raw_episodes")

    def split_assignments(self) -> dict[str, str]:
        splits = self.path / SPLITS
        if not splits.exists():
            return {}
        rows = duckdb.execute(f"SELECT episode_id, split FROM read_parquet('{_sql_escape(str(splits))}')").fetchall()
        return dict(rows)

    def reports(self) -> list[dict[str, Any]]:
        """The import reports of every ingest into this dataset, newest first (`ImportReport.summary()` shape)."""
        out = []
        for entry in reversed(self.manifest.get("ingests", [])):
            report_path = self.path / entry["report"]
            if report_path.exists():
                out.append(ImportReport.model_validate_json(report_path.read_bytes()).summary())
        return out

    def close(self) -> None:
        cached = getattr(self._local, "conn", None)
        if cached is not None:
            cached[1].close()
            self._local.conn = None


def _aggregate(conn: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> tuple[Any, ...]:
    """The one row of an aggregate query (count, sum): SQL always returns it, even over no rows."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise RuntimeError(f"the aggregate query returned no row: {sql}")
    return row


def _fetch(conn: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _column_set(conn: duckdb.DuckDBPyConnection, sql: str) -> set[Any]:
    """The distinct values of a one-column query, through Arrow (half the time of fetching row tuples)."""
    return set(conn.sql(sql).to_arrow_table().column(0).to_pylist())


def _sql_escape(text: str) -> str:
    return text.replace("'", "''")


def _sql_list(paths: list[str]) -> str:
    return "[" + ", ".join(f"'{_sql_escape(p)}'" for p in paths) + "]"


def _sql_columns(schema: Any) -> str:
    kinds = {"string": "VARCHAR", "int32": "INTEGER", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN"}
    return ", ".join(f'"{field.name}" {kinds[str(field.type)]}' for field in schema)


def _episode_filter(search: str) -> tuple[str, list[str]]:
    """The search's condition on one episode's turns: the scan's (`textmatch`), identical to the index's hits by
    test. Not the index itself: FTS5 cannot narrow a term to one episode, it would read the term's every match in
    the dataset (10M turns: 312 s for a common word, against 116 ms here), where this reads the episode's rows the
    page reads anyway."""
    return scan_clause(parse_query(search))
