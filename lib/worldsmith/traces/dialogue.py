"""Dialogue-only episodes (no tool turn) are stored and browsed, but building a worldbook and evaluating one
need transitions: this is the one place that leaves them out, and counts them so every report can say so."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from worldsmith.traces.model import Episode

__all__ = ["DIALOGUE_ONLY", "add_exclusions", "exclude_dialogue_only"]

DIALOGUE_ONLY = "dialogue_only"  # the key of the count in an `excluded` report field


def exclude_dialogue_only(episodes: Iterable[Episode]) -> tuple[list[Episode], dict[str, int]]:
    """The episodes with at least one tool turn, and `{"dialogue_only": n}` for the ones left out (n may be 0)."""
    kept: list[Episode] = []
    left_out = 0
    for episode in episodes:
        if episode.dialogue_only:
            left_out += 1
        else:
            kept.append(episode)
    return kept, {DIALOGUE_ONLY: left_out}


def add_exclusions(*counts: Mapping[str, int]) -> dict[str, int]:
    """Exclusion counts of several reads summed key by key (`{"dialogue_only": 0}` when none)."""
    total: dict[str, int] = {DIALOGUE_ONLY: 0}
    for count in counts:
        for key, value in count.items():
            total[key] = total.get(key, 0) + int(value)
    return total
