"""Moved to `worldsmith.sim.sources.scope` (its answer source lives there); re-exported for old imports."""

from worldsmith.sim.sources.scope import LEVELS, MIN_TURNS, Refusal, ScopeTracker

__all__ = ["LEVELS", "MIN_TURNS", "Refusal", "ScopeTracker"]
