"""Training runs and sweeps launched from the Train page as background processes that outlive the page.

A launch writes the validated config to `<ws>/runs/envace/.launch/<run>.json` and starts
`python -m worldsmith envace train --config <that> --out <ws>/runs/envace/<run> --json` (or
`envace sweep`) in its own session, so a reload, another page or a closed tab does not stop it.
The run's own `status.json` says how it goes; the launch record (`<run>.job.json`, a
`worldsmith.util.jobs.Job` that `worldsmith jobs list` reads too) covers what status.json cannot: a process that died before the
trainer wrote anything (a bad dataset, an import error) leaves its reason in `<run>.log`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workbench.train.runs import load_run, runs_root
from worldsmith.envace import EnvACEConfig, training_runs
from worldsmith.util import atomic_write_json, plain_run_name

__all__ = [
    "JobRecord",
    "LaunchError",
    "job_record",
    "launch",
    "launch_dir",
    "sweep_command",
    "train_command",
    "validate_run_name",
    "write_launch_config",
]

launch_dir = training_runs.launch_dir  # where launch configs lie, named here for the page


class LaunchError(ValueError):
    """A run that cannot be launched (bad name, already running, invalid config)."""


@dataclass(frozen=True)
class JobRecord:
    """What the page launched for a run, and whether that process still lives."""

    run: str
    kind: str  # train, sweep or eval: what the launch record says
    pid: int
    started: float
    command: list[str]
    alive: bool
    returncode: int | None
    log_tail: str


def validate_run_name(name: str) -> str:
    """A run name under runs/envace, by the one name rule (`util.names.check_name`)."""
    return plain_run_name(name, LaunchError)


def write_launch_config(root: str | Path, run: str, config: EnvACEConfig) -> Path:
    """The config a launched run trains with (workspace and out filled in), written atomically."""
    run = validate_run_name(run)
    resolved = config.model_copy(update={"name": run, "workspace": str(Path(root).resolve()),
                                         "out": str((runs_root(root) / run).resolve())})
    path = launch_dir(root) / f"{run}.json"
    atomic_write_json(path, resolved.to_json())
    return path


def train_command(config_path: Path, out: Path) -> list[str]:
    """The command line a terminal would run for this training run."""
    return [sys.executable, "-m", "worldsmith", "envace", "train", "--config", str(config_path), "--out", str(out),
            "--json"]


def sweep_command(config_path: Path, out: Path | None = None, extra: list[str] | None = None) -> list[str]:
    command = [sys.executable, "-m", "worldsmith", "envace", "sweep", "--config", str(config_path)]
    if out is not None:
        command += ["--out", str(out)]
    return command + list(extra or []) + ["--json"]


def launch(root: str | Path, run: str, command: list[str], *,
           kind: Literal["train", "sweep", "eval"] = "train") -> JobRecord:
    """Start `command` detached for `run`; refuses while a process of that run is still alive."""
    run = validate_run_name(run)
    current = job_record(root, run)
    if current is not None and current.alive:
        raise LaunchError(f"run {run!r} is already running (pid {current.pid})")
    if kind == "train" and load_run(runs_root(root) / run).active:
        raise LaunchError(f"run {run!r} is already running (its status.json says so and its process lives)")
    job = training_runs.launch_jobs(root).start(run, command, workspace=root, kind=kind)
    return JobRecord(run=run, kind=kind, pid=job.pid, started=job.started, command=job.command, alive=True,
                     returncode=None, log_tail="")


def job_record(root: str | Path, run: str) -> JobRecord | None:
    """The process the page launched for `run` (None if it never launched one)."""
    job = training_runs.launch_jobs(root).load(run)
    if job is None:
        return None
    return JobRecord(run=run, kind=job.kind, pid=job.pid, started=job.started, command=job.command, alive=job.alive,
                     returncode=job.returncode, log_tail=job.log_tail(3000))
