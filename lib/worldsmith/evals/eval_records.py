"""The run store's records: `EvalRecord` (whose fields are the records columns), the append-only journal a run
resumes from, and records.parquet.

Every protocol builds `EvalRecord`s, so a misspelt column is a `TypeError` where the record is made rather than a
column left null. The arrow schema (`RECORD_SCHEMA`, `RECORD_COLUMNS`) is read off the field declarations, and a
plug-in metric (`evals.metrics.metric`) rides in `EvalRecord.metrics` and gets its own float column after the
contract's (`record_schema()`); a metric that is neither a column nor registered is refused (`RecordFieldError`).

A run appends one journal line per finished (method, episode) unit, written with a single append
and fsynced, so a run killed at any point loses at most the unit in progress; a torn last line is
dropped when the journal is reopened. Journal lines are JSON with each record flat (plug-in metrics beside the
columns, null fields left out), as runs made before `EvalRecord` wrote them, so their journals still load.
`records.parquet` is written from the journal (atomically) with the column names and types of the run-store
contract.
"""

from __future__ import annotations

import operator
import os
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from worldsmith.evals.judge import DIMENSIONS
from worldsmith.evals.metrics import METRIC_REGISTRY, metric_names
from worldsmith.util.atomic import atomic_write, atomic_write_bytes
from worldsmith.util.errors import BadInputError

__all__ = ["JUDGE_COLUMNS", "JUDGE_DIMENSION_COLUMNS", "RECORD_COLUMNS", "RECORD_SCHEMA", "EvalRecord", "Journal",
           "RecordFieldError", "UnitKey", "record_schema", "records_frame", "records_table", "unit_key",
           "write_records"]

JUDGE_DIMENSION_COLUMNS = tuple(f"judge_{dimension}" for dimension in DIMENSIONS)  # the judge's dimensions, once
JUDGE_COLUMNS = ("judge_total", *JUDGE_DIMENSION_COLUMNS)


class RecordFieldError(BadInputError):
    """A record names a field that is neither a records column nor a registered metric (`field` names it)."""

    def __init__(self, message: str, *, field: str, where: str | None = None) -> None:
        super().__init__(message, where=where)
        self.field = field


@dataclass(slots=True)
class EvalRecord:
    """One scored prediction: a turn of next-obs, drift or live, or an episode of W2R. Each field but `metrics` is a
    records column, in the contract's order (the W2R columns and `error` last); null means not applicable or not
    known (runs made before a column existed read it as null).

    Mutable, not frozen: a protocol scores the turn, then the run fills the run-level fields (run, method,
    episode, fold, novelty) in place rather than copying every record at each stage.
    """

    run: str | None = None
    protocol: str | None = None
    method: str | None = None
    env_id: str | None = None
    episode_id: str | None = None
    family: str | None = None  # the trajectory family (`worldbook.build.trajectory_family`)
    task_seen: bool | None = None  # the family is among the book's construction families
    turn: int | None = None  # -1 for a W2R record
    action: str | None = None
    reference: str | None = None
    prediction: str | None = None
    exact_match: float | None = None  # the built-in metrics (`evals.metrics.METRICS`)
    edit_similarity: float | None = None
    token_f1: float | None = None
    json_f1: float | None = None
    judge_total: float | None = None  # the judge's total and dimensions (`JUDGE_COLUMNS`), null without a judge
    judge_format: float | None = None
    judge_factuality: float | None = None
    judge_consistency: float | None = None
    judge_realism: float | None = None
    judge_quality: float | None = None
    route: str | None = None
    source: str | None = None  # the answer source that answered (`Audit.source`, else the route)
    rules: list[str] | None = None
    model_calls: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    diverged: bool | None = None  # drift: at or after the first miss
    outcome: str | None = None
    done_pred: bool | None = None
    done_real: bool | None = None
    novel: bool | None = None  # shows values neither the book nor what the protocol gives showed (`evals.novelty`)
    novel_values: list[str] | None = None
    novel_tf: bool | None = None  # the same, teacher-forced (the real prefix given): open-loop records compare on it
    unseen_action: bool | None = None  # the turn's action (tool) never appears in the book's construction data
    fold: int | None = None  # the fold (1-based) of a cross-fitted run
    policy: str | None = None  # W2R: the policy, its real success, its replayed success, its steps in simulation
    real_success: bool | None = None
    w2r_success: bool | None = None
    sim_steps: int | None = None
    error: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)  # plug-in metrics by name: not columns above

    def __post_init__(self) -> None:
        if self.metrics:
            _check_metrics(self.metrics)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, where: str | None = None) -> EvalRecord:
        """A record from a flat dict (a journal line's, or one built by hand): the columns by name, a registered
        plug-in metric's score beside them. Any other key raises `RecordFieldError` naming it (and `where`)."""
        if _COLUMN_SET.issuperset(values):  # columns only: the common case, at constructor speed
            return cls(**values)
        columns: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in values.items():
            if key in _COLUMN_SET:
                columns[key] = value
            elif key == "metrics" and isinstance(value, Mapping):
                extra.update(value)
            else:
                extra[key] = value
        if extra:
            _check_metrics(extra, where)
        return cls(**columns, metrics=extra)

    def to_dict(self, *, drop_none: bool = False) -> dict[str, Any]:
        """The flat dict of a journal line: the columns, then the plug-in metrics (null ones left out with
        `drop_none`)."""
        pairs = zip(RECORD_COLUMNS, _column_values(self), strict=True)
        out = {k: v for k, v in pairs if v is not None} if drop_none else dict(pairs)
        out.update((k, v) for k, v in self.metrics.items() if v is not None or not drop_none)
        return out

    def value(self, name: str) -> Any:
        """A column's or a plug-in metric's value by name (null when the metric was not scored); `KeyError` for
        any other name."""
        if name in _COLUMN_SET:
            return getattr(self, name)
        if name in METRIC_REGISTRY:
            return self.metrics.get(name)
        raise KeyError(name)


