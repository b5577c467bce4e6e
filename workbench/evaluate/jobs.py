"""Evaluation runs launched from the workbench as background jobs that outlive the page.

A job is `python -m worldsmith eval ... --json` started detached by the library
(`worldsmith.util.jobs`), its record in `<ws>/runs/eval/.jobs/<run>.json`
(`worldsmith.evals.EvalRunStore(root).jobs`), where `worldsmith jobs list` finds it too. Progress is the
run's own progress.json; the job record only says whether the process still lives and how it ended.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from worldsmith.evals import EvalRunStore
from worldsmith.util import plain_run_name

__all__ = ["EvalLaunch", "JobError", "JobStatus", "eval_command", "job_status", "launch", "list_jobs",
           "validate_run_name"]

JobState = Literal["running", "finished", "failed"]


class JobError(ValueError):
    """A job that cannot be started (bad run name, one already running under that name)."""


@dataclass(frozen=True)
class EvalLaunch:
    """The options of one `worldsmith eval` run, as the page's form collects them (None: the CLI's default).

    With `folds` >= 2 the run is cross-fitted and builds its own books: `book` may be None.
    """

    run: str
    book: str | None
    dataset: str
    methods: list[str]
    protocol: str | None = None  # None: the CLI's default, drift and next-obs together
    split: str | None = None
    env: str | None = None
    max_episodes: int | None = None
    max_turns: int | None = None
    policy: str | None = None
    llm: str | None = None
    judge: str | None = None
    seed: int = 0
    resamples: int | None = None
    folds: int = 0
    drop_leaked: bool = False
    workers: int = 0
    ray: str | None = None  # `local` or a cluster address: the units run as Ray tasks
    extra: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class JobStatus:
    run: str
    state: JobState
    pid: int
    started: float
    command: list[str]
    returncode: int | None = None
    result: dict[str, Any] | None = None
    log_tail: str = ""


def validate_run_name(name: str) -> str:
    """A run name under runs/eval, by the one name rule (`util.names.check_name`)."""
    return plain_run_name(name, JobError)


def eval_command(launch_config: EvalLaunch, root: str | Path) -> list[str]:
    """The `worldsmith eval` command line for a launch (the same one a terminal would run)."""
    c = launch_config
    command = [sys.executable, "-m", "worldsmith", "eval", "--workspace", str(Path(root).resolve()),
               "--dataset", c.dataset, "--methods", ",".join(c.methods), "--out", validate_run_name(c.run), "--seed", str(c.seed), "--json"]
    for flag, value in (("--protocol", c.protocol), ("--book", c.book), ("--folds", c.folds or None), ("--split", c.split), ("--env", c.env),
                        ("--max-episodes", c.max_episodes),
                        ("--max-turns", c.max_turns), ("--policy", c.policy), ("--llm", c.llm),
                        ("--judge", c.judge), ("--resamples", c.resamples), ("--workers", c.workers or None)):
        if value not in (None, ""):
            command += [flag, str(value)]
    ray = [f"--ray={c.ray}"] if c.ray else []  # one token: an address never reads as the next option
    return command + (["--drop-leaked"] if c.drop_leaked else []) + ray + list(c.extra)


def launch(root: str | Path, run: str, command: list[str]) -> JobStatus:
    """Start `command` detached for run `run`; refuses while a job of that run is still running."""
    run = validate_run_name(run)
    current = job_status(root, run)
    if current is not None and current.state == "running":
        raise JobError(f"run {run!r} is already running (pid {current.pid})")
    job = EvalRunStore(root).jobs.start(run, command, workspace=root, cwd=root)
    return JobStatus(run=run, state="running", pid=job.pid, started=job.started, command=job.command)


def _result(path: Path) -> dict[str, Any] | None:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def job_status(root: str | Path, run: str) -> JobStatus | None:
    """The job launched for `run`, None when the workbench never launched one."""
    job = EvalRunStore(root).jobs.load(run)
    if job is None:
        return None
    if job.alive:
        return JobStatus(run=run, state="running", pid=job.pid, started=job.started, command=job.command,
                         log_tail=job.log_tail(1000))
    result = _result(Path(job.stdout))
    finished = EvalRunStore(root).run(run).report_path.exists()
    ok = (job.returncode == 0) if job.returncode is not None else finished and not (result or {}).get("error")
    return JobStatus(run=run, state="finished" if ok else "failed", pid=job.pid, started=job.started,
                     command=job.command, returncode=job.returncode, result=result, log_tail=job.log_tail())


def list_jobs(root: str | Path) -> list[JobStatus]:
    """Every job the workbench launched in this workspace, most recent first."""
    jobs = (job_status(root, run) for run in EvalRunStore(root).jobs.runs())
    return sorted((j for j in jobs if j is not None), key=lambda j: j.started, reverse=True)
