"""Training runs and sweeps launched from the Train page as background processes that outlive the page.

A launch writes the validated config to `<ws>/runs/envace/.launch/<run>.json` and starts
`python -m worldsmith envace train --config <that> --out <ws>/runs/envace/<run> --json` (or
`envace sweep`) in its own session, so a reload, another page or a closed tab does not stop it.
The run's own `status.json` says how it goes; the launch record (`<run>.job.json`: pid, process
start time, command, log files) covers what status.json cannot: a process that died before the
trainer wrote anything (a bad dataset, an import error) leaves its reason in `<run>.log`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from workbench.components.train_runs import load_run, process_alive, runs_root
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

_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}  # started by this server: polled so they are reaped


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
    """One plain folder name under runs/envace (no separators, not hidden)."""
    name = name.strip()
    if not name or name.startswith(".") or "/" in name or "\\" in name or name in {".", ".."}:
        raise LaunchError(f"run name {name!r}: use a plain folder name (letters, digits, '-', '_')")
    return name


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
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(Path(root).resolve()), "PYTHONUNBUFFERED": "1"}
    with open(out, "wb") as stdout, open(log, "wb") as stderr:
        process = subprocess.Popen(command, cwd=os.getcwd(), env=env, stdin=subprocess.DEVNULL,
                                   stdout=stdout, stderr=stderr, start_new_session=True, close_fds=True)
    _CHILDREN[process.pid] = process
    try:
        import psutil

        started = psutil.Process(process.pid).create_time()
    except Exception:  # noqa: BLE001 - a process that already ended has no start time to read
        started = time.time()
    atomic_write_json(folder / f"{run}.job.json", {"run": run, "kind": kind, "pid": process.pid, "started": started,
                                                   "command": command, "stdout": str(out), "stderr": str(log)})
    return JobRecord(run=run, kind=kind, pid=process.pid, started=started, command=command, alive=True,
                     returncode=None, log_tail="")


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_bytes()[-limit:].decode("utf-8", errors="replace")
    except OSError:
        return ""


def job_record(root: str | Path, run: str) -> JobRecord | None:
    """The process the page launched for `run` (None if it never launched one)."""
    path = launch_dir(root) / f"{run}.job.json"
    try:
        record: dict[str, Any] = orjson.loads(path.read_bytes())
        pid, started, command = int(record["pid"]), float(record["started"]), list(record["command"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    child = _CHILDREN.get(pid)
    returncode = child.poll() if child is not None else None
    alive = returncode is None and process_alive(pid, started + 1.0)
    return JobRecord(run=run, kind=record.get("kind", "train"), pid=pid, started=started, command=command,
                     alive=bool(alive), returncode=returncode, log_tail=_tail(Path(str(record.get("stderr", "")))))
