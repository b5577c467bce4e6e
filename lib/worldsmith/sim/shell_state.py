"""Moved to `worldsmith.sim.sources.shell` (its answer source lives there); re-exported for old imports."""

from worldsmith.sim.sources.shell import ShellTracker

__all__ = ["ShellTracker"]
