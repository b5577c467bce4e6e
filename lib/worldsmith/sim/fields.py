"""Moved to `worldsmith.sim.sources.fields` (its answer source lives there); re-exported for old imports."""

from worldsmith.sim.sources.fields import MIN_SUPPORT, SHARE, FieldTracker, Relation

__all__ = ["MIN_SUPPORT", "SHARE", "FieldTracker", "Relation"]
