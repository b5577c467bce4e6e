"""Background processes the workbench launches (evaluation runs, training runs, sweeps) that outlive the page.

A job is started detached in its own session (a reload, another page or a closed tab does not stop it), with its
stdout and stderr in files; the caller records its pid and start time, and `alive` tells a live job from a
recycled pid. Each child of this server has a daemon thread waiting on it, so it is reaped the moment it exits
(no zombie lingers until a page happens to poll it) and its exit code is kept.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from worldsmith.util.names import InvalidName, check_name

__all__ = ["alive", "child_returncode", "plain_run_name", "start_detached", "tail"]

_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}  # started by this server process: polled to reap them


def plain_run_name(name: str, error: type[Exception] = ValueError) -> str:
    """A run name by the library's one rule (`util.names.check_name`); else `error` says what is allowed."""
    try:
        return check_name(name.strip(), "run")
    except InvalidName as invalid:
        raise error(str(invalid)) from None


def start_detached(command: Sequence[str], *, workspace: str | Path, stdout: Path, stderr: Path,
                   cwd: str | Path | None = None) -> tuple[int, float]:
    """Start `command` in its own session with the workspace in its environment; (pid, process start time)."""
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(Path(workspace).resolve()), "PYTHONUNBUFFERED": "1"}
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(list(command), cwd=str(cwd or os.getcwd()), env=env, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=err, start_new_session=True, close_fds=True)
    _CHILDREN[process.pid] = process
    threading.Thread(target=process.wait, name=f"reap-{process.pid}", daemon=True).start()
    try:
        started = psutil.Process(process.pid).create_time()
    except psutil.Error:  # a process that already ended has no start time to read
        started = time.time()
    return process.pid, started


def child_returncode(pid: int) -> int | None:
    """The exit code of a job this server started and that has ended (None: still running, or not ours)."""
    child = _CHILDREN.get(pid)
    return child.poll() if child is not None else None


def alive(pid: int, started: float) -> bool:
    """Whether the job started at `started` still runs under `pid` (a reused pid or a zombie is not it)."""
    if child_returncode(pid) is not None:  # reaps our own child once it exits
        return False
    try:
        process = psutil.Process(pid)
        if abs(process.create_time() - started) > 1.0:
            return False
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def tail(path: Path, limit: int = 4000) -> str:
    """The end of a log file (empty when it cannot be read)."""
    try:
        return path.read_bytes()[-limit:].decode("utf-8", errors="replace")
    except OSError:
        return ""
