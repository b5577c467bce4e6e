"""Handing freed memory back to the system after sessions close.

glibc keeps what a long-running server freed in its per-thread arenas, so a server that held many
sessions at once stays at that high-water mark although nothing is in use any more (measured in
`benchmarks/serve_sessions.py`: flat after the first burst, not a leak). `trim_memory` asks glibc to
return it (`malloc_trim`); elsewhere it does nothing. Calls closer together than `min_interval`
seconds are skipped, so closing many sessions in a row costs one trim.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable

__all__ = ["trim_memory"]

_lock = threading.Lock()
_last = 0.0


def _load_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim.restype = ctypes.c_int
    return trim


_TRIM = _load_trim()


def trim_memory(min_interval: float = 2.0) -> bool:
    """Return freed heap memory to the system (glibc only); whether a trim ran."""
    global _last
    if _TRIM is None:
        return False
    with _lock:
        now = time.monotonic()
        if now - _last < min_interval:
            return False
        _last = now
    _TRIM(0)
    return True
