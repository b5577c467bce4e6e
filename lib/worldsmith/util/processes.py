"""Child processes started from scripts, notebooks and Streamlit pages alike, and whether a process lives."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

__all__ = ["main_module_hidden", "process_alive"]


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


def process_alive(pid: int | None, started_before: float | None = None) -> bool:
    """Whether `pid` is a live process on this machine (a zombie is not), and, with `started_before`, one that
    existed by then (a recycled pid started later is not the same process)."""
    import psutil

    if not pid:
        return False
    try:
        process = psutil.Process(int(pid))
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return started_before is None or process.create_time() <= float(started_before) + 1.0
    except (psutil.Error, ValueError):
        return False
