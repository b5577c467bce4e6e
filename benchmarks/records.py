"""What typed evaluation records cost at 100k+ rows: why `EvalRecord` is a slots dataclass, not a pydantic model.

    python benchmarks/records.py [--records 100000] [--repeats 3] [--out benchmarks/results/records.json]

On `--records` realistic next-obs records (every column set, as a protocol and the run fill them):
1. construction: a plain dict (what records were before), `EvalRecord` (slots dataclass), and a pydantic model with
   the same fields, validated and with `model_construct`; with the bytes each live record holds (tracemalloc);
2. records -> arrow table: `records_table` (column by column) on `EvalRecord`s and on flat dicts (an older run's
   journal), beside the dict path that was used before (`pa.Table.from_pylist` over per-record dicts);
3. the journal (units of 10 records): an fsynced append per unit, serialising the lines from `EvalRecord`s and
   from dicts (before), and reopening it (each line parsed into records) beside parsing the JSON alone.
Median seconds of `--repeats`; prints and writes the JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_type_hints

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))

import orjson  # noqa: E402
import pyarrow as pa  # noqa: E402
from pydantic import create_model  # noqa: E402

from worldsmith.evals.eval_records import EvalRecord, Journal, record_schema, records_table  # noqa: E402
from worldsmith.util.atomic import atomic_write_json  # noqa: E402


def _median_s(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 4)


def _rows(n: int) -> list[dict[str, Any]]:
    """Flat dicts as a next-obs run's journal holds them (every column a protocol and the run set)."""
    return [{"run": "bench", "protocol": "next-obs", "method": ("harness", "nearest")[i % 2], "env_id": "alfworld",
             "episode_id": f"e{i // 20}", "family": f"f{i // 200}", "task_seen": bool(i % 3), "turn": i % 10,
             "action": f"go to shelf {i % 7}", "reference": f"You arrive at shelf {i % 7}. On it you see a mug {i}.",
             "prediction": f"You arrive at shelf {i % 7}.", "exact_match": float(i % 2), "edit_similarity": 0.5,
             "token_f1": 0.6, "json_f1": None, "judge_total": None, "judge_format": None, "judge_factuality": None,
             "judge_consistency": None, "judge_realism": None, "judge_quality": None, "route": "rule",
             "source": "rule", "rules": [f"r{i % 13}"], "model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
             "latency_s": 0.0012, "cost_usd": 0.0, "diverged": None, "outcome": "ok", "done_pred": False,
             "done_real": False, "novel": bool(i % 5 == 0), "novel_values": ["mug"] if i % 5 == 0 else [],
             "unseen_action": False, "fold": None, "error": None} for i in range(n)]


PydanticRecord = create_model(  # the same fields as EvalRecord, as a pydantic model
    "PydanticRecord", **{f.name: (get_type_hints(EvalRecord)[f.name], None) for f in fields(EvalRecord)
                         if f.name != "metrics"})  # type: ignore[call-overload]


def _live_bytes(build: Callable[[], list[Any]]) -> int:
    gc.collect()
    tracemalloc.start()
    kept = build()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return round(current / max(len(kept), 1))


def _old_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The dict path records.parquet was written with before `EvalRecord`."""
    schema = record_schema()
    return pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows], schema=schema)


def bench(n: int, repeats: int) -> dict[str, Any]:
    rows = _rows(n)
    records = [EvalRecord(**row) for row in rows]
    construct = {
        "dict_copy": _median_s(lambda: [dict(row) for row in rows], repeats),
        "EvalRecord_dataclass": _median_s(lambda: [EvalRecord(**row) for row in rows], repeats),
        "EvalRecord_from_dict": _median_s(lambda: [EvalRecord.from_dict(row) for row in rows], repeats),
        "pydantic_validate": _median_s(lambda: [PydanticRecord(**row) for row in rows], repeats),
        "pydantic_model_construct": _median_s(lambda: [PydanticRecord.model_construct(**row) for row in rows],
                                              repeats),
    }
    memory = {"dict": _live_bytes(lambda: [dict(row) for row in rows]),
              "EvalRecord_dataclass": _live_bytes(lambda: [EvalRecord(**row) for row in rows]),
              "pydantic": _live_bytes(lambda: [PydanticRecord(**row) for row in rows])}
    assert records_table(records).equals(_old_table(rows)), "the typed path must write the same table"
    table = {"records_table_EvalRecords": _median_s(lambda: records_table(records), repeats),
             "records_table_dicts": _median_s(lambda: records_table(rows), repeats),
             "before_from_pylist_dicts": _median_s(lambda: _old_table(rows), repeats)}
    units = [records[i:i + 10] for i in range(0, n, 10)]
    dict_units = [rows[i:i + 10] for i in range(0, n, 10)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.jsonl"

        def append(count: int) -> None:
            path.unlink(missing_ok=True)
            journal = Journal(path)
            for index, unit in enumerate(units[:count]):
                journal.append({"method": "m", "episode_id": f"e{index}", "records": unit, "seconds": 0.1})

        fsynced = min(len(units), 1000)  # each append is fsynced: the disk, not the records, sets this
        append_ms = _median_s(lambda: append(fsynced), 1) / fsynced * 1000
        append(len(units))
        lines = path.read_bytes().split(b"\n")
        journal = {
            "append_ms_per_unit_fsynced": round(append_ms, 3),
            "serialise_lines_EvalRecords": _median_s(lambda: [orjson.dumps({"records": [r.to_dict(drop_none=True)
                                                                             for r in unit]}) for unit in units],
                                                     repeats),
            "serialise_lines_dicts_before": _median_s(lambda: [orjson.dumps({"records": unit}) for unit in dict_units],
                                                      repeats),
            "reopen": _median_s(lambda: Journal(path), repeats),
            "reopen_json_parse_only": _median_s(lambda: [orjson.loads(line) for line in lines if line], repeats),
            "bytes_per_record": round(path.stat().st_size / n)}
    return {"records": n, "construct_s": construct, "bytes_per_record": memory, "to_arrow_s": table,
            "journal_s": journal}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "records.json")
    args = parser.parse_args()
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": platform.machine(),
              "python": platform.python_version(), **bench(args.records, args.repeats)}
    text = json.dumps(result, indent=2)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, result)


if __name__ == "__main__":
    main()
