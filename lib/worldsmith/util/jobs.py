"""Background jobs (evaluation runs, training runs, sweeps) that outlive whoever started them.

A job is started detached in its own session (a page reload, a closed tab or the end of a command does not stop
it), with its stdout and stderr in files. Its `Job` record (pid, process start time, command, log paths, exit
code) is written atomically to `<folder>/<name><suffix>`, so a page, another server or `worldsmith jobs` finds it
again from the record and the pid alone. `Job.alive` is the one liveness check: the pid must still belong to the
process started at `started` (a recycled pid or a zombie is not the job). Each child of this process has a daemon
thread waiting on it, so it is reaped the moment it exits and its exit code is kept for `JobFolder.load`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import orjson

from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.names import typed_name
from worldsmith.util.processes import process_start_time

__all__ = ["Job", "JobFolder", "JobState", "JsonJobOutcome", "alive", "child_returncode", "failure_message",
           "json_job_outcome", "plain_run_name", "read_json_lines", "read_json_object", "start_detached", "stop",
           "tail"]

JobState = Literal["running", "finished", "failed", "ended"]  # ended: gone, its exit code unknown here

_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}  # started by this process: their exit codes, once reaped
_SAME_PROCESS_S = 1.0  # a process start time read back within this of the recorded one is the same process
_REAP_WAIT_S = 5.0  # how long an ended child's exit code may take to be stored by its reaper thread


def plain_run_name(name: str, error: type[Exception] = ValueError) -> str:
    """A run name by the library's one rule (`util.names.check_name`); else `error` says what is allowed."""
    return typed_name(name, "run", error)


def start_detached(command: Sequence[str], *, workspace: str | Path, stdout: Path, stderr: Path,
                   cwd: str | Path | None = None) -> tuple[int, float]:
    """Start `command` in its own session with the workspace in its environment; (pid, process start time)."""
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(Path(workspace).resolve()), "PYTHONUNBUFFERED": "1"}
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(list(command), cwd=str(cwd or os.getcwd()), env=env, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=err, start_new_session=True, close_fds=True)
    _CHILDREN[process.pid] = process
    threading.Thread(target=process.wait, name=f"reap-{process.pid}", daemon=True).start()
    started = process_start_time(process.pid)
    return process.pid, time.time() if started is None else started  # one that already ended has no start time


def child_returncode(pid: int) -> int | None:
    """The exit code of a job this process started and that has ended (None: still running, or not ours).

    A child already reaped by its reaper thread, which has not yet stored the code, is waited for briefly: `poll`
    says None in that window, and the job would read as ended without an exit code."""
    child = _CHILDREN.get(pid)
    if child is None:
        return None
    code = child.poll()
    if code is None and process_start_time(pid) is None:
        try:
            code = child.wait(timeout=_REAP_WAIT_S)
        except subprocess.TimeoutExpired:
            return None
    return code


def alive(pid: int, started: float) -> bool:
    """Whether the job started at `started` still runs under `pid` (a reused pid or a zombie is not it)."""
    if child_returncode(pid) is not None:  # reaps our own child once it exits
        return False
    now = process_start_time(pid)
    return now is not None and abs(now - started) <= _SAME_PROCESS_S


