"""Choosing among the harness's answer sources, and measuring them held out (`Worldbook.routes`).

`choose_route` picks the answer for a turn from the sources that gave one (a rule, episode state,
memory): the best source whose held-out replay was not worse than nearest evidence for
this action, else none
(nearest evidence answers). Which answers are trusted unmeasured, judged per action only, and their
priority and audit route are declared with each source (`sim.sources`): `PRIORITY`, `ROUTE_NAMES`
and the sets here are derived from that registry. `sim.route_learning` measures that table by cross-fitting. Its
`suffix` row
scores answers with their learned trailing line adjusted (`sim.sources.suffixes`) against the same answers
left alone: the harness adjusts only where that row is not worse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worldsmith.sim.sources.base import CandidateAnswer
from worldsmith.sim.sources.registry import answers, routed_answers, routing_order
from worldsmith.worldbook.route_table import RouteTable

__all__ = ["PRIORITY", "ROUTE_NAMES", "choose_route", "route_name"]  # noqa: F822 (`__getattr__`)


def __getattr__(name: str) -> Any:
    """`PRIORITY`, `ROUTE_NAMES` and the trusted / per-action sets, derived from the source registry on each use (a
    plugin's source counts from the moment it registers)."""
    if name == "PRIORITY":  # answer names in the order they are preferred when their held-out records tie
        return tuple(answer.name for answer in routed_answers())
    if name == "ROUTE_NAMES":  # the audit route each answer is reported under
        return {answer.name: answer.audit_route for answer in routed_answers()}
    if name == "_TRUSTED_UNMEASURED":  # answers trusted without a held-out record (an older book, a new source)
        return frozenset(answer.name for answer in routed_answers() if answer.trusted)
    if name == "_PER_ACTION_ONLY":  # answers whose worth depends on the action: never judged by the pooled record
        return frozenset(answer.name for answer in routed_answers() if answer.per_action)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def route_name(source: str) -> str:
    """The audit route an answer name is reported under ("state:<name>" for a name no source registered)."""
    answer = answers().get(source)
    return answer.audit_route if answer is not None else f"state:{source}"


def choose_route(table: RouteTable | None, action: str,
                 proposals: Sequence[CandidateAnswer]) -> tuple[CandidateAnswer | None, list[str]]:
    """(the proposal to answer with, or None for nearest evidence; notes on why)."""
    known = routing_order()

    def rank(source: str) -> float:
        answer = known.get(source)
        return answer.rank if answer is not None else float("inf")

    def trusted(source: str) -> bool:
        return source in known and known[source].trusted

    ranked = sorted(proposals, key=lambda p: rank(p.source))
    if table is None:
        chosen = next((p for p in ranked if trusted(p.source)), None)
        return chosen, []
    accepted: list[tuple[float, float, CandidateAnswer]] = []
    notes: list[str] = []
    for proposal in ranked:
        per_action = proposal.source in known and known[proposal.source].per_action
        must_win = proposal.source in known and known[proposal.source].must_win
        stats = table.stats(action, proposal.key, fallback=proposal.source, pooled=not per_action)
        if stats is None:
            if trusted(proposal.source):
                accepted.append((-1.0, rank(proposal.source), proposal))
            continue
        if stats.not_worse_than_nearest and (not must_win or stats.wins > stats.losses):
            accepted.append((stats.accuracy, rank(proposal.source), proposal))
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
