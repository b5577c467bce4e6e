"""Staging folders: where a writer prepares files before an atomic rename, and sweeping a killed writer's away.

A staging folder's name starts with `.staging-<pid>-`: the writer's process id. A folder whose writer is gone
(no such live process on this machine, and the folder older than `MIN_AGE_S`, so a pid recycled in between
cannot hide it for long) or that is older than `MAX_AGE_S` whatever its name says (another machine's writer on a
shared disk, a name from an older version) is stale. Stores sweep their staging folders when they open or
write, so a kill -9 mid-write leaves nothing behind for long and nothing half-written is ever listed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from worldsmith.util.processes import process_alive

__all__ = ["MAX_AGE_S", "MIN_AGE_S", "PREFIX", "make_staging", "sweep_stale"]

PREFIX = ".staging-"
MIN_AGE_S = 60.0
MAX_AGE_S = 24 * 3600.0
_OWNER = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")


def make_staging(parent: Path) -> Path:
    """A new staging folder in `parent` named for this process."""
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))


def sweep_stale(parent: Path, *, now: float | None = None) -> list[Path]:
    """Remove the stale staging folders in `parent` (see module doc); the ones removed."""
    if not parent.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for path in parent.iterdir():
        if not path.name.startswith(PREFIX) or not path.is_dir():
            continue
        try:
            age = now - path.stat().st_mtime
        except OSError:
            continue
        owner = _OWNER.match(path.name)
        gone = owner is None or not process_alive(int(owner.group(1)), path.stat().st_mtime)
        if (gone and age > MIN_AGE_S) or age > MAX_AGE_S:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
