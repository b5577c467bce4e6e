"""Episode state that observations show, kept without a model: places and the map, and entity records.

A tracker reads every committed (action, observation) pair of an episode and, before a turn, may
*propose* the observation an action will get. The harness asks each tracker, adds the rules' and
nearest evidence's answers, and lets the route table (`sim.routing`) pick the source that beat
nearest evidence for that action on held-out construction data. A tracker never decides alone.

- `PlaceTracker`: where the agent is (a room header, a shell prompt), the map learned from moves
  (`go north` from the kitchen led to the pantry; going back the way you came returns to the
  room already described), and what each place looked like when last seen. It proposes
  `place_memory` (this action, here, earlier in the episode), `map` (the view of the place a move
  leads to), `place_view` (how this place looked when last shown: what a `look` answers),
  `place_form` (the evidence's usual answer to this action with the current place's name in it:
  ALFWorld's "You are facing the desk 1.") and `place_evidence` (what the book's evidence shows for
  this action in this place).
- `EntityTracker`: JSON tool results read as records keyed by their identifiers at any depth. The
  argument that selects a record is learned from evidence (`get_reservation_details(reservation_id)`
  answers with the record whose `reservation_id` equals the argument); a read of a record already
  shown in the episode (or changed since by a write that returned it) is answered with that record
  in the tool's own JSON layout and key order, and a write that always sets the same fields of the
  record it answers with (`cancel_reservation` -> status "cancelled") is answered with the record
  as last shown, those fields set (`entity`).

- In modules of their own: `sim.scope.ScopeTracker` (the refusal an action gets on a thing not in
  view, and the usual answer when everything it names is: `scope`, `scope_form`),
  `sim.inventory.InventoryTracker` (what is carried: `inventory`), `sim.views.ViewEdits` (a
  place's view as changed by what was done there since: it refreshes the view-answering sources) and
  `sim.fields.FieldTracker` (JSON writes as arithmetic on the episode's last values: `fields`).
- `AlignedEvidence`: recorded trajectories that share this episode's past (the same actions got the
  same observations: the same game, the same backing store) answer the next action as they did
  after the same calls (`aligned_evidence`): recall of a shared initial state without modelling it.

Place headers are regular expressions with a named group `place`; the defaults cover TextWorld /
Inform (`-= Kitchen =-`), ScienceWorld (`This room is called the kitchen.`, `You move to the
kitchen.`), ALFWorld (`You arrive at loc 3. On the desk 1, ...`) and shell prompts
(`user@host:~/dir$`). A book for another engine passes its own.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.records import ID_KEY, iter_records, json_layout, top_record

__all__ = [
    "DEFAULT_PLACE_PATTERNS",
    "ROOM_PATTERNS",
    "TurnCounter",
    "AlignedEvidence",
    "EntityTracker",
    "PlaceTracker",
    "Proposal",
    "json_layout",
]

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


@dataclass
class Proposal:
    """One source's answer for a turn: the observation and why."""

    source: str
    observation: str
    outcome: str = "unknown"
    notes: list[str] = field(default_factory=list)
    rule: str | None = None
    effects: list[Any] = field(default_factory=list)
    form: str | None = None  # a rule's observation template: rules are measured per form, not only together
    conflicts: list[str] = field(default_factory=list)  # equal-rank rules that also held and answered otherwise
    records: list[dict[str, Any]] = field(default_factory=list)  # records read or changed: {key, before, after}

    @property
    def key(self) -> str:
        """The route table's key: the source, and for a rule its form (stable across builds, unlike rule ids)."""
        if self.form is None:
            return self.source
        return f"{self.source}:{hashlib.sha256(self.form.encode()).hexdigest()[:10]}"


def _line(action_text: str) -> str:
    return " ".join(action_text.split())


def _place_name(header: re.Match[str] | None) -> str | None:
    """A header's place as a key: whitespace collapsed, lower case."""
    return " ".join(header.group("place").split()).lower() if header is not None else None


def _view(observation: str, header: re.Match[str]) -> str:
    """The part of an observation that describes the place: from the header's line on (an opening's greeting
    before the room header is not part of the room)."""
    return observation[observation.rfind("\n", 0, header.start()) + 1:]


