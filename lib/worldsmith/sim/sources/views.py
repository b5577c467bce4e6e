"""How actions change the description of a place: a room shows what was dropped in it and no longer shows
what was taken from it.

A revisit or a `look` is answered from how the place looked when last shown (`PlaceTracker`); when the agent
acted in the place since, that view is stale. `ViewEdits` learns from the evidence, per action shape, the one
edit its successful answers made to the next view of the same place (the one act in between whose thing the
change names): text appended at the end or removed from it, the action's arguments as slots
("\\n\\nThere is {a object} on the floor." for `drop(object)`, the same text removed for `take(object)`). An
edit is kept when it is the most common outcome of its shape (at least twice, more often than no change); a
take undoes a release (`_inverses`: the drop's text is removed by the take with the same arguments). In an
episode it refreshes an answer that shows a place as last seen (the map's view of where a move leads, a
`look` from memory) with the edits of the acts done there since; the sources that answer with views stay
what the route table measures. Edits in the middle of a description (a container's contents in a sentence of
its own, a table's "On the table is a knife.") are not learned.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from worldsmith.sim.sources.base import AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.inventory import Carriers, full_name, names, phrases
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.facts import learn_list_format, parse_list_items, render_list
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.summaries import EpisodeSummaries

__all__ = ["Edit", "ViewEditSource", "ViewEdits"]

Edit = tuple[str, str, str]  # (where: "end" or "start", text removed, text added), arguments as slots
_ARTICLE = "\x00a\x00"  # before a slot: "a" or "an", as the value's first letter wants
_NONE = ("none", "", "")


def _slot(text: str, arguments: Mapping[str, str]) -> str:
    """`text` with each argument's name (longest first; the full name as written, `full_name`) as `{key}`, an
    article before it as `_ARTICLE`."""
    out = text.replace("{", "{{").replace("}", "}}")
    for key, value in sorted(arguments.items(), key=lambda kv: -len(kv[1])):
        out = re.sub(rf"\b(?:an?) {re.escape(value)}(?!\w)", _ARTICLE + "{" + key + "}", out, flags=re.IGNORECASE)
        out = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", "{" + key + "}", out, flags=re.IGNORECASE)
    return out


def _full(arguments: Mapping[str, str], texts: Sequence[str]) -> dict[str, str]:
    """Each argument's value as the texts last wrote it after an article."""
    return {key: full_name(value.lower(), texts) for key, value in arguments.items()}


def _fill(form: str, arguments: Mapping[str, str]) -> str | None:
    for key, value in arguments.items():
        form = form.replace(_ARTICLE + "{" + key + "}", ("an " if value[:1].lower() in "aeiou" else "a ") + "{" + key + "}")
    try:
        return form.format(**arguments)
    except (KeyError, IndexError, ValueError):
        return None


def _edit(old: str, new: str, arguments: Mapping[str, str]) -> Edit | None:
    """The one change from `old` to `new` at its start or end, slotted; `_NONE` when they are equal. Text added
    at (or cut from) the end is read as such even where its last words repeat the old end ("...floor." +
    "There is a key on the floor.")."""
    if old == new:
        return _NONE
    if new.startswith(old) or old.startswith(new):
        cut = min(len(old), len(new))
        return "end", _slot(old[cut:], arguments), _slot(new[cut:], arguments)
    if new.endswith(old) or old.endswith(new):
        cut = abs(len(new) - len(old))
        return "start", _slot(old[:cut] if len(old) > len(new) else "", arguments), _slot(
            new[:cut] if len(new) > len(old) else "", arguments)
    prefix = len(os.path.commonprefix([old, new]))
    suffix = len(os.path.commonprefix([old[prefix:][::-1], new[prefix:][::-1]]))
    if suffix == 0:
        return "end", _slot(old[prefix:], arguments), _slot(new[prefix:], arguments)
    if prefix == 0:
        return "start", _slot(old[:len(old) - suffix], arguments), _slot(new[:len(new) - suffix], arguments)
    return None


def _apply(view: str, edit: Edit, arguments: Mapping[str, str]) -> str | None:
    where, removed, added = edit
    gone, new = _fill(removed, arguments), _fill(added, arguments)
    if gone is None or new is None:
        return None
    if where == "end" and view.endswith(gone):
        return view[:len(view) - len(gone)] + new
    if where == "start" and view.startswith(gone):
        return new + view[len(gone):]
    return None


