"""The evaluation run store: the one owner of `<workspace>/runs/eval/<run>/` and what lies in it.

A run folder holds config.json (the resolved configuration and its fingerprint), records.jsonl (the
journal a run resumes from), records.parquet, report.json and report.md, plots/ and progress.json.
`run_eval` writes through a `RunFolder`; the CLI and the workbench read through one. A file that
exists but cannot be read raises `RunFileError` naming the file and why; a missing one reads as None
(or an empty frame): a run that is still going may not have written it yet. Hidden folders beside the
runs (`.jobs`, `.build-cache`) are the store's too, never runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from worldsmith.evals.eval_records import Journal
from worldsmith.evals.report_model import EvalReport
from worldsmith.evals.run_compare import RunComparison, compare_runs
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.errors import BadInputError, NotFoundError
from worldsmith.util.jobs import JobFolder
from worldsmith.workspace.layout import WorkspaceLayout

__all__ = ["RUN_FILES", "RunFileError", "RunFolder", "RunProgress", "EvalRunStore", "read_json_file"]

_Model = TypeVar("_Model", bound=BaseModel)

RUN_FILES = ("config.json", "report.json", "records.parquet", "progress.json")  # any of them makes a folder a run


class RunFileError(BadInputError):
    """A run file that exists but cannot be read (the message names the file and why)."""


class RunProgress(BaseModel):
    """progress.json: units done of all, what the run last did, and why it stopped when it failed."""

    model_config = ConfigDict(extra="allow")

    done: int | None = None
    total: int | None = None
    status: str | None = None  # running, done, failed
    message: str | None = None
    started: str | None = None
    updated: str | None = None
    error: str | None = None


def read_json_file(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, None when there is no such file; RunFileError when it is not a JSON object."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RunFileError(f"cannot be read ({error.strerror or error})", where=str(path)) from error
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise RunFileError(f"not valid JSON ({error})", where=str(path)) from error
    if not isinstance(value, dict):
        raise RunFileError(f"expected a JSON object, found {type(value).__name__}", where=str(path))
    return value


def _validated(model: type[_Model], path: Path, value: dict[str, Any]) -> _Model:
    try:
        return model.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top)"
        raise RunFileError(f"not a valid {path.name} ({where}: {first['msg']})", where=str(path)) from error


@dataclass(frozen=True)
class RunFolder:
    """One evaluation run's folder: its files' paths, and readers and writers of them."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def journal_path(self) -> Path:
        return self.path / "records.jsonl"

    @property
    def records_path(self) -> Path:
        return self.path / "records.parquet"

    @property
    def report_path(self) -> Path:
        return self.path / "report.json"

    @property
    def markdown_path(self) -> Path:
        return self.path / "report.md"

    @property
    def progress_path(self) -> Path:
        return self.path / "progress.json"

    @property
    def plots_dir(self) -> Path:
        return self.path / "plots"

    def files(self) -> list[Path]:
        """The run files the folder has (`RUN_FILES` that exist)."""
        return [self.path / name for name in RUN_FILES if (self.path / name).exists()]

    # ------------------------------------------------------------------ readers
    def read_config(self) -> dict[str, Any] | None:
        """config.json: the resolved configuration with fingerprint, dataset revision, code version, model specs."""
        return read_json_file(self.config_path)

    def read_report(self) -> EvalReport | None:
        """report.json as an `EvalReport`, None while the run has not written it."""
        value = read_json_file(self.report_path)
        return None if value is None else _validated(EvalReport, self.report_path, value)

    def read_progress(self) -> RunProgress | None:
        value = read_json_file(self.progress_path)
        return None if value is None else _validated(RunProgress, self.progress_path, value)

    def read_records(self) -> pd.DataFrame:
        """records.parquet (one row per prediction); an empty frame when the run has none yet."""
        if not self.records_path.exists():
            return pd.DataFrame()
        try:
            return pd.read_parquet(self.records_path)
        except Exception as error:  # pyarrow raises several types for a damaged file
            raise RunFileError(f"not a readable parquet file ({error})", where=str(self.records_path)) from error

    def journal(self) -> Journal:
        """records.jsonl, the journal a run appends finished units to and resumes from."""
        return Journal(self.journal_path)

    # ------------------------------------------------------------------ writers (the run itself)
    def write_config(self, config: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.config_path, config)

    def write_progress(self, done: int, total: int, status: str, message: str, started: str,
                       error: str | None = None) -> None:
        atomic_write_json(self.progress_path, {
            "done": done, "total": total, "status": status, "message": message, "started": started,
            "updated": datetime.now(UTC).isoformat(timespec="seconds"), "error": error})


class EvalRunStore:
    """`<workspace>/runs/eval`: the evaluation runs of a workspace, by name."""

    def __init__(self, workspace_root: str | Path) -> None:
        self.root = WorkspaceLayout.of(workspace_root).runs_dir("eval")

    @property
    def jobs_dir(self) -> Path:
        """Where the workbench keeps the job records of the runs it launched."""
        return self.root / ".jobs"

    @property
    def jobs(self) -> JobFolder:
        """The job records of the evaluation runs started in the background (`<run>.json`)."""
        return JobFolder(self.jobs_dir, kind="eval")

    @property
    def build_cache(self) -> Path:
        """The build cache of cross-fitted runs' fold books (shared by the runs)."""
        return self.root / ".build-cache"

    def run(self, name: str) -> RunFolder:
        """The folder of run `name` (whether or not it exists yet)."""
        return RunFolder(self.root / name)

    def runs(self) -> list[RunFolder]:
        """Every run folder (one holding any run file), most recently written first; hidden folders are skipped."""
        if not self.root.is_dir():
            return []
        found = [RunFolder(p) for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
        found = [run for run in found if run.files()]
        found.sort(key=_last_written, reverse=True)
        return found

    def compare(self, run_a: str, run_b: str, *, metric: str = "exact_match", method: str | None = None,
                resamples: int = 10_000, seed: int = 0) -> RunComparison:
        """Run B against run A turn by turn (`run_compare.compare_runs`): the turns both scored, differing ones
        first, and the paired interval of B − A in `metric`. NotFoundError names a run that is not in the store."""
        frames = []
        for name in (run_a, run_b):
            folder = self.run(name)
            if not folder.files():
                known = ", ".join(run.name for run in self.runs()) or "none yet"
                raise NotFoundError(f"no evaluation run {name!r} (runs: {known})", where=str(self.root))
            frames.append(folder.read_records())
        return compare_runs(frames[0], frames[1], run_a=run_a, run_b=run_b, metric=metric, method=method,
                            resamples=resamples, seed=seed)


def _last_written(run: RunFolder) -> int:
    stamps = []
    for path in run.files():
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            continue
    return max(stamps, default=0)