class PlaceTracker:
    """Where the agent is, the map learned from moves, and what each place looked like (see module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = (), *, patterns: Sequence[str] = DEFAULT_PLACE_PATTERNS) -> None:
        self.patterns = [re.compile(p) for p in patterns]
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
        for pattern in self.patterns:
            found = pattern.search(observation)
            if found:
                return found
        return None

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
                line = _line(item.action_text)
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
        line = _line(action_text)
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

    def propose(self, name: str, action_text: str) -> list[Proposal]:
        line = _line(action_text)
        out: list[Proposal] = []
        if self.place is None:
            known = self.book_views.get((_START, line))
            if known is not None:
                out.append(Proposal("place_evidence", known, notes=[
                    f"the evidence's answer to {line!r} before any place was shown"]))
            return out
        seen_here = self.here.get((self.place, line))
        if seen_here is not None:
            out.append(Proposal("place_memory", seen_here, notes=[f"this action in {self.place!r} earlier"]))
        target = self.destination(line)
        if target is not None:
            view = self.views.get((target, name)) or self.views.get((target, ""))
            if view is not None:
                out.append(Proposal("map", view, notes=[f"the map: {line!r} from {self.place!r} leads to {target!r}"]))
        current = self.views.get((self.place, ""))
        if current is not None:
            out.append(Proposal("place_view", current, notes=[f"how {self.place!r} looked when last shown"]))
        form = self.forms.get(line)
        if form is not None and self.place_text:
            out.append(Proposal("place_form", form.replace(_PLACE_SLOT, self.place_text),
                                notes=[f"the evidence's form of {line!r} with the place it names here"]))
        known = self.book_views.get((self.place, line))
        if known is not None:
            out.append(Proposal("place_evidence", known, notes=[f"the evidence's answer to {line!r} in {self.place!r}"]))
        return out

    def snapshot(self) -> dict[str, Any]:
        """What the tracker believes, for people (the audit and the Simulate page)."""
        return {"place": self.place,
                "map": sorted({f"{a} --{m}--> {b}" for (a, m), b in self.edges.items()}),
                "places_seen": sorted({p for p, _ in self.views})}


# ---------------------------------------------------------------------------------------------- JSON entities
# The JSON record primitives live in `worldbook.records` (the builder's write learning and the entity store read
# results the same way); the names below are the ones this module has always used.
_ID_KEY = ID_KEY
_records = iter_records
_top_record = top_record


class EntityTracker:
    """Records keyed by identifiers, read from JSON tool results at any depth (see the module doc).

    Learned from evidence: which argument selects the record a call answers with (`selector`), how each
    action writes JSON (`layout`), and for writes that answer with the record they changed, the fields
    they set to the same value every time (`sets`: `cancel_reservation` -> `{"status": "cancelled"}`).
    """

    def __init__(self, evidence: Sequence[Evidence] = ()) -> None:
        self.selector: dict[str, tuple[str, str]] = {}  # action -> (argument, id key) its result record is keyed by
        self.layout: dict[str, tuple[str, str, bool]] = {}  # action -> how its results are serialized
        self.sets: dict[str, dict[str, Any]] = {}  # action -> fields it sets on the record it answers with
        self._learn(evidence)
        self.reset()

    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        votes: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
        turns: Counter[str] = Counter()
        layouts: dict[str, Counter[tuple[str, str, bool]]] = defaultdict(Counter)
        for item in evidence:
            value = _json(item.observation)
            if value is None:
                continue
            layout = json_layout(item.observation)
            if layout is not None:
                layouts[item.action][layout] += 1
            turns[item.action] += 1
            for name, argument in _arguments(item).items():
                found = _top_record(value, argument)
                if found is not None:
                    votes[item.action][(name, found[0])] += 1
        for action, counts in votes.items():
            (pair, count), = counts.most_common(1)
            if count >= max(1, turns[action] // 2):
                self.selector[action] = pair
        self.layout = {action: counts.most_common(1)[0][0] for action, counts in layouts.items()}
        changes: dict[str, Counter[str]] = defaultdict(Counter)
        for items in group_by_episode(evidence).values():
            self.reset()
            for item in items:
                before = self._selected(item.action, _arguments(item))
                value = _json(item.observation)
                if before is not None and isinstance(value, dict) and value != before:
                    changed = {k: v for k, v in value.items() if before.get(k, _ABSENT) != v}
                    if set(value) == set(before) and changed:
                        changes[item.action][json.dumps(changed, sort_keys=True)] += 1
                self.observe(item.action, _arguments(item), item.observation)
        for action, seen_changes in changes.items():
            text, count = seen_changes.most_common(1)[0]
            if count >= 2 and count * 2 > sum(seen_changes.values()):
                self.sets[action] = json.loads(text)

    def reset(self) -> None:
        self.records: dict[tuple[str, str], dict[str, Any]] = {}

    def _selected(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        selector = self.selector.get(name)
        if selector is None or selector[0] not in arguments:
            return None
        return self.records.get((selector[1], str(arguments[selector[0]])))

    def observe(self, name: str, arguments: dict[str, Any], observation: str) -> None:
        value = _json(observation)
        if value is None:
            return
        for key, ident, record in _records(value):
            self.records[(key, str(ident))] = record

    def propose(self, name: str, arguments: dict[str, Any]) -> list[Proposal]:
        record = self._selected(name, arguments)
        layout = self.layout.get(name)
        if record is None or layout is None:
            return []
        key, argument = self.selector[name][1], arguments[self.selector[name][0]]
        notes = [f"the record {key}={argument!r} as last shown"]
        if name in self.sets:
            record = {**record, **self.sets[name]}
            notes.append(f"with what {name!r} sets: {json.dumps(self.sets[name])}")
        text = json.dumps(record, separators=(layout[0], layout[1]), ensure_ascii=layout[2])
        return [Proposal("entity", text, notes=notes)]

    def snapshot(self) -> dict[str, Any]:
        return {"records": sorted(f"{k}={v}" for k, v in self.records)}


_ABSENT = object()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _arguments(item: Evidence) -> dict[str, Any]:
    return item.arguments if isinstance(item.arguments, dict) else {}


# ---------------------------------------------------------------------------------------------- aligned trajectories
RARE_PAIR_SHARE = 0.05  # an (action, observation) pair in more of the recorded trajectories than this is common


class AlignedEvidence:
    """Recorded trajectories that share this episode's (action, observation) pairs answer as they did then.

    Episodes of one game or one backing store (an ALFWorld trial, BFCL's categories over the same
    initial state, a service API's shared records) show the same observations for the same actions.
    Once the current episode has shown pairs that a recorded trajectory also has, that trajectory's
    answer to the pending action, after the calls most like the current ones, is a proposal.
    """

    def __init__(self, evidence: Sequence[Evidence] = ()) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        self.trajectories: list[list[tuple[str, str]]] = [
            [(_line(item.action_text), item.observation) for item in items]
            for items in group_by_episode(evidence).values()]
        self.by_pair: dict[tuple[str, str], set[int]] = defaultdict(set)
        self.positions: list[dict[str, list[int]]] = []  # per trajectory: action line -> its turn positions
        for index, turns in enumerate(self.trajectories):
            positions: dict[str, list[int]] = defaultdict(list)
            for position, pair in enumerate(turns):
                self.by_pair[pair].add(index)
                positions[pair[0]].append(position)
            self.positions.append(dict(positions))
        self.max_holders = max(2, int(RARE_PAIR_SHARE * len(self.trajectories)))
        self.reset()

    def reset(self) -> None:
        self.shared: Counter[int] = Counter()
        self.lines: list[str] = []

    def observe(self, action_text: str, observation: str) -> None:
        line = _line(action_text)
        holders = self.by_pair.get((line, observation), ())
        if len(holders) <= self.max_holders:  # a pair most trajectories show ("You are carrying nothing.") tells
            for index in holders:  # nothing about which of them this episode is like
                self.shared[index] += 1
        self.lines.append(line)

    def _answer(self, index: int, line: str) -> tuple[int, str] | None:
        """(how many calls before it match the current ones, the answer) of the trajectory's best turn for `line`."""
        best: tuple[int, str] | None = None
        turns = self.trajectories[index]
        for position in self.positions[index].get(line, ()):
            observation = turns[position][1]
            suffix = 0
            while suffix < min(position, len(self.lines)) and \
                    turns[position - 1 - suffix][0] == self.lines[len(self.lines) - 1 - suffix]:
                suffix += 1
            if best is None or suffix > best[0]:
                best = (suffix, observation)
        return best

    def propose(self, action_text: str) -> list[Proposal]:
        if not self.shared:
            return []
        line = _line(action_text)
        top = max(self.shared.values())
        candidates = []
        for index, count in self.shared.items():
            if count == top:
                found = self._answer(index, line)
                if found is not None:
                    candidates.append((found[0], found[1]))
        if not candidates:
            return []
        best_suffix = max(suffix for suffix, _ in candidates)
        answers = {o for s, o in candidates if s == best_suffix}
        if len(answers) > 1:  # equally aligned trajectories disagree: the answer depends on what they do not share
            return []
        answer = answers.pop()
        return [Proposal("aligned_evidence", answer, notes=[
            f"{len(candidates)} recorded trajectories share {top} of this episode's observations; "
            f"after the same {best_suffix} calls they answered so"])]


# ---------------------------------------------------------------------------------------------- turn counters
_NUMBER = re.compile(r"\d+")


class TurnCounter:
    """Lines that print how many turns the episode has taken ("You scored 5 out of 5, in 16 turns."), learned from
    the evidence: a line form (digits masked) one of whose numbers is always the turn's position plus the same
    offset (TextWorld counts one more than the actions taken). An answer recalled from another point of another
    trajectory gets this episode's count there."""

    def __init__(self, evidence: Sequence[Evidence] = ()) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        offsets: dict[tuple[str, int], set[int]] = defaultdict(set)
        seen: Counter[tuple[str, int]] = Counter()
        for items in group_by_episode(evidence).values():
            for position, item in enumerate(items, 1):
                for line in item.observation.split("\n"):
                    numbers = _NUMBER.findall(line)
                    form = _NUMBER.sub("#", line.strip())
                    for index, number in enumerate(numbers):
                        seen[(form, index)] += 1
                        offsets[(form, index)].add(int(number) - position)
        self.counters: dict[str, tuple[int, int]] = {}  # line form -> (which number, offset from the position)
        for (form, index), found in offsets.items():
            if len(found) == 1 and seen[(form, index)] >= 2:
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
