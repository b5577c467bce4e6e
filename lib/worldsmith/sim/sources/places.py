"""Where the agent is, the map learned from moves, and what each place looked like: the `places` source.

`PlaceTracker` reads where the agent is (a room header, a shell prompt), the map learned from moves
(`go north` from the kitchen led to the pantry; going back the way you came returns to the room
already described), and what each place looked like when last seen. It proposes `place_memory`
(this action, here, earlier in the episode), `map` (the view of the place a move leads to),
`place_view` (how this place looked when last shown: what a `look` answers), `place_form` (the
evidence's usual answer to this action with the current place's name in it: ALFWorld's "You are
facing the desk 1.") and `place_evidence` (what the book's evidence shows for this action in this
place). Like every source it proposes; the route table (`sim.routing`) decides. Other sources read
its `place_of` / `view_of` (inventory, scope, view edits): they declare `requires=("places",)`.

Place headers are regular expressions with a named group `place`; the defaults cover TextWorld /
Inform (`-= Kitchen =-`), ScienceWorld (`This room is called the kitchen.`, `You move to the
kitchen.`), ALFWorld (`You arrive at loc 3. On the desk 1, ...`) and shell prompts
(`user@host:~/dir$`). A book for another engine passes its own.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step, line_key
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.model import Evidence

__all__ = ["DEFAULT_PLACE_PATTERNS", "ROOM_PATTERNS", "PlaceSource", "PlaceTracker"]

ROOM_PATTERNS: tuple[str, ...] = (
    r"(?m)^-= (?P<place>[^\n]+?) =-\s*$",  # TextWorld / Inform room header
    r"This room is called the (?P<place>[^.\n]+)\.",  # ScienceWorld `look around`
)
DEFAULT_PLACE_PATTERNS: tuple[str, ...] = (
    *ROOM_PATTERNS,
    r"^You move to the (?P<place>[^.\n]+)\.",  # ScienceWorld `go to`
    r"^You arrive at [^.\n]*\. (?:On the|The) (?P<place>[^,.\n]+?)(?:, you see| is )",  # ALFWorld `go to`
    r"(?m)^(?P<place>[\w.\-]+@[\w.\-]+:[^\n$#]*[$#]) ?\Z",  # a shell prompt as the last line
)


_PLACE_SLOT = "\x00place\x00"  # where a learned form names the current place
_START = "\x00start\x00"  # the place of an episode that has shown none yet (ALFWorld before the first `go to`)
# The way back in text adventures when the evidence shows none (expert recordings rarely go back): a move the
# evidence pairs otherwise overrides it.
_OPPOSITE = {"north": "south", "east": "west", "up": "down", "northeast": "southwest", "northwest": "southeast",
             "in": "out"}
_COMPASS = {f"go {a}": f"go {b}" for pair in _OPPOSITE.items() for a, b in (pair, pair[::-1])}


def _place_name(header: re.Match[str] | None) -> str | None:
    """A header's place as a key: whitespace collapsed, lower case."""
    return " ".join(header.group("place").split()).lower() if header is not None else None


def _view(observation: str, header: re.Match[str]) -> str:
    """The part of an observation that describes the place: from the header's line on (an opening's greeting
    before the room header is not part of the room)."""
    return observation[observation.rfind("\n", 0, header.start()) + 1:]


_MAX_HEADERS = 200_000  # observations a PlaceTracker remembers its header match for


