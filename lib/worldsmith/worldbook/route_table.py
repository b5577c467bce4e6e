"""The route table: which answer source beat nearest evidence for each action, on held-out data.

The harness can answer a turn from a rule, from episode state (place memory, the map, entity
records, plain episode memory) or from the nearest recorded transition. Which of them to trust is
an empirical question per action: a rule that renders one user's profile for every user, or a
memory of `go north` from another room, is worse than looking up the closest recording. The
table holds, per action and source, how often the source's answer was exact and how often it won
or lost against nearest evidence on the same turns, measured by cross-fitting the construction
episodes (each fold's book answers its own held-out trajectory families). The harness answers
with a source only where it lost no more turns than it won; otherwise nearest evidence answers and
the audit says why. The table is data in the worldbook (`Worldbook.routes`), so a person can read it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RuleHeldOut", "RouteStats", "RouteTable"]

_STRICT = ConfigDict(extra="forbid")


class RouteStats(BaseModel):
    """One source on one action's held-out turns where it gave an answer."""

    model_config = _STRICT

    proposed: int = Field(default=0, ge=0, description="Turns where the source gave an answer.")
    exact: int = Field(default=0, ge=0, description="Of those, answers equal to the recorded observation.")
    wins: int = Field(default=0, ge=0, description="Exact where nearest evidence was not.")
    losses: int = Field(default=0, ge=0, description="Not exact where nearest evidence was.")

    @property
    def accuracy(self) -> float:
        return self.exact / self.proposed if self.proposed else 0.0

    @property
    def not_worse_than_nearest(self) -> bool:
        """Held out, it lost no more turns to nearest evidence than it won, and it was right at least once (a
        source that was never right has shown nothing)."""
        return self.wins >= self.losses and self.exact > 0

    def absorb(self, other: RouteStats) -> None:
        """Add `other`'s counts (the same source on more turns)."""
        self.proposed += other.proposed
        self.exact += other.exact
        self.wins += other.wins
        self.losses += other.losses

    def add(self, exact: bool, nearest_exact: bool | None) -> None:
        self.proposed += 1
        self.exact += exact
        if nearest_exact is not None:
            self.wins += exact and not nearest_exact
            self.losses += nearest_exact and not exact


class RuleHeldOut(BaseModel):
    """One rule on the held-out turns it answered in the cross-fitting (`worldbook.holdout` reads it)."""

    model_config = _STRICT

    answered: int = Field(default=0, ge=0, description="Held-out turns the rule, learned without them, answered.")
    exact: int = Field(default=0, ge=0, description="Of those, answers equal to the recorded observation.")


