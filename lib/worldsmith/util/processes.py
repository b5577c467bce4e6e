"""Child processes started from scripts, notebooks and Streamlit pages alike, and whether a process lives."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

__all__ = ["main_module_hidden", "process_alive", "process_start_time"]


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Start spawned processes without re-running the parent's `__main__`.

    `spawn` re-imports the main script in the child unless it has no `__file__`/`__spec__`. A
    script without an `if __name__ == "__main__":` guard would run again (and fail: vLLM's engine
    core, collection workers); under Streamlit the main script is a workbench page. Children
    started inside this block get their target from an importable module, never from `__main__`.
    """
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved_spec = getattr(main, "__spec__", None)
    saved_file = main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__spec__ = saved_spec
        if saved_file is not None:
            main.__file__ = saved_file


def process_start_time(pid: int | None) -> float | None:
    """When the live process `pid` started (epoch seconds); None when there is none (or only a zombie)."""
    import psutil

    if not pid:
        return None
    try:
        process = psutil.Process(int(pid))
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except (psutil.Error, ValueError):
        return None


def process_alive(pid: int | None, started_before: float | None = None) -> bool:
    """Whether `pid` is a live process on this machine (a zombie is not), and, with `started_before`, one that
    existed by then (a recycled pid started later is not the same process)."""
    try:
        before = None if started_before is None else float(started_before)
    except (TypeError, ValueError):
        return False
    started = process_start_time(pid)
    return started is not None and (before is None or started <= before + 1.0)
