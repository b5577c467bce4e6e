"""Write files so a reader never sees half of one: write a temp file beside it, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json"]


@contextlib.contextmanager
def atomic_write(path: Path, mode: str = "wb", *, private: bool = False) -> Iterator[IO[Any]]:
    """Open a temp file next to `path`; on success fsync and rename over `path`, else delete it. `private`: the
    file stays readable by its owner only (mode 0600), as it is from its first byte on."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if not private:
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file what open() would
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_bytes(path: Path, data: bytes, *, private: bool = False) -> None:
    with atomic_write(path, private=private) as handle:
        handle.write(data)


def atomic_write_json(path: Path, value: Any) -> None:
    """JSON with sorted keys and indentation, so files diff well in git."""
    atomic_write_bytes(
        path, orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    )
