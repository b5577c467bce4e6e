"""The episode trackers' old home: each now lives with its answer source in `sim.sources` (re-exported here)."""

from worldsmith.sim.sources.aligned import RARE_PAIR_SHARE, AlignedEvidence
from worldsmith.sim.sources.base import CandidateAnswer
from worldsmith.sim.sources.entities import EntityTracker, structured_layout
from worldsmith.sim.sources.places import DEFAULT_PLACE_PATTERNS, ROOM_PATTERNS, PlaceTracker
from worldsmith.sim.turn_counter import TurnCounter

__all__ = [
    "DEFAULT_PLACE_PATTERNS",
    "RARE_PAIR_SHARE",
    "ROOM_PATTERNS",
    "AlignedEvidence",
    "EntityTracker",
    "PlaceTracker",
    "CandidateAnswer",
    "TurnCounter",
    "structured_layout",
]
