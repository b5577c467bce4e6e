"""Choosing among the harness's answer sources, and measuring them held out (`Worldbook.routes`).

`choose_route` picks the answer for a turn from the sources that gave one (a rule, episode state,
memory): the best source whose held-out replay was not worse than nearest evidence for
this action, else none
(nearest evidence answers). `sim.route_learning` measures that table by cross-fitting. Its `suffix` row
scores answers with their learned trailing line adjusted (`sim.suffixes`) against the same answers
left alone: the harness adjusts only where that row is not worse.
"""

from __future__ import annotations

from collections.abc import Sequence

from worldsmith.sim.trackers import Proposal
from worldsmith.worldbook.routing import RouteTable

__all__ = ["PRIORITY", "ROUTE_NAMES", "choose_route"]

# Sources in the order they are preferred when their held-out records tie (or there is no record).
PRIORITY = ("rule", "shell", "entity", "fields", "scope", "inventory", "place_memory", "map", "place_view",
            "place_form", "memory_state", "memory", "scope_form", "aligned_evidence", "place_evidence")
# Sources a harness trusts without a held-out record (an older book, or a source never seen answering).
_TRUSTED_UNMEASURED = frozenset({"rule", "shell", "entity", "place_memory", "map", "memory"})
# Sources whose worth depends on the action (a place's view answers `look`, not `unlock`): never judged by their
# pooled record, only by the action's own. (`scope`, a refusal of things not in view, is one answer the whole
# environment gives: an action too rare to have its own record is judged by the pooled one.)
_PER_ACTION_ONLY = frozenset({"place_view", "place_form", "place_evidence", "aligned_evidence", "scope_form",
                              "inventory", "fields"})
# The audit route each source is reported under.
ROUTE_NAMES = {"rule": "fast_path", "memory": "fallback:episode_memory", "entity": "state:entity", "shell": "state:shell",
               "memory_state": "state:memory",
               "place_memory": "state:place_memory", "map": "state:map", "place_view": "state:place_view",
               "place_evidence": "evidence:place", "aligned_evidence": "evidence:aligned",
               "place_form": "state:place_form", "scope": "state:scope", "scope_form": "state:scope_form",
               "inventory": "state:inventory", "fields": "state:fields"}


def _rank(source: str) -> int:
    return PRIORITY.index(source) if source in PRIORITY else len(PRIORITY)


def choose_route(table: RouteTable | None, action: str,
                 proposals: Sequence[Proposal]) -> tuple[Proposal | None, list[str]]:
    """(the proposal to answer with, or None for nearest evidence; notes on why)."""
    ranked = sorted(proposals, key=lambda p: _rank(p.source))
    if table is None:
        chosen = next((p for p in ranked if p.source in _TRUSTED_UNMEASURED), None)
        return chosen, []
    accepted: list[tuple[float, int, Proposal]] = []
    notes: list[str] = []
    for proposal in ranked:
        stats = table.stats(action, proposal.key, fallback=proposal.source,
                            pooled=proposal.source not in _PER_ACTION_ONLY)
        if stats is None:
            if proposal.source in _TRUSTED_UNMEASURED:
                accepted.append((-1.0, _rank(proposal.source), proposal))
            continue
        if stats.not_worse_than_nearest:
            accepted.append((stats.accuracy, _rank(proposal.source), proposal))
        else:
            notes.append(f"{proposal.key} not used: held out it won {stats.wins} and lost {stats.losses} turns "
                         f"against nearest evidence for {action!r}")
    if not accepted:
        return None, notes
    accepted.sort(key=lambda item: (-item[0], item[1]))
    chosen = accepted[0][2]
    for _, _, rival in accepted[1:]:  # where two trusted sources disagree, the one that won their duels held out
        if rival.observation != chosen.observation and table.prefers(action, rival.key, chosen.key):
            notes.append(f"{rival.key} over {chosen.key}: it won more of their held-out disagreements")
            chosen = rival
    return chosen, notes
