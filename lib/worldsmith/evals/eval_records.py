"""The run store's records: their columns, the append-only journal a run resumes from, and records.parquet.

A run appends one journal line per finished (method, episode) unit, written with a single append
and fsynced, so a run killed at any point loses at most the unit in progress; a torn last line is
dropped when the journal is reopened. `records.parquet` is written from the journal (atomically)
with the column names and types of the run-store contract.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from worldsmith.evals.judge import DIMENSIONS
from worldsmith.evals.metrics import metric_names
from worldsmith.util.atomic import atomic_write, atomic_write_bytes
from worldsmith.util.errors import BadInputError

__all__ = ["JUDGE_COLUMNS", "JUDGE_DIMENSION_COLUMNS", "RECORD_COLUMNS", "RECORD_SCHEMA", "Journal", "record_schema",
           "records_frame", "write_records"]

JUDGE_DIMENSION_COLUMNS = tuple(f"judge_{dimension}" for dimension in DIMENSIONS)  # the judge's dimensions, once
JUDGE_COLUMNS = ("judge_total", *JUDGE_DIMENSION_COLUMNS)
# name -> arrow type, in the contract's order; the W2R columns and `error` come last. `novel` (null: unknown, as
# in runs made before it) says the observation shows values the episode's prefix and the book never showed; `fold`
# is the fold (1-based) of a cross-fitted run, null otherwise. `source` is the answer source that answered
# (`Audit.source`, else the route; null in runs made before it); `unseen_action` says the turn's action (tool) never
# appears in the book's construction data (null: unknown, or a W2R row).
_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("run", pa.string()), ("protocol", pa.string()), ("method", pa.string()), ("env_id", pa.string()),
    ("episode_id", pa.string()), ("family", pa.string()), ("task_seen", pa.bool_()), ("turn", pa.int64()),
    ("action", pa.string()), ("reference", pa.string()), ("prediction", pa.string()),
    ("exact_match", pa.float64()), ("edit_similarity", pa.float64()), ("token_f1", pa.float64()),
    ("json_f1", pa.float64()), *[(name, pa.float64()) for name in JUDGE_COLUMNS],
    ("route", pa.string()), ("source", pa.string()), ("rules", pa.list_(pa.string())), ("model_calls", pa.int64()),
    ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()), ("latency_s", pa.float64()),
    ("cost_usd", pa.float64()), ("diverged", pa.bool_()), ("outcome", pa.string()), ("done_pred", pa.bool_()),
    ("done_real", pa.bool_()), ("novel", pa.bool_()), ("novel_values", pa.list_(pa.string())),
    ("unseen_action", pa.bool_()), ("fold", pa.int64()),
    ("policy", pa.string()), ("real_success", pa.bool_()), ("w2r_success", pa.bool_()), ("sim_steps", pa.int64()),
    ("error", pa.string()),
]
RECORD_COLUMNS = tuple(name for name, _ in _COLUMNS)
RECORD_SCHEMA = pa.schema([pa.field(name, kind, nullable=True) for name, kind in _COLUMNS])


def record_schema() -> pa.Schema:
    """The contract's schema plus a float column per registered plug-in metric (`evals.metrics.metric`), after the
    contract's columns, so a metric added in one file reaches records.parquet instead of being dropped."""
    extra = [name for name in metric_names() if name not in RECORD_COLUMNS]
    if not extra:
        return RECORD_SCHEMA
    return pa.schema([*RECORD_SCHEMA, *(pa.field(name, pa.float64(), nullable=True) for name in extra)])


class Journal:
    """`records.jsonl` of a run: one JSON line per finished unit `{"method", "episode_id", "records", ...}`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.units: dict[tuple[str, str], dict[str, Any]] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        good: list[bytes] = []
        torn = False
        for number, line in enumerate(data.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                unit = orjson.loads(line)
                key = (str(unit["method"]), str(unit["episode_id"]))
            except (orjson.JSONDecodeError, KeyError, TypeError):
                if number == data.count(b"\n") + 1:  # the last line, cut by a crash: drop it
                    torn = True
                    continue
                raise BadInputError(f"{self.path}:{number}: not a journal line (delete the run folder to start "
                                 f"over)") from None
            self.units[key] = unit
            good.append(line)
        if torn:
            atomic_write_bytes(self.path, b"".join(line + b"\n" for line in good))

    def done(self, method: str, episode_id: str) -> bool:
        return (method, episode_id) in self.units

    def append(self, unit: dict[str, Any]) -> None:
        """Add a unit with one write and an fsync (a crash leaves at most a torn last line)."""
        line = orjson.dumps(unit, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.units[(str(unit["method"]), str(unit["episode_id"]))] = unit

    def records(self, order: Iterable[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
        """Every record, units in `order` (method, episode id) when given (others after, as appended)."""
        keys = list(self.units)
        if order is not None:
            wanted = [key for key in order if key in self.units]
            keys = wanted + [key for key in keys if key not in set(wanted)]
        return [record for key in keys for record in self.units[key]["records"]]


def records_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Records as a DataFrame with exactly the contract's columns and the registered metrics' (missing ones null)."""
    schema = record_schema()
    table = pa.Table.from_pylist([{name: record.get(name) for name in schema.names} for record in records],
                                 schema=schema)
    return table.to_pandas()


def write_records(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records.parquet atomically (the registered metrics' columns too); returns the number of rows."""
    schema = record_schema()
    rows = [{name: record.get(name) for name in schema.names} for record in records]
    table = pa.Table.from_pylist(rows, schema=schema)
    with atomic_write(Path(path)) as handle:
        pq.write_table(table, handle)
    return len(rows)
