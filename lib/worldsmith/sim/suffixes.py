"""Moved to `worldsmith.sim.sources.suffixes` (its answer source lives there); re-exported for old imports."""

from worldsmith.sim.sources.suffixes import MIN_ACCURACY, MIN_SUPPORT, SuffixConditions, SuffixRule, split_suffix

__all__ = ["MIN_ACCURACY", "MIN_SUPPORT", "SuffixConditions", "SuffixRule", "split_suffix"]
