"""Replace a whole folder so a reader never sees half of one: build it beside the target, then rename."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["replace_dir", "staging_dir"]


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def staging_dir(target: Path, purpose: str = "staging") -> Path:
    """A new empty folder beside `target` (same file system, so the final rename is atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.{purpose}-", dir=target.parent))
    os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700; give the folder what mkdir would
    return staging


def replace_dir(staging: Path, target: Path) -> None:
    """Rename `staging` to `target`; an existing `target` is moved aside first and deleted after.

    Readers see the old folder or the new one; between the two renames, briefly, none.
    """
    if not target.exists():
        os.rename(staging, target)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, trash / "old")
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(trash / "old", target)
        raise
    finally:
        shutil.rmtree(trash, ignore_errors=True)
