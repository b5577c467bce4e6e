"""Replace a whole folder so a reader never sees half of one: build it beside the target, then rename."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["publish_dir", "replace_dir", "replacing_dir", "staging_dir"]


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


@contextlib.contextmanager
def replacing_dir(target: Path, purpose: str = "staging") -> Iterator[Path]:
    """A staging folder beside `target` to write into: on success it replaces `target` (`replace_dir`), on any
    failure it is deleted, so `target` is the old folder or the whole new one."""
    staging = staging_dir(target, purpose)
    try:
        yield staging
        replace_dir(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def publish_dir(staging: Path, target: Path) -> bool:
    """Rename `staging` to `target`, which must be absent or an empty folder: never replaces another writer's work.

    False, with `staging` deleted, when a non-empty `target` got there first; the caller knows whether that is a
    lost race (a cache) or a conflict (a store). Use `replace_dir` to replace on purpose.
    """
    try:
        os.rename(staging, target)  # POSIX renames a folder over an empty one atomically
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        shutil.rmtree(staging, ignore_errors=True)
        return False
    return True
