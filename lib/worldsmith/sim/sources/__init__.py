"""Answer sources of the harness, one module each, with the tracker shape: `reset(opening)`, `observe(name,
arguments, observation)`, `propose(name, arguments, line) -> list[Proposal]`, `snapshot()` (`records`: tool-API
records and write rules; `queries`, `preconditions`: look-ups and learned errors, built by `tools`)."""

from worldsmith.sim.sources.preconditions import PreconditionSource
from worldsmith.sim.sources.queries import QuerySource
from worldsmith.sim.sources.tools import tool_sources

__all__ = ["PreconditionSource", "QuerySource", "tool_sources"]
