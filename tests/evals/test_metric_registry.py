"""A metric is one function: `@metric` registers it, and it is scored into records, records.parquet and the report."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from worldsmith.evals.eval_records import RECORD_COLUMNS, records_frame, write_records
from worldsmith.evals.metrics import METRIC_REGISTRY, METRICS, metric, metric_names, metric_scores
from worldsmith.evals.report import build_report


@pytest.fixture
def shouting() -> Iterator[str]:
    @metric
    def shouting_match(prediction: str, reference: str) -> float | None:
        """1.0 when the prediction is the reference in capitals; None for an empty reference."""
        return None if not reference else float(prediction == reference.upper())

    yield "shouting_match"
    METRIC_REGISTRY.unregister("shouting_match")


def test_the_built_in_metrics_are_registered_first() -> None:
    assert tuple(metric_names()[:4]) == METRICS


def test_a_registered_metric_is_scored_with_the_built_ins(shouting: str) -> None:
    scores = metric_scores("MUG", "mug")
    assert list(scores)[:4] == list(METRICS) and scores[shouting] == 1.0
    assert metric_scores("mug", "")[shouting] is None


def test_a_registered_metric_reaches_records_parquet_and_the_report(shouting: str, tmp_path: Path) -> None:
    rows = [{"method": m, "episode_id": f"e{e}", "turn": 0, "env_id": "x", "exact_match": 0.0, "error": None,
             **{shouting: float(m == "a")}} for m in ("a", "b") for e in range(3)]
    frame = records_frame(rows)
    assert tuple(frame.columns) == (*RECORD_COLUMNS, shouting)
    write_records(tmp_path / "records.parquet", rows)
    assert pq.read_table(tmp_path / "records.parquet").column(shouting).to_pylist() == [1.0] * 3 + [0.0] * 3
    report = build_report(frame, run="r", protocol="next-obs", fingerprint="f", config={}, methods=["a", "b"],
                          resamples=50)
    assert report["metrics"] == ["exact_match", shouting]
    assert report["methods"]["a"][shouting]["mean"] == 1.0 and report["methods"]["b"][shouting]["mean"] == 0.0


def test_without_plug_ins_the_records_have_exactly_the_contract_columns() -> None:
    assert tuple(records_frame([{"run": "r"}]).columns) == RECORD_COLUMNS


def test_a_metric_name_must_be_an_identifier_and_not_a_run_store_column() -> None:
    with pytest.raises(ValueError, match="must be an identifier"):
        metric("shout match")(lambda p, r: 1.0)
    with pytest.raises(ValueError, match="'method' is a run-store column"):
        metric("method")(lambda p, r: 1.0)
    with pytest.raises(ValueError, match="metric 'token_f1' is already registered"):
        metric("token_f1")(lambda p, r: 1.0)
    assert "method" not in metric_names()