def _around(template: str) -> tuple[str, str, str] | None:
    """(text before, the slot's key, text after) of an edit's text with exactly one slot, else None."""
    slots = list(re.finditer(r"(?<!\{)(?:\x00a\x00)?\{(\w+)\}(?!\})", template))
    if len(slots) != 1:
        return None
    before, after = template[:slots[0].start()], template[slots[0].end():]
    if "{" in before.replace("{{", "") or "{" in after.replace("{{", ""):
        return None
    return before.replace("{{", "{").replace("}}", "}"), slots[0].group(1), after.replace("{{", "{").replace("}}", "}")


def _listed(view: str, before: str, after: str) -> tuple[re.Match[str], list[str]] | None:
    """The view's closing sentence `before <list> after` and its items, if it ends so."""
    found = re.search(re.escape(before) + r"(?P<items>[^\n.!?]+?)" + re.escape(after) + r"\Z", view)
    parsed = parse_list_items(found.group("items")) if found else None
    return (found, parsed[0]) if found and parsed and parsed[0] else None


def _shape(name: str, arguments: Mapping[str, Any]) -> str:
    return name + "(" + ",".join(sorted(arguments)) + ")"


class _Places:
    """One episode's last view per place and the acts done in each place since."""

    def __init__(self, view_of: Callable[[str], tuple[str, str] | None], opening: str = "") -> None:
        self.view_of = view_of
        self.views: dict[str, str] = {}
        self.since: dict[str, list[tuple[str, dict[str, str]]]] = defaultdict(list)  # place -> (shape, phrases)
        self.place: str | None = None
        self.texts: list[str] = []  # every observation: where things' full names are read
        if opening:
            self.observe("", {}, opening)

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> tuple[str, str, list] | None:
        """Take a turn in; for a view of a place seen before: (place, its previous view, the acts since)."""
        shown = self.view_of(observation)
        self.texts.append(observation)
        if shown is None:
            named = {k: v for k, v in phrases(arguments).items() if names(v, observation.lower())}
            if self.place is not None and named:
                self.since[self.place].append((_shape(name, arguments), {k: str(arguments[k]) for k in named}))
            return None
        place, view = shown
        before = (place, self.views[place], list(self.since[place])) if place in self.views else None
        self.views[place], self.since[place], self.place = view, [], place
        return before


