"""Moved to `worldsmith.sim.sources.views` (its answer source lives there); re-exported for old imports."""

from worldsmith.sim.sources.views import Edit, ViewEdits

__all__ = ["Edit", "ViewEdits"]