class PlaceTracker:
    """Where the agent is, the map learned from moves, and what each place looked like (see module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = (), *, patterns: Sequence[str] = DEFAULT_PLACE_PATTERNS) -> None:
        self.patterns = [re.compile(p) for p in patterns]
        self._headers: dict[str, re.Match[str] | None] = {}
        self.inverse: dict[str, str] = {}  # move line -> the move line that undoes it (learned from evidence)
        self.book_views: dict[tuple[str, str], str] = {}  # (place, action line) -> most common observation
        self._learn(evidence)
        self.reset()

    # ------------------------------------------------------------------ learning
    def place_of(self, observation: str) -> str | None:
        """The place an observation shows the agent in, or None when it shows none."""
        return _place_name(self._header(observation))

    def view_of(self, observation: str) -> tuple[str, str] | None:
        """(place, the part describing it) of an observation that shows a place, else None."""
        header = self._header(observation)
        place = _place_name(header)
        return (place, _view(observation, header)) if header is not None and place is not None else None

    def _header(self, observation: str) -> re.Match[str] | None:
        """The first place pattern's match in the observation (remembered per text: the other trackers ask for
        every evidence observation while they learn, several times each)."""
        if observation in self._headers:
            return self._headers[observation]
        found = next((match for pattern in self.patterns if (match := pattern.search(observation))), None)
        if len(self._headers) >= _MAX_HEADERS:  # a long session's observations: start over rather than grow
            self._headers.clear()
        self._headers[observation] = found
        return found

    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        inverse: dict[str, Counter[str]] = defaultdict(Counter)
        views: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        forms: dict[str, Counter[str]] = defaultdict(Counter)
        at_place: Counter[str] = Counter()
        for items in group_by_episode(evidence).values():
            place: str | None = None
            name: str | None = None
            edges: dict[tuple[str, str], str] = {}
            for item in items:
                line = line_key(item.action_text)
                views[(place if place is not None else _START, line)][item.observation] += 1
                if name:
                    at_place[line] += 1
                    if name in item.observation:
                        forms[line][item.observation.replace(name, _PLACE_SLOT)] += 1
                header = self._header(item.observation)
                after = _place_name(header)
                if header is not None:
                    name = header.group("place")
                if after is not None and place is not None and after != place:
                    edges[(place, line)] = after
                    for (origin, back), target in list(edges.items()):
                        if origin == after and target == place and back != line:
                            inverse[back][line] += 1
                            inverse[line][back] += 1
                if after is not None:
                    place = after
        self.inverse = {**_COMPASS, **{line: counts.most_common(1)[0][0] for line, counts in inverse.items()}}
        self.book_views = {key: counts.most_common(1)[0][0] for key, counts in views.items()
                           if counts.most_common(1)[0][1] >= 2 or len(counts) == 1}
        self.forms = {line: form for line, counts in forms.items()
                      for form, count in counts.most_common(1) if count >= 2 and 2 * count > at_place[line]}

    # ------------------------------------------------------------------ episode state
    def reset(self, opening: str = "") -> None:
        header = self._header(opening) if opening else None
        self.place: str | None = _place_name(header)
        self.place_text: str | None = header.group("place") if header is not None else None
        self.came: tuple[str, str] | None = None  # (place we came from, the move that brought us)
        self.edges: dict[tuple[str, str], str] = {}
        self.here: dict[tuple[str, str], str] = {}  # (place, action line) -> last observation
        self.views: dict[tuple[str, str], str] = {}  # (place, action name) -> last observation showing it
        if header is not None and self.place is not None:
            self.views[(self.place, "")] = _view(opening, header)

    def observe(self, name: str, action_text: str, observation: str) -> None:
        line = line_key(action_text)
        before = self.place
        if before is not None:
            self.here[(before, line)] = observation
        header = self._header(observation)
        after = _place_name(header)
        if header is None or after is None:
            return
        view = _view(observation, header)
        self.views[(after, name)] = view
        self.views[(after, "")] = view
        if before is not None and after != before:
            self.edges[(before, line)] = after
            back = self.inverse.get(line)
            if back is not None:
                self.edges.setdefault((after, back), before)
            self.came = (before, line)
        self.place = after
        self.place_text = header.group("place")

    def destination(self, line: str) -> str | None:
        """Where a move leads from here: a move made before from this place, or the way back."""
        if self.place is None:
            return None
        known = self.edges.get((self.place, line))
        if known is not None:
            return known
        if self.came is not None and self.inverse.get(self.came[1]) == line:
            return self.came[0]
        return None

    def propose(self, name: str, action_text: str) -> list[CandidateAnswer]:
        line = line_key(action_text)
        out: list[CandidateAnswer] = []
        if self.place is None:
            known = self.book_views.get((_START, line))
            if known is not None:
                out.append(CandidateAnswer("place_evidence", known, notes=[
                    f"the evidence's answer to {line!r} before any place was shown"]))
            return out
        seen_here = self.here.get((self.place, line))
        if seen_here is not None:
            out.append(CandidateAnswer("place_memory", seen_here, notes=[f"this action in {self.place!r} earlier"]))
        target = self.destination(line)
        if target is not None:
            view = self.views.get((target, name)) or self.views.get((target, ""))
            if view is not None:
                out.append(CandidateAnswer("map", view, notes=[f"the map: {line!r} from {self.place!r} leads to {target!r}"]))
        current = self.views.get((self.place, ""))
        if current is not None:
            out.append(CandidateAnswer("place_view", current, notes=[f"how {self.place!r} looked when last shown"]))
        form = self.forms.get(line)
        if form is not None and self.place_text:
            out.append(CandidateAnswer("place_form", form.replace(_PLACE_SLOT, self.place_text),
                                notes=[f"the evidence's form of {line!r} with the place it names here"]))
        known = self.book_views.get((self.place, line))
        if known is not None:
            out.append(CandidateAnswer("place_evidence", known, notes=[f"the evidence's answer to {line!r} in {self.place!r}"]))
        return out

    def snapshot(self) -> dict[str, Any]:
        """What the tracker believes, for people (the audit and the Simulate page)."""
        return {"place": self.place,
                "map": sorted({f"{a} --{m}--> {b}" for (a, m), b in self.edges.items()}),
                "places_seen": sorted({p for p, _ in self.views})}


class PlaceSource:
    """The `places` source: a `PlaceTracker` on the book's evidence (answers only while episode state is tracked)."""

    def __init__(self, context: SourceContext) -> None:
        self.tracker = PlaceTracker(context.evidence)
        self.gate = context.tracking

    def reset(self, opening: str) -> None:
        self.tracker.reset(opening)

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.name, step.line, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        return self.tracker.propose(step.name, step.line) if self.gate else []

    def snapshot(self) -> dict[str, Any]:
        return self.tracker.snapshot()


@answer_source("places", snapshot_key="places", answers=(
    Answer("place_memory", rank=70, trusted=True, view=True),
    Answer("map", rank=80, trusted=True, view=True),
    Answer("place_view", rank=90, per_action=True, view=True),
    Answer("place_form", rank=100, per_action=True),
    Answer("place_evidence", route="evidence:place", rank=150, per_action=True)))
def _places(context: SourceContext) -> AnswerSource:
    """Where the agent is, the map, and how each place looked."""
    return PlaceSource(context)
