"""Reading evaluation runs from `<workspace>/runs/eval/<run>/` through the library's run store (`evals.eval_runs`).

The page only reads: config.json, report.json (as an `EvalReport`), records.parquet and progress.json.
A run that is still going has progress.json and maybe no report yet; a broken file is reported naming
the file and the reason instead of failing the page. Readers are cached on each file's (mtime, size),
so a run that finishes or moves on is re-read on the next rerun and an unchanged one never is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from worldsmith.evals import EvalReport, EvalRunStore, RunFileError, RunFolder, RunProgress, read_json_file

__all__ = [
    "RunFileError",
    "RunInfo",
    "list_runs",
    "load_records",
    "load_report",
    "read_config",
    "read_json_file",
    "read_progress",
    "run_dataset",
]


@dataclass(frozen=True)
class RunInfo:
    """What the run list shows: enough to choose a run without loading its records."""

    name: str
    path: Path
    protocol: str | None = None
    methods: list[str] = field(default_factory=list)
    created: str | None = None
    complete: bool = False
    done: int | None = None
    total: int | None = None
    status: str | None = None  # progress.json's status: running, done, failed
    message: str | None = None  # what the run last reported doing, or why it stopped
    error: str | None = None  # a run file that cannot be read


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@st.cache_data(show_spinner=False, max_entries=128)
def _cached_config(run: str, stamp: tuple[int, int] | None) -> dict[str, Any] | None:
    return RunFolder(Path(run)).read_config()


@st.cache_data(show_spinner=False, max_entries=128)
def _cached_report(run: str, stamp: tuple[int, int] | None) -> EvalReport | None:
    return RunFolder(Path(run)).read_report()


@st.cache_data(show_spinner=False, max_entries=16)
def _cached_records(run: str, stamp: tuple[int, int] | None) -> pd.DataFrame:
    return RunFolder(Path(run)).read_records()


def read_config(run: Path) -> dict[str, Any] | None:
    folder = RunFolder(run)
    return _cached_config(str(run), _stamp(folder.config_path))


def load_report(run: Path) -> EvalReport | None:
    """report.json, or None while the run has not written it."""
    folder = RunFolder(run)
    return _cached_report(str(run), _stamp(folder.report_path))


def read_progress(run: Path) -> RunProgress | None:
    """progress.json (`done`, `total`, ...) as last written atomically by the run; never cached."""
    return RunFolder(run).read_progress()


def load_records(run: Path) -> pd.DataFrame:
    """records.parquet (one row per prediction); an empty frame when the run has none yet.

    `rules` arrives as arrays from parquet; it is turned into plain lists so grouping code can rely on it.
    """
    stamp = _stamp(RunFolder(run).records_path)
    if stamp is None:
        return pd.DataFrame()
    frame = _cached_records(str(run), stamp).copy()
    if "rules" in frame.columns:
        frame["rules"] = frame["rules"].map(lambda value: [] if value is None else [str(v) for v in value])
    return frame


def run_dataset(config: dict[str, Any] | None) -> str | None:
    """The dataset a run evaluated on (for links into Traces), whether stored as a name or as an object."""
    if not config:
        return None
    value = config.get("dataset")
    if isinstance(value, dict):
        value = value.get("name")
    return str(value) if value else None


def _methods(report: EvalReport | None, config: dict[str, Any] | None) -> list[str]:
    if report is not None:
        return list(report.methods)
    value = (config or {}).get("methods") or []
    return [str(m) for m in value] if isinstance(value, list) else [m for m in str(value).split(",") if m]


def _info(run: RunFolder) -> RunInfo:
    try:
        config, report, progress = read_config(run.path), load_report(run.path), read_progress(run.path)
    except RunFileError as error:
        return RunInfo(name=run.name, path=run.path, error=str(error))
    config = config or {}
    protocol = (report.protocol if report is not None else None) or config.get("protocol")
    created = (report.created if report is not None else None) or config.get("created")
    progress = progress or RunProgress()
    return RunInfo(name=run.name, path=run.path, protocol=protocol, methods=_methods(report, config),
                   created=created, complete=report is not None, done=progress.done, total=progress.total,
                   status=progress.status or None, message=progress.error or progress.message or None)


def list_runs(root: str | Path) -> list[RunInfo]:
    """Every run folder (one holding any run file), newest first; hidden folders (job records) are skipped."""
    return [_info(run) for run in EvalRunStore(root).runs()]
