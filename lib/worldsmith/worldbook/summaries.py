"""Per-episode summaries of one evidence list, each worked out once and combined over any subset of its episodes.

Much of what a build learns from evidence is a fold over episodes: counts, sets and votes each episode adds on its
own (no episode's contribution depends on another's). The route stage learns such things again for every
cross-fit fold from the fold's kept episodes; with `EpisodeSummaries` each episode's contribution is computed once
and a fold combines the contributions of its kept episodes only, in evidence order, so what it learns equals what
learning on the kept episodes alone gives, and a held-out episode's summary never reaches the fold.

    summaries = EpisodeSummaries()
    pieces = [summaries.of("turn_counter", items, summarize) for items in group_by_episode(kept).values()]

A learner that accepts `summaries` asks for its pieces by its own kind name and combines them itself; without one
it summarizes every episode afresh (the same result). Summaries are keyed by the episode's first evidence object
(by identity) and its length, so one `EpisodeSummaries` serves one evidence list and the subsets of it; a summary
is shared by every combination that reads it and must not be edited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from worldsmith.worldbook.model import Evidence

__all__ = ["EpisodeSummaries", "summarized"]

T = TypeVar("T")


class EpisodeSummaries:
    """Each episode's summary per kind, worked out on first use (see the module doc)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str, int], tuple[Evidence, Any]] = {}
        self._texts: dict[tuple[str, str], Any] = {}
        self.computed = 0  # summaries worked out (the rest were reused)

    def of_text(self, kind: str, text: str, summarize: Callable[[str], T]) -> T:
        """The `kind` summary of one observation text (what a learner reads from it alone), `summarize(text)` the
        first time: the folds' learners read the same observations (a fold's kept ones are among them)."""
        key = (kind, text)
        if key not in self._texts:
            self._texts[key] = summarize(text)
            self.computed += 1
        return self._texts[key]

    def of(self, kind: str, items: Sequence[Evidence], summarize: Callable[[Sequence[Evidence]], T]) -> T:
        """The `kind` summary of one episode's evidence (in turn order), `summarize(items)` the first time."""
        key = (kind, items[0].turn_id, len(items))
        found = self._kept.get(key)
        if found is None or found[0] is not items[0]:
            found = self._kept[key] = (items[0], summarize(items))
            self.computed += 1
        return found[1]


def summarized(kind: str, episodes: Sequence[Sequence[Evidence]], summarize: Callable[[Sequence[Evidence]], T],
               summaries: EpisodeSummaries | None) -> list[T]:
    """Every episode's `kind` summary, in the given order: from `summaries` when given, else worked out here."""
    if summaries is None:
        return [summarize(items) for items in episodes if items]
    return [summaries.of(kind, items, summarize) for items in episodes if items]
