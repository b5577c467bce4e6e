"""Lines that print how many turns the episode has taken, learned from the evidence (`TurnCounter`).

An answer recalled from another point of another trajectory ("You scored 5 out of 5, in 16 turns.")
gets this episode's count there: the harness applies it to every recalled answer (`Answer.recalled`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from worldsmith.worldbook.model import Evidence

__all__ = ["TurnCounter"]

_NUMBER = re.compile(r"\d+")


class TurnCounter:
    """Lines that print how many turns the episode has taken ("You scored 5 out of 5, in 16 turns."), learned from
    the evidence: a line form (digits masked) one of whose numbers is always the turn's position plus the same
    offset (TextWorld counts one more than the actions taken), at two positions at least (a record shown at the same
    turn of two recordings of one task holds numbers that merely equal the position). An answer recalled from another point of another
    trajectory gets this episode's count there."""

    def __init__(self, evidence: Sequence[Evidence] = ()) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        offsets: dict[tuple[str, int], set[int]] = defaultdict(set)
        positions: dict[tuple[str, int], set[int]] = defaultdict(set)
        for items in group_by_episode(evidence).values():
            for position, item in enumerate(items, 1):
                for line in item.observation.split("\n"):
                    numbers = _NUMBER.findall(line)
                    if not numbers:  # a line without a number counts nothing
                        continue
                    form = _NUMBER.sub("#", line.strip())
                    for index, number in enumerate(numbers):
                        positions[(form, index)].add(position)
                        offsets[(form, index)].add(int(number) - position)
        self.counters: dict[str, tuple[int, int]] = {}  # line form -> (which number, offset from the position)
        for (form, index), found in offsets.items():
            if len(found) == 1 and len(positions[(form, index)]) >= 2:  # seen at one position only: counts nothing
                offset = found.pop()
                if 0 <= offset <= 2 and form not in self.counters:
                    self.counters[form] = (index, offset)

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