class ViewEdits:
    """Learned edits per action shape, and one episode's places (see module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = (), *, view_of: Callable[[str], tuple[str, str] | None],
                 carriers: Carriers | None = None, joins_front: bool | None = None,
                 summaries: EpisodeSummaries | None = None) -> None:
        """`joins_front`: where things join lists elsewhere in this environment (an inventory), for when no
        place's list grew in the evidence; `summaries`: observations' lists read once (`worldbook.summaries`)."""
        self.view_of = view_of
        self.edits: dict[str, Edit] = {}
        self.format = learn_list_format((item.observation for item in evidence), summaries=summaries)
        self.front = joins_front  # whether a thing joins a place's closing list at its front (None: unknown)
        self._learn(evidence)
        if carriers is not None:
            self._inverses(carriers)
        self.reset()

    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        intervals: list[tuple[str, str, list[tuple[str, dict[str, str]]]]] = []  # (old view, new view, acts)
        for items in group_by_episode(evidence).values():
            places = _Places(self.view_of)
            for item in items:
                seen = places.observe(item.action, item.arguments if isinstance(item.arguments, dict) else {},
                                      item.observation)
                if seen is not None and seen[2]:
                    acts = [(shape, _full(arguments, places.texts)) for shape, arguments in seen[2]]
                    intervals.append((seen[1], places.views[seen[0]], acts))
        outcomes: dict[str, Counter[Edit]] = defaultdict(Counter)
        for old, new, acts in intervals:
            if old == new:
                for shape, _ in acts:
                    outcomes[shape][_NONE] += 1
                continue
            change = _edit(old, new, {})
            if change is None:
                continue
            changed = (change[1] + change[2]).lower()
            named = {(shape, tuple(sorted(arguments.items()))) for shape, arguments in acts
                     if any(names(value.lower(), changed) for value in arguments.values())}
            if len(named) == 1:  # the one act whose thing the change names
                shape, arguments = next(iter(named))
                edit = _edit(old, new, dict(arguments))
                if edit is not None:
                    outcomes[shape][edit] += 1
        for shape, counts in outcomes.items():
            (edit, count), = counts.most_common(1)
            if edit != _NONE and count >= 2 and 2 * count > sum(counts.values()):
                self.edits[shape] = edit
        self._learn_placement(intervals)

    def _learn_placement(self, intervals: Sequence[tuple[str, str, list[tuple[str, dict[str, str]]]]]) -> None:
        """Where a thing joins a place's closing list ("There is a key and a coin on the floor."): the majority
        of the evidence's lists that grew by one."""
        placed: Counter[str] = Counter()
        for old, new, acts in intervals:
            for shape, _ in acts:
                around = _around(self.edits.get(shape, _NONE)[2])
                was, now = (_listed(old, around[0], around[2]), _listed(new, around[0], around[2])) if around else (
                    None, None)
                if was and now and len(now[1]) == len(was[1]) + 1:
                    placed["front" if now[1][1:] == was[1] else "back" if now[1][:-1] == was[1] else "other"] += 1
        if placed:
            (where, _), = placed.most_common(1)
            self.front = {"front": True, "back": False}.get(where)

    def _inverses(self, carriers: Carriers) -> None:
        """A take undoes a release: where releasing a thing adds text to the place (a drop: "There is a key on
        the floor."), taking it with the same arguments removes that text, unless the evidence taught otherwise."""
        for (released, key) in carriers.releases:
            for shape, (where, removed, added) in list(self.edits.items()):
                if not shape.startswith(released + "(") or removed or not added:
                    continue
                for (taker, taken) in carriers.takes:
                    inverse = taker + shape[len(released):]
                    if taken == key and inverse not in self.edits:
                        self.edits[inverse] = (where, added, "")

    def reset(self, opening: str = "") -> None:
        self.places = _Places(self.view_of, opening)

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        self.places.observe(name, arguments, observation)

    def edited(self, place: str) -> str | None:
        """The place's last view with the learned edits of the acts done there since; None when none applies."""
        view = self.places.views.get(place)
        acts = self.places.since.get(place, [])
        if view is None or not acts:
            return None
        for shape, arguments in acts:
            edit = self.edits.get(shape)
            if edit is None:
                continue
            full = _full(arguments, [*self.places.texts, view])
            if edit[2]:  # an addition joins the closing list already there, else adds the sentence
                changed = self._apply_listed(view, edit, full) or _apply(view, edit, full)
            else:
                changed = _apply(view, edit, full) or self._apply_listed(view, edit, full)
            if changed is None:
                return None  # the view is not as the edit expects: what it looks like now is unknown
            view = changed
        return view if view != self.places.views[place] else None

    def _apply_listed(self, view: str, edit: Edit, arguments: Mapping[str, str]) -> str | None:
        """An edit of the view's closing list: a thing joins it (where the evidence showed things join) or leaves
        it, the list rewritten in the environment's list format."""
        where, removed, added = edit
        around = _around(added or removed)
        if where != "end" or bool(added) == bool(removed) or around is None or around[1] not in arguments:
            return None
        before, key, after = around
        listed = _listed(view, before, after)
        if listed is None:
            return None
        found, items = listed
        thing = arguments[key]
        if added:
            if self.front is None:
                return None
            items = [thing, *items] if self.front else [*items, thing]
        else:
            gone = next((i for i in items if i.lower() == thing.lower() or i.lower().endswith(" " + thing.lower())), None)
            if gone is None:
                return None
            items = [i for i in items if i is not gone]
            if not items:
                return view[:found.start()]
        return view[:found.start()] + before + render_list(items, self.format) + after

    def refresh(self, observation: str) -> str | None:
        """`observation` with the place it shows as that place is now: when it shows the place's last view
        (a remembered answer, the map's view) and the acts done there since edit it; else None."""
        shown = self.view_of(observation)
        if shown is None or shown[1] != self.places.views.get(shown[0]):
            return None
        edited = self.edited(shown[0])
        return observation.replace(shown[1], edited) if edited is not None else None


class ViewEditSource:
    """The `view_edits` source: it answers nothing itself; the harness refreshes every view answer (`Answer.view`)
    with its edits (`refresh`)."""

    def __init__(self, context: SourceContext) -> None:
        places = context.source("places").tracker
        inventory = context.source("inventory").tracker
        self.tracker = ViewEdits(context.evidence, view_of=places.view_of, carriers=inventory.carriers,
                                 joins_front=next(iter(inventory.front.values()), None), summaries=context.summaries)

    def reset(self, opening: str) -> None:
        self.tracker.reset(opening)

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.name, step.arguments, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        return []

    def snapshot(self) -> dict[str, Any]:
        return {}

    def refresh(self, observation: str) -> str | None:
        return self.tracker.refresh(observation)


@answer_source("view_edits", requires=("places", "inventory"))
def _view_edits(context: SourceContext) -> AnswerSource:
    """How actions change the description of a place (refreshes view answers)."""
    return ViewEditSource(context)
