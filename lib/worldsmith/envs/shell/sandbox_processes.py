"""Host-side bookkeeping of the sandbox's processes: /proc walks and pidfds.

Why pidfds: the host signals processes of a sandbox it does not own the pid space of; a pidfd
keeps pointing at the same process, so a reused pid never receives a signal meant for another.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["children_of", "descendants", "open_pidfd", "pidfds_work", "send_signal", "stat_fields"]


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name: [state, ppid, ...]; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].decode("ascii", "replace").split()


def children_of(pid: int) -> list[int]:
    """Direct children of a host process (the kernel's children lists, else a /proc scan)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                found += [int(child) for child in handle.read().split()]
        except FileNotFoundError:  # kernel without CONFIG_PROC_CHILDREN
            return [other for other in _all_pids() if (stat_fields(other) or ["", ""])[1] == str(pid)]
        except OSError:
            continue
    return found


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, each once: the walk is not atomic, and a child whose parent exits meanwhile is
    re-parented to the sandbox's init, where the walk may meet it a second time."""
    found: list[int] = []
    seen: set[int] = set()
    queue = children_of(pid)
    while queue:
        child = queue.pop()
        if child in seen:
            continue
        seen.add(child)
        found.append(child)
        queue += children_of(child)
    return found


def open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def send_signal(pidfd: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(pidfd, signum)


def pidfds_work() -> bool:
    """Pidfds (Linux >= 5.3) let the host signal sandbox processes without ever hitting a reused pid."""
    fd = open_pidfd(os.getpid())
    if fd is None:
        return False
    os.close(fd)
    return True
