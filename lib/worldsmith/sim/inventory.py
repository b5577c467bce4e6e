"""Moved to `worldsmith.sim.sources.inventory` (its answer source lives there); re-exported for old imports."""

from worldsmith.sim.sources.inventory import (
    COMMON_ANSWERS,
    Carriers,
    InventoryTracker,
    full_name,
    learn_carriers,
    names,
    phrases,
)

__all__ = ["COMMON_ANSWERS", "Carriers", "InventoryTracker", "full_name", "learn_carriers", "names", "phrases"]
