"""The progress callback of long runs (evaluations, held-out scoring, checkpoint evaluation)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress"]

Progress = Callable[[int, int, str], None]
"""Called as `progress(done, total, what)`: units done, units in all, what just finished. The worldbook
build reports stages instead: `worldsmith.worldbook.pipeline.StageProgress` events (a stage started or finished)."""