class RouteTable(BaseModel):
    """Per action (and pooled over actions) per source: held-out exactness and wins against nearest."""

    model_config = _STRICT

    folds: int = Field(default=0, ge=0, description="Cross-fitting folds the table was measured with (1: one "
                                                    "held-out sample of families, the rest building its book).")
    turns: int = Field(default=0, ge=0, description="Held-out turns replayed.")
    min_turns: int = Field(default=3, ge=1, description="Fewer paired turns than this: the pooled row decides.")
    actions: dict[str, dict[str, RouteStats]] = Field(default_factory=dict)
    pooled: dict[str, RouteStats] = Field(default_factory=dict)
    duels: dict[str, dict[str, int]] = Field(
        default_factory=dict, description='Per action, "A>B": turns where A and B answered differently and A was exact.')
    pooled_duels: dict[str, int] = Field(default_factory=dict)
    rules: dict[str, RuleHeldOut] = Field(
        default_factory=dict, description="Per rule key (`holdout.rule_key`: the same rule in every fold book and "
                                          "the final book): the held-out turns it answered and how many exactly.")

    @property
    def measured_by(self) -> str:
        """How the held-out turns were held out, in words ("5 cross-fitted folds", "one held-out sample")."""
        return "one held-out sample of families" if self.folds == 1 else f"{self.folds} cross-fitted folds"

    def absorb(self, other: RouteTable) -> None:
        """Add another table's turns (a later fold's): every count summed, a key `other` adds first placed after
        this table's keys in `other`'s order, so tables made fold by fold and absorbed in fold order equal one table
        that recorded every fold in turn, key order included."""
        self.turns += other.turns
        for action, sources in other.actions.items():
            _absorb_stats(self.actions.setdefault(action, {}), sources)
        _absorb_stats(self.pooled, other.pooled)
        for action, counts in other.duels.items():
            _absorb_counts(self.duels.setdefault(action, {}), counts)
        _absorb_counts(self.pooled_duels, other.pooled_duels)
        for key, held in other.rules.items():
            mine = self.rules.setdefault(key, RuleHeldOut())
            mine.answered += held.answered
            mine.exact += held.exact

    def record_duel(self, action: str, winner: str, loser: str) -> None:
        """Two sources answered one turn differently and `winner` was exact."""
        key = f"{winner}>{loser}"
        counts = self.duels.setdefault(action, {})
        counts[key] = counts.get(key, 0) + 1
        self.pooled_duels[key] = self.pooled_duels.get(key, 0) + 1

    def prefers(self, action: str, a: str, b: str) -> bool | None:
        """Whether `a` beat `b` more often than the reverse where they disagreed (the action's own duels, else
        pooled); None when they never disagreed."""
        for counts in (self.duels.get(action, {}), self.pooled_duels):
            ab, ba = counts.get(f"{a}>{b}", 0), counts.get(f"{b}>{a}", 0)
            if ab + ba >= (self.min_turns if counts is not self.pooled_duels else 1):
                return ab > ba if ab != ba else None
        return None

    def record_rule(self, key: str, exact: bool) -> None:
        """A rule (by `holdout.rule_key`) answered a held-out turn."""
        held = self.rules.setdefault(key, RuleHeldOut())
        held.answered += 1
        held.exact += exact

    def record(self, action: str, source: str, exact: bool, nearest_exact: bool | None) -> None:
        self.actions.setdefault(action, {}).setdefault(source, RouteStats()).add(exact, nearest_exact)
        self.pooled.setdefault(source, RouteStats()).add(exact, nearest_exact)

    def stats(self, action: str, source: str, fallback: str | None = None, *, pooled: bool = True) -> RouteStats | None:
        """The action's own row when it has enough turns, else the `fallback` source's (a rule form falls back to
        all the action's rules), else (with `pooled`) the source's pooled row, else None."""
        own = self.actions.get(action, {}).get(source)
        if own is not None and own.proposed >= self.min_turns:
            return own
        if fallback is not None and fallback != source:
            return self.stats(action, fallback, pooled=pooled)
        return self.pooled.get(source) if pooled else None

    def rows(self, action: str | None = None) -> list[dict[str, Any]]:
        """One row per (action, source), pooled rows under action "*": what the CLI and the Worldbook page list."""
        tables = [(name, sources) for name, sources in sorted(self.actions.items()) if action in (None, name)]
        if action is None:
            tables.append(("*", self.pooled))
        return [{"action": name, "source": source, "proposed": stats.proposed, "exact": stats.exact,
                 "accuracy": round(stats.accuracy, 4), "wins": stats.wins, "losses": stats.losses,
                 "trusted": stats.not_worse_than_nearest,
                 "decides": name == "*" or stats.proposed >= self.min_turns}
                for name, sources in tables for source, stats in sorted(sources.items())]


def _absorb_stats(into: dict[str, RouteStats], other: dict[str, RouteStats]) -> None:
    for source, stats in other.items():
        into.setdefault(source, RouteStats()).absorb(stats)


def _absorb_counts(into: dict[str, int], other: dict[str, int]) -> None:
    for key, count in other.items():
        into[key] = into.get(key, 0) + count
