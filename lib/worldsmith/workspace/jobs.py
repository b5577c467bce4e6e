"""Where a workspace keeps the records of its background jobs, for the pages and `worldsmith jobs` alike.

    <root>/runs/eval/.jobs/<run>.json          evaluation runs started from the Evaluate page
    <root>/runs/envace/.launch/<run>.job.json  training runs and sweeps started from the Train page

(the training folder also holds each run's launch config as `<run>.json`, hence the longer suffix).
"""

from __future__ import annotations

from pathlib import Path

from worldsmith.util.jobs import Job, JobFolder

__all__ = ["eval_jobs", "find_jobs", "train_jobs", "workspace_job_folders", "workspace_jobs"]


def eval_jobs(root: str | Path) -> JobFolder:
    return JobFolder(Path(root) / "runs" / "eval" / ".jobs", kind="eval")


def train_jobs(root: str | Path) -> JobFolder:
    return JobFolder(Path(root) / "runs" / "envace" / ".launch", kind="train", suffix=".job.json")


def workspace_job_folders(root: str | Path) -> list[JobFolder]:
    return [eval_jobs(root), train_jobs(root)]


def workspace_jobs(root: str | Path) -> list[Job]:
    """Every job recorded in the workspace, most recent first."""
    found = [job for folder in workspace_job_folders(root) for job in folder.jobs()]
    return sorted(found, key=lambda job: job.started, reverse=True)


def find_jobs(root: str | Path, run: str, kind: str | None = None) -> list[Job]:
    """The jobs recorded for run `run` (of `kind` when given: eval, train, sweep), most recent first."""
    return [job for job in workspace_jobs(root) if job.run == run and kind in (None, job.kind)]
