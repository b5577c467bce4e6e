"""Lines that print how many turns the episode has taken, learned from the evidence (`TurnCounter`).

An answer recalled from another point of another trajectory ("You scored 5 out of 5, in 16 turns.")
gets this episode's count there: the harness applies it to every recalled answer (`Answer.recalled`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from worldsmith.worldbook.model import Evidence

__all__ = ["TurnCounter"]

_NUMBER = re.compile(r"\d+")
_ODD: Any = ["odd"]  # a (form, number) whose offsets disagree or leave 0..2: never a counter


class TurnCounter:
    """Lines that print how many turns the episode has taken ("You scored 5 out of 5, in 16 turns."), learned from
    the evidence: a line form (digits masked) one of whose numbers is always the turn's position plus the same
    offset (TextWorld counts one more than the actions taken), at two positions at least (a record shown at the same
    turn of two recordings of one task holds numbers that merely equal the position). An answer recalled from another point of another
    trajectory gets this episode's count there."""

    def __init__(self, evidence: Sequence[Evidence] = ()) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        # per (line form, which number): the one offset from the position it has had so far, in 0..2, and the
        # positions it was seen at; `_ODD` once it had another offset or one out of range (it never counts then,
        # so its later sightings are skipped: most numbers, ids and prices, are odd at once)
        slots: dict[tuple[str, int], list[Any]] = {}
        for items in group_by_episode(evidence).values():
            for position, item in enumerate(items, 1):
                for line in item.observation.split("\n"):
                    numbers = _NUMBER.findall(line)
                    if not numbers:  # a line without a number counts nothing
                        continue
                    form = _NUMBER.sub("#", line.strip())
                    for index, number in enumerate(numbers):
                        seen = slots.get((form, index))
                        if seen is _ODD:
                            continue
                        offset = int(number) - position
                        if seen is None:
                            slots[(form, index)] = [offset, {position}] if 0 <= offset <= 2 else _ODD
                        elif seen[0] != offset:
                            slots[(form, index)] = _ODD
                        else:
                            seen[1].add(position)
        self.counters: dict[str, tuple[int, int]] = {}  # line form -> (which number, offset from the position)
        for (form, index), seen in slots.items():  # first-seen order: the first counting number of a form wins
            if seen is not _ODD and len(seen[1]) >= 2 and form not in self.counters:  # one position: counts nothing
                self.counters[form] = (index, seen[0])

    def fix(self, observation: str, turn: int) -> str:
        """`observation` with every learned counter set for `turn` (the 1-based position of the answered turn)."""
        if not self.counters:
            return observation
        lines = observation.split("\n")
        for at, line in enumerate(lines):
            learned = self.counters.get(_NUMBER.sub("#", line.strip())) if _NUMBER.search(line) else None
            if learned is not None:
                found = list(_NUMBER.finditer(line))[learned[0]]
                lines[at] = line[:found.start()] + str(turn + learned[1]) + line[found.end():]
        return "\n".join(lines)