def _check_metrics(metrics: Mapping[str, Any], where: str | None = None) -> None:
    for name in metrics:
        if name in _COLUMN_SET:
            raise RecordFieldError(f"{name!r} is a records column: set the field, not a metric", field=name,
                                   where=where)
        if name not in METRIC_REGISTRY:
            raise RecordFieldError(f"record field {name!r} is neither a records column nor a registered metric "
                                   f"(register it with @metric, or fix the name)", field=name, where=where)


_ARROW_TYPES: dict[Any, pa.DataType] = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64(),
                                        list[str]: pa.list_(pa.string())}


def _arrow_type(name: str, hint: Any) -> pa.DataType:
    """`X | None` -> X's arrow type: every column is nullable."""
    kinds = [kind for kind in get_args(hint) if kind is not type(None)] \
        if get_origin(hint) in (Union, types.UnionType) else [hint]
    if len(kinds) != 1 or kinds[0] not in _ARROW_TYPES:
        raise TypeError(f"EvalRecord.{name}: {hint} has no records column type")
    return _ARROW_TYPES[kinds[0]]


def _contract() -> list[tuple[str, pa.DataType]]:
    hints = get_type_hints(EvalRecord)
    return [(f.name, _arrow_type(f.name, hints[f.name])) for f in fields(EvalRecord) if f.name != "metrics"]


_COLUMNS = _contract()
RECORD_COLUMNS = tuple(name for name, _ in _COLUMNS)
RECORD_SCHEMA = pa.schema([pa.field(name, kind, nullable=True) for name, kind in _COLUMNS])
_COLUMN_SET = frozenset(RECORD_COLUMNS)
_column_values = operator.attrgetter(*RECORD_COLUMNS)  # a record's column values, in order, in one C call
if _unfielded := [name for name in JUDGE_COLUMNS if name not in _COLUMN_SET]:  # a judge dimension added alone
    raise TypeError(f"EvalRecord has no field for the judge's {_unfielded}: add them beside `judge_total`")


def record_schema() -> pa.Schema:
    """The contract's schema plus a float column per registered plug-in metric (`evals.metrics.metric`), after the
    contract's columns, so a metric added in one file reaches records.parquet instead of being dropped."""
    extra = [name for name in metric_names() if name not in _COLUMN_SET]
    if not extra:
        return RECORD_SCHEMA
    return pa.schema([*RECORD_SCHEMA, *(pa.field(name, pa.float64(), nullable=True) for name in extra)])


