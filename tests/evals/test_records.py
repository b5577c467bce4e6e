"""`EvalRecord` is the records contract: its fields are the columns, a misspelt field or an unknown metric is an
error where the record is made, and journals written before it (flat dicts, fewer columns) still load and resume."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from worldsmith.evals import EvalConfig, EvalRecord, run_eval
from worldsmith.evals.eval_records import (
    JUDGE_COLUMNS,
    RECORD_COLUMNS,
    RECORD_SCHEMA,
    Journal,
    RecordFieldError,
    records_frame,
    write_records,
)
from worldsmith.evals.judge import DIMENSIONS
from worldsmith.evals.metrics import METRIC_REGISTRY, metric

# What a next-obs record held before the novelty, fold, source and unseen-action columns existed (the first run
# store): a journal line of such a run.
OLD_LINE = {"method": "nearest", "episode_id": "e1", "seconds": 0.01, "judge_usage": {"calls": 0}, "records": [
    {"turn": 0, "action": "go north", "reference": "A hall.", "prediction": "A hall.", "exact_match": 1.0,
     "edit_similarity": 1.0, "token_f1": 1.0, "json_f1": None, "route": "nearest_evidence", "rules": [],
     "model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.001, "cost_usd": 0.0,
     "diverged": None, "outcome": "ok", "done_pred": False, "done_real": False, "error": None, "run": "old",
     "protocol": "next-obs", "method": "nearest", "env_id": "x", "episode_id": "e1", "family": "f",
     "task_seen": False}]}


@pytest.fixture
def shouting() -> Iterator[str]:
    @metric
    def shouting_match(prediction: str, reference: str) -> float | None:
        return float(prediction == reference.upper())

    yield "shouting_match"
    METRIC_REGISTRY.unregister("shouting_match")


def test_the_columns_and_their_types_are_the_fields() -> None:
    declared = [f.name for f in fields(EvalRecord)]
    assert declared[-1] == "metrics" and RECORD_COLUMNS == tuple(declared[:-1])
    assert RECORD_COLUMNS[-1] == "error" and set(JUDGE_COLUMNS) <= set(RECORD_COLUMNS)
    assert [f"judge_{d}" for d in DIMENSIONS] == [c for c in RECORD_COLUMNS if c.startswith("judge_")][1:]
    types = dict(zip(RECORD_SCHEMA.names, RECORD_SCHEMA.types, strict=True))
    assert types["turn"] == pa.int64() and types["exact_match"] == pa.float64() and types["run"] == pa.string()
    assert types["task_seen"] == pa.bool_() and types["novel_values"] == pa.list_(pa.string())
    assert all(column.nullable for column in RECORD_SCHEMA)


def test_a_misspelt_field_fails_where_the_record_is_made() -> None:
    with pytest.raises(TypeError, match="exact_mach"):
        EvalRecord(turn=0, exact_mach=1.0)  # type: ignore[call-arg]
    with pytest.raises(RecordFieldError, match="'exact_mach' is neither a records column nor a registered metric"):
        records_frame([{"run": "r", "exact_mach": 1.0}])  # a dict as before: the column is no longer left null


def test_a_metric_neither_a_column_nor_registered_is_refused(shouting: str) -> None:
    record = EvalRecord(turn=0, metrics={shouting: 1.0})
    assert record.value(shouting) == 1.0 and record.value("turn") == 0
    with pytest.raises(RecordFieldError, match="'shout_match' is neither") as caught:
        EvalRecord(turn=0, metrics={"shout_match": 1.0})
    assert caught.value.field == "shout_match"
    with pytest.raises(RecordFieldError, match="'token_f1' is a records column"):
        EvalRecord(metrics={"token_f1": 1.0})
    with pytest.raises(ValueError, match="'metrics' is a run-store column"):
        metric("metrics")(lambda p, r: 1.0)


def test_a_plug_in_metric_gets_its_column_and_a_flat_journal_line(shouting: str, tmp_path: Path) -> None:
    records = [EvalRecord(run="r", method="a", episode_id="e", turn=t, exact_match=1.0, metrics={shouting: 0.5})
               for t in range(2)]
    journal = Journal(tmp_path / "records.jsonl")
    journal.append({"method": "a", "episode_id": "e", "records": records, "seconds": 0.1})
    line = orjson.loads((tmp_path / "records.jsonl").read_bytes())
    assert line["records"][0] == {"run": "r", "method": "a", "episode_id": "e", "turn": 0, "exact_match": 1.0,
                                  shouting: 0.5}  # flat, nulls left out: the format older runs wrote
    assert Journal(tmp_path / "records.jsonl").records() == records
    write_records(tmp_path / "records.parquet", records)
    table = pq.read_table(tmp_path / "records.parquet")
    assert table.schema.names == [*RECORD_COLUMNS, shouting] and table.column(shouting).to_pylist() == [0.5, 0.5]


def test_a_value_of_the_wrong_type_names_its_column() -> None:
    with pytest.raises(RecordFieldError, match="records column 'turn'"):
        records_frame([EvalRecord(turn="three")])  # type: ignore[arg-type]


def test_an_old_journal_line_loads_with_the_later_columns_null(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(orjson.dumps(OLD_LINE) + b"\n")
    (record,) = Journal(path).records()
    assert isinstance(record, EvalRecord) and record.exact_match == 1.0 and record.route == "nearest_evidence"
    frame = records_frame([record])
    assert tuple(frame.columns) == RECORD_COLUMNS
    assert frame[["novel", "source", "unseen_action", "fold", "judge_total"]].isna().all().all()
    assert records_frame(OLD_LINE["records"]).equals(frame)  # the dicts themselves read the same


def test_a_journal_record_with_an_unknown_field_names_the_line_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    bad = {**OLD_LINE, "records": [{**OLD_LINE["records"][0], "exact_mach": 1.0}]}
    path.write_bytes(orjson.dumps(OLD_LINE) + b"\n" + orjson.dumps({**bad, "episode_id": "e2"}) + b"\n")
    with pytest.raises(RecordFieldError, match=r"records\.jsonl:2: record field 'exact_mach' is neither"):
        Journal(path)


def test_a_run_whose_journal_has_old_lines_resumes_and_reports(alfworld_split, alfworld_book, tmp_path: Path) -> None:
    """A run folder whose journal was written in the older shape (flat dicts without the later columns, units without
    their protocol: the records name it) resumes without recomputing a unit and reports from those lines."""
    construction, held_out = alfworld_split
    config = EvalConfig(name="old", book="book", dataset="samples", methods=["nearest", "harness"], resamples=100)
    first = run_eval(config, tmp_path / "ws", book=alfworld_book, episodes=held_out[:2], construction=construction)
    journal = first.directory / "records.jsonl"
    later = {"source", "novel", "novel_values", "novel_tf", "unseen_action", "fold", *JUDGE_COLUMNS}
    lines = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
    old = [{**{k: v for k, v in unit.items() if k != "protocol"},
            "records": [{k: v for k, v in EvalRecord.from_dict(r).to_dict().items() if k not in later}
                        for r in unit["records"]]} for unit in lines]
    journal.write_bytes(b"".join(orjson.dumps(unit) + b"\n" for unit in old))
    (first.directory / "records.parquet").unlink()

    again = run_eval(config, tmp_path / "ws", book=alfworld_book, episodes=held_out[:2], construction=construction)
    assert again.computed == 0 and again.reused == 8  # 2 episodes x 2 methods x (drift, next-obs)
    records = again.records
    assert tuple(records.columns) == RECORD_COLUMNS and records["novel"].isna().all()
    kept = [c for c in RECORD_COLUMNS if c not in later]
    assert records[kept].equals(first.records[kept])
    assert again.report.methods["harness"]["exact_match"].mean == first.report.methods["harness"]["exact_match"].mean
    assert "exact_match_knowable" not in again.report.methods["harness"]  # no novelty flags in the old lines