def read_json_lines(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects a job appended to `path`, one per line (its progress file); a torn last line from a writer
    killed mid-line, and anything not an object, are skipped."""
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            rows.append(value)
    return rows


def tail(path: Path | str, limit: int = 4000) -> str:
    """The end of a log file (empty when it cannot be read)."""
    try:
        return Path(path).read_bytes()[-limit:].decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Job:
    """What was started for a named run, as its record file keeps it."""

    run: str
    kind: str
    pid: int
    started: float
    command: list[str]
    stdout: str
    stderr: str
    returncode: int | None = None

    @property
    def alive(self) -> bool:
        return alive(self.pid, self.started)

    @property
    def state(self) -> JobState:
        """running, or how it ended: finished (exit 0), failed (another exit code) or ended (code unknown)."""
        if self.alive:
            return "running"
        if self.returncode is None:
            return "ended"
        return "finished" if self.returncode == 0 else "failed"

    def log_tail(self, limit: int = 4000) -> str:
        return tail(self.stderr, limit)

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "kind": self.kind, "pid": self.pid, "started": self.started,
                "command": self.command, "stdout": self.stdout, "stderr": self.stderr, "returncode": self.returncode}

    @classmethod
    def from_json(cls, value: object, *, kind: str) -> Job:
        """A record as `to_json` (or an older writer without `kind`/`returncode`) wrote it; ValueError if not one."""
        if not isinstance(value, dict):
            raise ValueError("a job record is a JSON object")
        try:
            returncode = value.get("returncode")
            return cls(run=str(value["run"]), kind=str(value.get("kind") or kind), pid=int(value["pid"]),
                       started=float(value["started"]), command=[str(part) for part in value["command"]],
                       stdout=str(value.get("stdout", "")), stderr=str(value.get("stderr", "")),
                       returncode=None if returncode is None else int(returncode))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a job record: {error}") from None


def read_json_object(path: str | Path) -> dict[str, Any] | None:
    """The JSON object a finished `--json` command printed to `path`; None when there is none."""
    try:
        value = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class JsonJobOutcome:
    """How a job running a `--json` command stands, read from its record, its stdout and the rows it appended."""

    running: bool
    state: JobState  # "ended" settled: finished when it printed a result without an error, else failed
    result: dict[str, Any] | None  # what it printed (once ended): its outcome, or {"error": ...}
    elapsed_s: float
    last_t: float  # when it appended its last row (its start before the first)

    def remaining_s(self, started: float, fraction: float) -> float:
        """Time left at the pace so far, `fraction` of the work done by `last_t`."""
        return max(0.0, (self.last_t - started) / fraction - self.elapsed_s)


def json_job_outcome(job: Job, rows: Sequence[Mapping[str, Any]]) -> JsonJobOutcome:
    """The outcome of `job` (a `--json` command appending progress `rows` with a `t` each): a job started by
    another process has no exit code here, so its result decides; a result with an error is a failure."""
    running = job.alive
    result = None if running else read_json_object(job.stdout)
    state: JobState = job.state
    if not running and state == "ended":
        state = "finished" if result is not None and "error" not in result else "failed"
    if state == "finished" and (result is None or "error" in result):
        state = "failed"
    last_t = float(rows[-1].get("t", job.started)) if rows else job.started
    elapsed = (time.time() if running else max(last_t, job.started)) - job.started
    return JsonJobOutcome(running=running, state=state, result=result, elapsed_s=elapsed, last_t=last_t)


def failure_message(state: JobState, result: dict[str, Any] | None, log_tail: str, fallback: str) -> str | None:
    """Why a job failed (its printed error, else its log's last line, else `fallback`); None unless it failed."""
    if state in ("running", "finished"):
        return None
    message = (result or {}).get("error")
    return str(message) if message else (log_tail.strip().splitlines() or [fallback])[-1]


def stop(job: Job, *, grace_s: float = 10.0) -> bool:
    """Stop a running job: SIGTERM to its process group, SIGKILL after `grace_s`. False if it was not running."""
    if not job.alive:
        return False
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(job.pid, sig)  # started in its own session: its group is its pid, children included
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while job.alive and time.monotonic() < deadline:
            time.sleep(0.05)
        if not job.alive:
            break
    return True


@dataclass(frozen=True)
class JobFolder:
    """A folder of job records `<name><suffix>`, each with its `<name>.out.json` (stdout) and `<name>.log`."""

    path: Path
    kind: str  # the kind of a record that does not say (older records)
    suffix: str = ".json"

    def record_path(self, run: str) -> Path:
        return self.path / f"{run}{self.suffix}"

    def start(self, run: str, command: Sequence[str], *, workspace: str | Path, kind: str | None = None,
              cwd: str | Path | None = None) -> Job:
        """Start `command` detached for `run` and write its record (the caller checks it is not running)."""
        self.path.mkdir(parents=True, exist_ok=True)
        out, log = self.path / f"{run}.out.json", self.path / f"{run}.log"
        pid, started = start_detached(command, workspace=workspace, stdout=out, stderr=log, cwd=cwd)
        job = Job(run=run, kind=kind or self.kind, pid=pid, started=started, command=list(command),
                  stdout=str(out), stderr=str(log))
        atomic_write_json(self.record_path(run), job.to_json())
        return job

    def load(self, run: str) -> Job | None:
        """The job recorded for `run` (None: none, or not a job record); an exit code learnt since is saved."""
        path = self.record_path(run)
        try:
            job = Job.from_json(orjson.loads(path.read_bytes()), kind=self.kind)
        except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
            return None
        ended = child_returncode(job.pid)
        if ended is not None and job.returncode is None:
            job = replace(job, returncode=ended)
            atomic_write_json(path, job.to_json())
        return job

    def stop(self, run: str, *, grace_s: float = 10.0) -> bool:
        """Stop the running job of `run` (`stop`); False when there is none or it already ended."""
        job = self.load(run)
        return job is not None and stop(job, grace_s=grace_s)

    def runs(self) -> list[str]:
        """The names that have a record here."""
        if not self.path.is_dir():
            return []
        names = (p.name[: -len(self.suffix)] for p in self.path.glob(f"*{self.suffix}"))
        return sorted(n for n in names if not n.endswith(".out") and not n.startswith("."))

    def jobs(self) -> list[Job]:
        """Every job recorded here, most recent first."""
        found = (self.load(run) for run in self.runs())
        return sorted((job for job in found if job is not None), key=lambda job: job.started, reverse=True)
