"""Reading evaluation runs from `<workspace>/runs/eval/<run>/` (the run-store contract of worldsmith.evals).

The page only reads: config.json, report.json, records.parquet and progress.json. A run that is
still going has progress.json and maybe no report yet; a broken file is reported naming the file
and the reason instead of failing the page. Readers are cached on each file's (mtime, size), so a
run that finishes or moves on is re-read on the next rerun and an unchanged one never is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import streamlit as st

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
    "runs_dir",
]

RUN_FILES = ("config.json", "report.json", "records.parquet", "progress.json")


class RunFileError(ValueError):
    """A run file that exists but cannot be read (message names the file and why)."""


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


def runs_dir(root: str | Path) -> Path:
    """`<workspace>/runs/eval`: where `worldsmith eval` writes runs by name."""
    return Path(root) / "runs" / "eval"


def read_json_file(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, None when there is no such file; RunFileError when it is not a JSON object."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RunFileError(f"{path}: cannot be read ({error.strerror or error})") from error
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise RunFileError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(value, dict):
        raise RunFileError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@st.cache_data(show_spinner=False, max_entries=128)
def _cached_json(path: str, stamp: tuple[int, int] | None) -> dict[str, Any] | None:
    return read_json_file(Path(path))


@st.cache_data(show_spinner=False, max_entries=16)
def _cached_parquet(path: str, stamp: tuple[int, int] | None) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as error:  # pyarrow raises several types for a damaged file
        raise RunFileError(f"{path}: not a readable parquet file ({error})") from error


def _json(run: Path, name: str) -> dict[str, Any] | None:
    path = run / name
    return _cached_json(str(path), _stamp(path))


def read_config(run: Path) -> dict[str, Any] | None:
    return _json(run, "config.json")


def load_report(run: Path) -> dict[str, Any] | None:
    """report.json, or None while the run has not written it."""
    return _json(run, "report.json")


def read_progress(run: Path) -> dict[str, Any] | None:
    """progress.json (`done`, `total`, ...) as last written atomically by the run; never cached."""
    return read_json_file(run / "progress.json")


def load_records(run: Path) -> pd.DataFrame:
    """records.parquet (one row per prediction); an empty frame when the run has none yet.

    `rules` arrives as arrays from parquet; it is turned into plain lists so grouping code can rely on it.
    """
    path = run / "records.parquet"
    stamp = _stamp(path)
    if stamp is None:
        return pd.DataFrame()
    frame = _cached_parquet(str(path), stamp).copy()
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


def _methods(report: dict[str, Any] | None, config: dict[str, Any] | None) -> list[str]:
    if report and isinstance(report.get("methods"), dict):
        return list(report["methods"])
    value = (config or {}).get("methods") or []
    return [str(m) for m in value] if isinstance(value, list) else [m for m in str(value).split(",") if m]


def _info(path: Path) -> RunInfo:
    try:
        config, report, progress = read_config(path), load_report(path), read_progress(path)
    except RunFileError as error:
        return RunInfo(name=path.name, path=path, error=str(error))
    protocol = (report or {}).get("protocol") or (config or {}).get("protocol")
    created = (report or {}).get("created") or (config or {}).get("created")
    progress = progress or {}
    done, total = progress.get("done"), progress.get("total")
    message = progress.get("error") or progress.get("message")
    return RunInfo(name=path.name, path=path, protocol=protocol, methods=_methods(report, config),
                   created=created, complete=report is not None,
                   done=int(done) if isinstance(done, int | float) else None,
                   total=int(total) if isinstance(total, int | float) else None,
                   status=str(progress["status"]) if progress.get("status") else None,
                   message=str(message) if message else None)


def list_runs(root: str | Path) -> list[RunInfo]:
    """Every run folder (one holding any run file), newest first; hidden folders (job records) are skipped."""
    folder = runs_dir(root)
    if not folder.is_dir():
        return []
    paths = [p for p in folder.iterdir()
             if p.is_dir() and not p.name.startswith(".") and any((p / name).exists() for name in RUN_FILES)]
    paths.sort(key=lambda p: max((s[0] for s in (_stamp(p / n) for n in RUN_FILES) if s), default=0), reverse=True)
    return [_info(p) for p in paths]