def _as_record(record: EvalRecord | Mapping[str, Any]) -> EvalRecord:
    return record if isinstance(record, EvalRecord) else EvalRecord.from_dict(record)


UnitKey = tuple[str, str, str]  # (method, episode id, protocol) of a unit


def unit_key(unit: Mapping[str, Any]) -> UnitKey:
    """A journal unit's key. A line written before runs held several protocols has no `protocol`: its records'
    (every record names it) stand in, so such a journal still loads and its units keep their protocol."""
    protocol = unit.get("protocol")
    if protocol is None:
        first = unit["records"][0] if unit["records"] else None
        protocol = (first.protocol if isinstance(first, EvalRecord) else first.get("protocol")) if first else None
    return str(unit["method"]), str(unit["episode_id"]), str(protocol or "")


class Journal:
    """`records.jsonl` of a run: one JSON line per finished unit `{"method", "episode_id", "protocol", "records",
    ...}`, keyed by `UnitKey`.

    In memory a unit's `records` are `EvalRecord`s; on disk each is its flat dict (`EvalRecord.to_dict`)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.units: dict[UnitKey, dict[str, Any]] = {}
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
                rows = unit["records"]
                if "method" not in unit or "episode_id" not in unit:
                    raise KeyError("method")
            except (orjson.JSONDecodeError, KeyError, TypeError):
                if number == data.count(b"\n") + 1:  # the last line, cut by a crash: drop it
                    torn = True
                    continue
                raise BadInputError(f"{self.path}:{number}: not a journal line (delete the run folder to start "
                                 f"over)") from None
            if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
                raise BadInputError("the unit's records are not a list of objects (delete the run folder to start "
                                    "over)", where=f"{self.path}:{number}")
            unit["records"] = [EvalRecord.from_dict(row, where=f"{self.path}:{number}") for row in rows]
            self.units[unit_key(unit)] = unit
            good.append(line)
        if torn:
            atomic_write_bytes(self.path, b"".join(line + b"\n" for line in good))

    def done(self, method: str, episode_id: str, protocol: str = "") -> bool:
        return (method, episode_id, protocol) in self.units

    def append(self, unit: dict[str, Any]) -> None:
        """Add a unit (its `records`: `EvalRecord`s, or flat dicts) with one write and an fsync (a crash leaves at
        most a torn last line)."""
        records = [_as_record(record) for record in unit["records"]]
        written = {**unit, "records": [record.to_dict(drop_none=True) for record in records]}
        line = orjson.dumps(written, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.units[unit_key(unit)] = {**unit, "records": records}

    def records(self, order: Iterable[UnitKey] | None = None) -> list[EvalRecord]:
        """Every record, units in `order` (`UnitKey`s) when given (others after, as appended)."""
        keys = list(self.units)
        if order is not None:
            wanted = [key for key in order if key in self.units]
            keys = wanted + [key for key in keys if key not in set(wanted)]
        return [record for key in keys for record in self.units[key]["records"]]


def records_table(records: Iterable[EvalRecord | Mapping[str, Any]]) -> pa.Table:
    """Records as an arrow table of `record_schema()`, built column by column; a flat dict (an older run's
    journal record) is read with `EvalRecord.from_dict`. A value of the wrong type raises `RecordFieldError`
    naming its column."""
    rows = [_as_record(record) for record in records]
    schema = record_schema()
    arrays = []
    for column in schema:
        name = column.name
        values = [getattr(row, name) for row in rows] if name in _COLUMN_SET else [row.metrics.get(name) for row in rows]
        try:
            arrays.append(pa.array(values, type=column.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
            raise RecordFieldError(f"records column {name!r} ({column.type}): {error}", field=name) from None
    return pa.Table.from_arrays(arrays, schema=schema)


def records_frame(records: Iterable[EvalRecord | Mapping[str, Any]]) -> pd.DataFrame:
    """Records as a DataFrame with exactly the contract's columns and the registered metrics' (missing ones null)."""
    return records_table(records).to_pandas()


def write_records(path: Path, records: Iterable[EvalRecord | Mapping[str, Any]]) -> int:
    """Write records.parquet atomically (the registered metrics' columns too); returns the number of rows."""
    table = records_table(records)
    with atomic_write(Path(path)) as handle:
        pq.write_table(table, handle)
    return table.num_rows
