"""EnvACE sweeps as the Train page reads them: `<ws>/runs/envace/sweeps/<name>/` (`worldsmith envace sweep`).

A finished sweep has `sweep.json` (one row per trial: overrides, status, error, metrics); while it
runs, its trials' run folders (`trials/<trial>/`) are the only record, so the table is built from
their status and summaries and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from workbench.train.runs import load_run, runs_root

__all__ = ["Sweep", "list_sweeps", "sweep_table"]


@dataclass
class Sweep:
    name: str
    path: Path
    finished: bool
    metric: str | None
    mode: str | None
    rows: list[dict[str, Any]]
    best: dict[str, Any] | None = None
    seconds: float | None = None

    @property
    def knobs(self) -> list[str]:
        """The swept fields, in grid order."""
        seen: dict[str, None] = {}
        for row in self.rows:
            for key in row.get("overrides") or {}:
                seen.setdefault(str(key), None)
        return list(seen)


def _running_rows(folder: Path) -> list[dict[str, Any]]:
    rows = []
    trials = folder / "trials"
    for path in sorted(trials.iterdir()) if trials.is_dir() else []:
        if not path.is_dir():
            continue
        run = load_run(path)
        config = run.config or {}
        row: dict[str, Any] = {"trial": path.name, "status": run.state, "run_dir": str(path), "overrides": {},
                               "error": run.error, **{key: value for key, value in (run.summary or {}).items()
                                                       if isinstance(value, int | float | bool | str)}}
        for key in ("lam", "lr", "seed", "model", "batch_size", "steps", "objective"):
            if key in config:
                row.setdefault(key, config[key])
        rows.append(row)
    return rows


def list_sweeps(root: str | Path) -> list[Sweep]:
    """Every sweep folder, finished ones from `sweep.json`, running ones from their trial folders; newest first."""
    folder = runs_root(root) / "sweeps"
    if not folder.is_dir():
        return []
    sweeps = []
    for path in folder.iterdir():
        if not path.is_dir() or path.name.startswith("."):
            continue
        table = path / "sweep.json"
        if table.is_file():
            try:
                data = orjson.loads(table.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                data = None
            if isinstance(data, dict):
                sweeps.append(Sweep(name=str(data.get("name") or path.name), path=path, finished=True,
                                    metric=data.get("metric"), mode=data.get("mode"),
                                    rows=[row for row in data.get("trials") or [] if isinstance(row, dict)],
                                    best=data.get("best"), seconds=data.get("seconds")))
                continue
        sweeps.append(Sweep(name=path.name, path=path, finished=False, metric=None, mode=None,
                            rows=_running_rows(path)))
    return sorted(sweeps, key=lambda sweep: sweep.path.stat().st_mtime, reverse=True)


def sweep_table(sweep: Sweep) -> pd.DataFrame:
    """One row per trial: the swept knob values as columns, then status, the metrics and the error."""
    records = []
    for row in sweep.rows:
        record: dict[str, Any] = {"trial": row.get("trial")}
        for key, value in (row.get("overrides") or {}).items():
            record[str(key)] = value if isinstance(value, int | float | str | bool) else str(value)
        for key, value in row.items():
            if key in ("trial", "overrides", "run_dir"):
                continue
            if isinstance(value, int | float | str | bool) or value is None:
                record.setdefault(key, value)
        records.append(record)
    return pd.DataFrame(records)
