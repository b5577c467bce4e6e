"""Answer sources in modules of their own, each with the tracker shape: `reset(opening)`, `observe(name,
arguments, observation)`, `propose(name, arguments, line) -> list[Proposal]`, `snapshot()`."""

from worldsmith.sim.sources.preconditions import PreconditionSource
from worldsmith.sim.sources.queries import QuerySource
from worldsmith.sim.sources.tools import tool_sources

__all__ = ["PreconditionSource", "QuerySource", "tool_sources"]
