"""What the agent carries: the inventory it was last shown, and the takes and releases since.

Nothing here names an environment's verbs. From the evidence:

- the *inventory* actions: argument-less, answered without a place, answered in `COMMON_ANSWERS`
  ways or more, and the same before and after moves (what is carried travels; a `look` does not);
- the *carriers* (`Carriers`): the (action, argument) pairs whose thing joins the next inventory
  (`take(object)`) or leaves it (`drop(object)`), in most of the evidence's cases;
- how an inventory is written: its sentence around the list, the answer when it lists nothing, the
  list format (`worldbook.facts.learn_list_format`), whether new things join at the front or the
  back, and whether episodes start with nothing carried.

`InventoryTracker` then keeps the carried list of an episode: unknown until an inventory is shown
(or empty from the start where the evidence says episodes start so), edited by every carrier whose
answer names its thing (with the thing's full name as the episode last wrote it: "a fried purple
potato" for `take purple potato`), and proposes the inventory's answer (`inventory`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.facts import find_lists, learn_list_format, render_list
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.summaries import EpisodeSummaries

__all__ = ["COMMON_ANSWERS", "Carriers", "InventorySource", "InventoryTracker", "full_name", "learn_carriers", "names",
           "phrases"]

COMMON_ANSWERS = 3  # different answers that make a value (or an argument-less action's answer) vary per episode
_LIST = "\x00items\x00"  # where an inventory's sentence holds its list


def phrases(arguments: Mapping[str, Any]) -> dict[str, str]:
    """The things an action names: its non-empty string arguments, whitespace collapsed, lower case."""
    return {k: " ".join(v.split()).lower() for k, v in arguments.items() if isinstance(v, str) and v.strip()}


def names(phrase: str, text: str) -> bool:
    """Whether lower-case `text` names `phrase` as whole words."""
    return phrase in text and _whole(phrase).search(text) is not None


@lru_cache(maxsize=4096)
def _whole(phrase: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(phrase)}(?!\w)")


@dataclass(frozen=True)
class Carriers:
    """The inventory actions and the (action, argument) pairs that take things into it or release them."""

    inventories: frozenset[str] = frozenset()
    takes: frozenset[tuple[str, str]] = frozenset()
    releases: frozenset[tuple[str, str]] = frozenset()


def _arguments(item: Evidence) -> dict[str, Any]:
    return item.arguments if isinstance(item.arguments, dict) else {}


def _carried_along(name: str, episodes: Sequence[Sequence[Evidence]], place_of: Callable[[str], str | None]) -> bool:
    """Whether `name`'s answer stays the same across moves (what is carried does; a view of the place does not):
    in at least 80% of two or more cases where only moves came between two of its answers."""
    same = changed = 0
    for items in episodes:
        last: str | None = None
        moved = False
        for item in items:
            if item.action == name and not item.arguments:
                if last is not None and moved:
                    same, changed = same + (item.observation == last), changed + (item.observation != last)
                last, moved = item.observation, False
            elif place_of(item.observation) is not None:
                moved = True
            else:
                last = None  # something else happened between: not a clean case
    return same + changed >= 2 and same >= 0.8 * (same + changed)


def learn_carriers(episodes: Iterable[Sequence[Evidence]], place_of: Callable[[str], str | None]) -> Carriers:
    """The inventory actions and the carriers the evidence shows (see module doc). Between two inventories, a thing
    that joined or left is credited to the first action since whose answer named it; a pair is a carrier when
    that happened in most (and at least two) of its cases. Takes are learned first; a release is then also seen
    where no inventory showed the thing before it but a take had taken it (a `put` between two `inventory`s is
    rare, a `take` before a `put` is not)."""
    episodes = [list(items) for items in episodes]
    answers: dict[str, set[str]] = defaultdict(set)
    for items in episodes:
        for item in items:
            if not item.arguments and place_of(item.observation) is None:
                answers[item.action].add(item.observation)
    inventories = {name for name, seen in answers.items()
                   if len(seen) >= COMMON_ANSWERS and _carried_along(name, episodes, place_of)}
    takes = _majority(_changes(inventories, episodes, frozenset()), "take")
    releases = _majority(_changes(inventories, episodes, takes), "release") - takes
    return Carriers(frozenset(inventories), takes, releases)


def _majority(moves: Mapping[tuple[str, str], Counter[str]], change: str) -> frozenset[tuple[str, str]]:
    """The pairs whose known cases were mostly (and at least twice) `change`."""
    return frozenset(pair for pair, counts in moves.items()
                     if counts[change] >= 2 and 2 * counts[change] > sum(counts.values()) - counts["unknown"])


def _changes(inventories: Iterable[str], episodes: Sequence[Sequence[Evidence]],
             takes: frozenset[tuple[str, str]]) -> dict[tuple[str, str], Counter[str]]:
    """Per (action, argument): how often its thing joined, left or stayed out of the next inventory. Whether the
    thing was carried before is what the last inventory showed, else whether one of `takes` took it."""
    moves: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for inventory in inventories:  # each candidate on its own
        for items in episodes:
            last: str | None = None  # the latest inventory, lower case
            taken: set[str] = set()  # things `takes` took since it
            pending: list[tuple[str, str, str, bool | None]] = []  # (action, argument, thing, carried before?)
            for item in items:
                text = item.observation.lower()
                if item.action == inventory and not item.arguments:
                    credited: set[str] = set()
                    for name, key, phrase, before in pending:
                        after = names(phrase, text)
                        change = ("unknown" if before is None else "take" if after and not before else
                                  "release" if before and not after else "none")
                        if before is None and after:
                            change = "take"
                        if change in ("take", "release"):
                            change = "unknown" if phrase in credited else change  # a later one: can't tell
                            credited.add(phrase)
                        moves[(name, key)][change] += 1
                    last, taken, pending = text, set(), []
                    continue
                for key, phrase in phrases(_arguments(item)).items():
                    if not names(phrase, text):
                        continue
                    shown = last is not None and names(phrase, last)
                    before = True if shown or phrase in taken else (False if last is not None or takes else None)
                    pending.append((item.action, key, phrase, before))
                    if (item.action, key) in takes:
                        taken.add(phrase)
    return moves


@lru_cache(maxsize=4096)
def _named_with_article(phrase: str) -> re.Pattern[str]:
    """"a/an/some <up to three words> <phrase>", the words not crossing into another list item."""
    word = r"(?!(?:and|or|an?|the|some)\b)[\w'-]+\s+"
    return re.compile(rf"\b(?:an?|some)\s+((?:{word}){{0,3}}?{re.escape(phrase)})(?!\w)", re.IGNORECASE)


def full_name(phrase: str, texts: Sequence[str]) -> str:
    """A thing's name as the latest of `texts` that writes it after an article writes it ("fried purple potato"
    for `purple potato`), else `phrase`."""
    pattern = _named_with_article(phrase)
    for text in reversed(texts):
        found = [m.group(1) for m in pattern.finditer(text)]
        if found:
            return min(found, key=len)
    return phrase


def _listed(observation: str) -> tuple[list[str], str] | None:
    """(items, the sentence with `_LIST` for the list) of an inventory answer, or None when it shows no list."""
    for found in find_lists(observation):
        if found.items:
            return found.items, observation[:found.start] + _LIST + observation[found.end:]
    return None


@dataclass
class _Writing:
    """How one inventory action is written."""

    forms: Counter[str] = field(default_factory=Counter)
    empty: Counter[str] = field(default_factory=Counter)
    placement: Counter[str] = field(default_factory=Counter)  # "front" / "back": where a new thing joined
    first: Counter[bool] = field(default_factory=Counter)  # per episode: its first inventory before any take empty?


class InventoryTracker:
    """The carried list of an episode and the inventory's answer (see module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = (), *, place_of: Callable[[str], str | None],
                 summaries: EpisodeSummaries | None = None) -> None:
        """`summaries`: observations' lists read once for every learner given them (`worldbook.summaries`)."""
        from worldsmith.worldbook.induce import group_by_episode

        episodes = list(group_by_episode(evidence).values())
        self.carriers = learn_carriers(episodes, place_of)
        self.format = learn_list_format((item.observation for items in episodes for item in items
                                         if item.action in self.carriers.inventories and not item.arguments),
                                        summaries=summaries)
        article = learn_list_format((item.observation for items in episodes for item in items),
                                    summaries=summaries).article
        self.format = self.format.model_copy(update={"article": article})  # every list shows the articles
        self.forms: dict[str, str] = {}  # inventory action -> its sentence around the list
        self.empty: dict[str, str] = {}  # inventory action -> its answer when nothing is carried
        self.front: dict[str, bool] = {}  # inventory action -> whether new things join at the front (where seen)
        self.starts_empty: dict[str, bool] = {}
        self._learn(episodes)
        self.reset()

    def _learn(self, episodes: Sequence[Sequence[Evidence]]) -> None:
        writing: dict[str, _Writing] = defaultdict(_Writing)
        for items in episodes:
            last: dict[str, list[str]] = {}
            taken = False
            for item in items:
                if item.action not in self.carriers.inventories or item.arguments:
                    taken = taken or any((item.action, key) in self.carriers.takes for key in phrases(_arguments(item)))
                    continue
                write = writing[item.action]
                listed = _listed(item.observation)
                shown = listed[0] if listed else []
                if listed:
                    write.forms[listed[1]] += 1
                elif not any(found.items for found in find_lists(item.observation)):
                    write.empty[item.observation] += 1
                if item.action not in last and not taken:
                    write.first[not shown] += 1
                before = last.get(item.action)
                if before is not None and len(shown) == len(before) + 1 and before:
                    if shown[1:] == before:
                        write.placement["front"] += 1
                    elif shown[:-1] == before:
                        write.placement["back"] += 1
                last[item.action] = shown
        for name, write in writing.items():
            if write.forms:
                self.forms[name] = write.forms.most_common(1)[0][0]
            if write.empty:
                self.empty[name] = write.empty.most_common(1)[0][0]
            if write.placement:
                self.front[name] = write.placement["front"] > write.placement["back"]
            self.starts_empty[name] = sum(write.first.values()) >= 2 and write.first[True] >= 0.9 * sum(
                write.first.values())

    # ------------------------------------------------------------------ episode state
    def reset(self, opening: str = "") -> None:
        self.items: dict[str, list[str] | None] = {
            name: [] if self.starts_empty.get(name) else None for name in self.carriers.inventories}
        self.texts: list[str] = [opening] if opening else []

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        if name in self.carriers.inventories and not arguments:
            listed = _listed(observation)
            if listed is not None:
                self.items[name] = list(listed[0])
            elif observation == self.empty.get(name):
                self.items[name] = []
        else:
            lowered = observation.lower()
            for key, phrase in phrases(arguments).items():
                if not names(phrase, lowered):
                    continue
                if (name, key) in self.carriers.takes:
                    self._take(phrase)
                elif (name, key) in self.carriers.releases:
                    self._release(phrase)
        self.texts.append(observation)

    def _take(self, phrase: str) -> None:
        full = full_name(phrase, self.texts)
        for name, items in self.items.items():
            if items is not None and full not in items:
                items.insert(0, full) if self.front.get(name) else items.append(full)

    def _release(self, phrase: str) -> None:
        for items in self.items.values():
            if items is not None:
                gone = next((i for i in items if i.lower() == phrase or i.lower().endswith(" " + phrase)), None)
                if gone is not None:
                    items.remove(gone)

    @property
    def known(self) -> bool:
        """Whether every inventory's contents are known now (or there is no inventory to know)."""
        return all(items is not None for items in self.items.values())

    def propose(self, name: str, arguments: Mapping[str, Any]) -> list[CandidateAnswer]:
        items = self.items.get(name)
        if arguments or items is None:
            return []
        if not items:
            answer = self.empty.get(name)
        else:
            form = self.forms.get(name)
            answer = form.replace(_LIST, render_list(items, self.format)) if form is not None else None
        if answer is None:
            return []
        return [CandidateAnswer("inventory", answer, notes=[f"carried, as last shown and changed since: {items}"])]

    def snapshot(self) -> dict[str, Any]:
        return {name: items for name, items in self.items.items()}


class InventorySource:
    """The `inventory` source: an `InventoryTracker` reading places through the `places` source."""

    def __init__(self, context: SourceContext) -> None:
        self.tracker = InventoryTracker(context.evidence, place_of=context.source("places").tracker.place_of,
                                        summaries=context.summaries)
        self.gate = context.tracking

    def reset(self, opening: str) -> None:
        self.tracker.reset(opening)

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.name, step.arguments, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        return self.tracker.propose(step.name, step.arguments) if self.gate else []

    def snapshot(self) -> dict[str, Any]:
        return self.tracker.snapshot()


@answer_source("inventory", requires=("places",), snapshot_key="carried",
               answers=(Answer("inventory", rank=60, per_action=True),))
def _inventory(context: SourceContext) -> AnswerSource:
    """What the agent carries."""
    return InventorySource(context)
