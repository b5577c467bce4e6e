"""Training runs and sweeps launched from the Train page as background processes that outlive the page.

A launch writes the validated config to `<ws>/runs/envace/.launch/<run>.json` and starts
`python -m worldsmith envace train --config <that> --out <ws>/runs/envace/<run> --json` (or
`envace sweep`) in its own session, so a reload, another page or a closed tab does not stop it.
The run's own `status.json` says how it goes; the launch record (`<run>.job.json`: pid, process
start time, command, log files) covers what status.json cannot: a process that died before the
trainer wrote anything (a bad dataset, an import error) leaves its reason in `<run>.log`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from workbench.common.jobs import child_returncode, plain_run_name, start_detached, tail
from workbench.train.runs import load_run, process_alive, runs_root
from worldsmith.envace.config import EnvACEConfig
from worldsmith.util.atomic import atomic_write_json

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



class LaunchError(ValueError):
    """A run that cannot be launched (bad name, already running, invalid config)."""


@dataclass(frozen=True)
class JobRecord:
    """What the page launched for a run, and whether that process still lives."""

    run: str
    kind: Literal["train", "sweep", "eval"]
    pid: int
    started: float
    command: list[str]
    alive: bool
    returncode: int | None
    log_tail: str


def launch_dir(root: str | Path) -> Path:
    return runs_root(root) / ".launch"


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
    folder = launch_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    out, log = folder / f"{run}.out.json", folder / f"{run}.log"
    pid, started = start_detached(command, workspace=root, stdout=out, stderr=log)
    atomic_write_json(folder / f"{run}.job.json", {"run": run, "kind": kind, "pid": pid, "started": started,
                                                   "command": command, "stdout": str(out), "stderr": str(log)})
    return JobRecord(run=run, kind=kind, pid=pid, started=started, command=command, alive=True,
                     returncode=None, log_tail="")


def job_record(root: str | Path, run: str) -> JobRecord | None:
    """The process the page launched for `run` (None if it never launched one)."""
    path = launch_dir(root) / f"{run}.job.json"
    try:
        record: dict[str, Any] = orjson.loads(path.read_bytes())
        pid, started, command = int(record["pid"]), float(record["started"]), list(record["command"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    returncode = child_returncode(pid)
    running = returncode is None and process_alive(pid, started + 1.0)
    return JobRecord(run=run, kind=record.get("kind", "train"), pid=pid, started=started, command=command,
                     alive=bool(running), returncode=returncode, log_tail=tail(Path(str(record.get("stderr", ""))), 3000))
