"""Choosing among the harness's answer sources, and measuring them held out (`Worldbook.routes`).

`choose_route` picks the answer for a turn from the sources that gave one (a rule, episode state,
memory): the best source whose held-out replay was not worse than nearest evidence for
this action, else none
(nearest evidence answers). `learn_routes` measures that table by cross-fitting: each fold's
worldbook is built without some trajectory families, then a harness on it replays those families
with teacher forcing and every source's answer is scored beside nearest evidence's. Its `suffix` row
scores answers with their learned trailing line adjusted (`sim.suffixes`) against the same answers
left alone: the harness adjusts only where that row is not worse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from worldsmith.sim.base import action_line
from worldsmith.sim.scoring import exact_match
from worldsmith.sim.trackers import Proposal
from worldsmith.traces.model import Action, Episode
from worldsmith.worldbook.routing import RouteTable

if TYPE_CHECKING:
    from worldsmith.sim.harness import Harness
    from worldsmith.worldbook.build import BuildConfig

__all__ = ["PRIORITY", "ROUTE_NAMES", "choose_route", "learn_routes"]

# Sources in the order they are preferred when their held-out records tie (or there is no record).
PRIORITY = ("rule", "shell", "record_write", "record_read", "entity", "fields", "scope", "inventory", "place_memory",
            "map", "place_view", "place_form", "memory_state", "memory", "scope_form", "record_store",
            "aligned_evidence", "place_evidence")
# Sources a harness trusts without a held-out record (an older book, or a source never seen answering).
_TRUSTED_UNMEASURED = frozenset({"rule", "shell", "entity", "place_memory", "map", "memory", "record_write", "record_read"})
# Sources whose worth depends on the action (a place's view answers `look`, not `unlock`): never judged by their
# pooled record, only by the action's own. (`scope`, a refusal of things not in view, is one answer the whole
# environment gives: an action too rare to have its own record is judged by the pooled one.)
_PER_ACTION_ONLY = frozenset({"place_view", "place_form", "place_evidence", "aligned_evidence", "scope_form",
                              "inventory", "fields", "record_read", "record_store"})
# The audit route each source is reported under.
ROUTE_NAMES = {"rule": "fast_path", "memory": "fallback:episode_memory", "entity": "state:entity", "shell": "state:shell",
               "memory_state": "state:memory",
               "place_memory": "state:place_memory", "map": "state:map", "place_view": "state:place_view",
               "place_evidence": "evidence:place", "aligned_evidence": "evidence:aligned",
               "place_form": "state:place_form", "scope": "state:scope", "scope_form": "state:scope_form",
               "inventory": "state:inventory", "fields": "state:fields", "record_write": "state:record_write",
               "record_read": "state:record_read", "record_store": "evidence:record_store"}


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


def _record_suffixes(table: RouteTable, harness: Harness, action: Action, name: str, arguments: dict[str, Any],
                     bases: set[str], reference: str) -> None:
    """Each answer the turn could get, with its learned trailing line added or removed, against itself unchanged:
    the `suffix` row says whether adjusting helps this action held out."""
    line = action_line(action)
    for base in sorted(bases):
        adjusted = harness.suffixes.adjust(name, arguments, line, base)
        if adjusted is not None:
            table.record(name, "suffix", bool(exact_match(adjusted[0], reference)), bool(exact_match(base, reference)))


def learn_routes(episodes: Sequence[Episode], config: BuildConfig, *, folds: int = 5) -> RouteTable | None:
    """The route table by cross-fitting `episodes` over trajectory families (None with fewer than 2 families)."""
    from worldsmith.sim.harness import Harness
    from worldsmith.worldbook.build import build_worldbook, family_folds, trajectory_family

    folds = min(folds, len({trajectory_family(e) for e in episodes}))
    if folds < 2:
        return None
    assignment = family_folds(episodes, folds)
    inner = replace(config, route_folds=0)
    table = RouteTable(folds=folds)
    for fold in range(folds):
        held = [e for e in episodes if assignment[trajectory_family(e)] == fold]
        kept = [e for e in episodes if assignment[trajectory_family(e)] != fold]
        book = build_worldbook(kept, name="routes", config=inner).book
        harness = Harness(book)
        nearest = harness.nearest  # the baseline every source is scored against
        for episode in held:
            harness.start(episode.model_copy(update={"turns": []}))
            for turn in episode.turns:
                reference = turn.observation.text
                name, arguments, _ = harness.canonical(turn.action)
                proposals, _ = harness.proposals(turn.action, name, arguments)
                nearest_exact = None
                answer = nearest.nearest(turn.action).observation if nearest is not None else None
                if answer is not None:
                    nearest_exact = bool(exact_match(answer, reference))
                if harness.suffixes.applies(name):
                    bases = {proposal.observation for proposal in proposals}
                    if answer is not None:
                        bases.add(answer)
                    _record_suffixes(table, harness, turn.action, name, arguments, bases, reference)
                exact: dict[str, tuple[str, bool]] = {}
                for proposal in proposals:
                    if proposal.key not in exact:
                        right = bool(exact_match(proposal.observation, reference))
                        exact[proposal.key] = (proposal.observation, right)
                        table.record(name, proposal.key, right, nearest_exact)
                        if proposal.key != proposal.source:
                            table.record(name, proposal.source, right, nearest_exact)
                for winner, (said, right) in exact.items():
                    for loser, (other, wrong) in exact.items():
                        if right and not wrong and said != other:
                            table.record_duel(name, winner, loser)
                table.turns += 1
                harness.observe(turn.action, reference)
    return table
