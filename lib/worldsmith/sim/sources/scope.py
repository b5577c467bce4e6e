"""What an action can refer to now: text worlds refuse an action on a thing that is not in view.

A text adventure answers `take knife from counter` with "You can't see any such thing." when no knife
is in view, `go west` with "You can't go that way." when the room shows no way west, ALFWorld's
`examine book 1` with "Nothing happens." away from the book. Which answer is the refusal, and
which *scope* predicts it, is learned per action from the evidence, not assumed:

- a thing is *in scope here* when the observations since the agent arrived at its current place
  (the arrival's description and every answer since), or the latest answer of an argument-less
  action that shows no place (an inventory), name it, or the agent holds it: an action that
  *takes* its argument answered naming it, and no action that *releases* it has since. Which
  (action, argument) pairs take and release is learned from the inventories the evidence shows
  (`sim.sources.inventory.learn_carriers`: the thing joins, or leaves, the next inventory);
- a thing is *in scope in the episode* when any observation of the episode so far names it, or it is
  a *common* value of the action: one the evidence answered in `COMMON_ANSWERS` different ways or
  more (`go west` leads to many rooms: a direction is a thing every episode knows; `go zorkmid` is
  always refused the same way).

Refusals are learned per action and level, broadest first (a thing unknown anywhere, then a thing
known but not here: "You can't see any such thing." and "You can't go that way."): the one answer,
as a template with the arguments it repeats as slots ("cd: '{folder}': No such file or directory"),
that most of the level's out-of-scope turns get (at least `MIN_TURNS`, for two action lines or more)
and few of at least `MIN_TURNS` fully in-scope turns get: a refusal is a contrast. Where every action
that learned a refusal at a level gives the same one, it is the environment's *general* refusal
there, used for actions too rare to learn their own. An environment that never shows a place (a tool
API) is one place per episode. The tracker then proposes `scope` (the refusal, when a thing the
action names is out of scope) and `scope_form` (the evidence's usual in-scope answer to actions of
the same shape, things held and things in view apart, their arguments as slots: "You take the
{object} from the {source}."). Like every tracker it proposes; the route table decides.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.inventory import COMMON_ANSWERS, Carriers, learn_carriers, names, phrases
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.model import Evidence

__all__ = ["LEVELS", "MIN_TURNS", "Refusal", "ScopeSource", "ScopeTracker"]

LEVELS = ("here", "episode")
_BROADEST_FIRST = ("episode", "here")
MIN_TURNS = 3  # out-of-scope turns an action needs before its refusal is believed
_PRECISION = 0.8  # share of out-of-scope turns the refusal must answer
_LEAK = 0.2  # most share of in-scope turns it may answer


@dataclass(frozen=True)
class Refusal:
    """An action's learned refusal: the answer, the scope level that predicts it, and how well it did."""

    observation: str
    level: str
    accuracy: float
    turns: int


def _shape(name: str, arguments: Mapping[str, Any], held: bool = False) -> str:
    """An action's shape: its name and argument names, `held ` before it when everything it names is held (an
    answer about a thing in hand differs from one about a thing in view)."""
    return ("held " if held else "") + name + "(" + ",".join(sorted(arguments)) + ")"


class _Scope:
    """One episode's scope texts, lower case, as observations arrive."""

    def __init__(self, place_of: Callable[[str], str | None], common: set[str], opening: str = "",
                 carriers: Carriers | None = None, placeless: bool = False) -> None:
        self.place_of = place_of
        self.placeless = placeless  # an environment that never shows a place: the episode is one place
        self.common = common
        self.carriers = carriers or Carriers()
        self.held: set[str] = set()
        self.place = place_of(opening) if opening else None
        self.here: list[str] = [opening.lower()] if opening else []
        self.lists: dict[str, str] = {}  # argument-less action -> its latest placeless answer (an inventory)
        self.episode: list[str] = list(self.here)

    @property
    def located(self) -> bool:
        return self.place is not None or self.placeless

    def holds(self, level: str, phrase: str) -> bool:
        if level == "episode" and phrase in self.common:
            return True
        if level == "here" and phrase in self.held:
            return True
        texts = self.episode if level == "episode" else [*self.here, *self.lists.values()]
        return any(names(phrase, text) for text in texts)

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        text = observation.lower()
        place = self.place_of(observation)
        if place is not None and place != self.place:
            self.place, self.here = place, [text]
        else:
            self.here.append(text)
        if place is None and not phrases(arguments):
            self.lists[name] = text
        self.episode.append(text)
        for key, phrase in phrases(arguments).items():
            if names(phrase, text):
                if (name, key) in self.carriers.takes:
                    self.held.add(phrase)
                elif (name, key) in self.carriers.releases:
                    self.held.discard(phrase)


def _slotted(observation: str, arguments: Mapping[str, Any]) -> str:
    """The observation as a template: braces escaped, every string argument it shows as its `{slot}` (a refusal
    that echoes the thing: "cd: '{folder}': No such file or directory")."""
    form = observation.replace("{", "{{").replace("}", "}}")
    for key, value in sorted(((k, v) for k, v in arguments.items() if isinstance(v, str) and len(v.strip()) > 1),
                             key=lambda kv: -len(kv[1])):
        form = form.replace(value, "{" + key + "}")
    return form


def _fill(template: str, arguments: Mapping[str, Any]) -> str | None:
    try:
        return template.format(**{k: v for k, v in arguments.items() if isinstance(v, str)})
    except (KeyError, IndexError, ValueError):
        return None


def _form(observation: str, arguments: Mapping[str, Any]) -> str | None:
    """The observation with every argument's value as its `{slot}` (longest value first), or None when some value
    does not appear in it."""
    form = observation.replace("{", "{{").replace("}", "}}")
    for key, value in sorted(((k, v) for k, v in arguments.items() if isinstance(v, str) and v.strip()),
                             key=lambda kv: -len(kv[1])):
        if value not in form:
            return None
        form = form.replace(value, "{" + key + "}")
    return form


class _Row(NamedTuple):
    """One turn of an action that names things: whether they were in scope per level, its answer as a template, and
    its action line."""

    flags: dict[str, bool]
    answer: str
    line: str


class _Answer(NamedTuple):
    observation: str
    arguments: dict[str, Any]


def _common_values(evidence: Sequence[Evidence]) -> dict[str, set[str]]:
    """Per action, the argument values the evidence answered in `COMMON_ANSWERS` different ways or more."""
    answers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for item in evidence:
        for phrase in phrases(item.arguments if isinstance(item.arguments, dict) else {}).values():
            answers[(item.action, phrase)].add(item.observation)
    common: dict[str, set[str]] = {}
    for (name, phrase), seen in answers.items():
        if len(seen) >= COMMON_ANSWERS:
            common.setdefault(name, set()).add(phrase)
    return common


def _refusals(rows: Sequence[_Row]) -> tuple[list[Refusal], set[str]]:
    """An action's refusals, broadest level first, and the levels with enough out-of-scope turns to judge: each
    level is learned on the turns in scope at the broader ones."""
    refusals: list[Refusal] = []
    measured: set[str] = set()
    for level in _BROADEST_FIRST:  # a thing unknown anywhere, then a thing known but not here
        refusal = _refusal(rows, level)
        if refusal is not None:
            refusals.append(refusal)
        if sum(not row.flags[level] for row in rows) >= MIN_TURNS:
            measured.add(level)
        rows = [row for row in rows if row.flags[level]]
    return refusals, measured


def _general_refusals(refusals: Mapping[str, Sequence[Refusal]]) -> dict[str, Refusal]:
    """Per level, the refusal every action that learned one there gives, when two actions or more did."""
    general: dict[str, Refusal] = {}
    for level in LEVELS:
        learned = [r for found in refusals.values() for r in found if r.level == level]
        if len(learned) >= 2 and len({r.observation for r in learned}) == 1:
            general[level] = Refusal(learned[0].observation, level,
                                     round(min(r.accuracy for r in learned), 4), sum(r.turns for r in learned))
    return general


def _usual_form(answers: Sequence[_Answer], refused: set[str]) -> str | None:
    """The plurality form (seen twice or more, ahead of the next) of the answers that are no refusal, if any."""
    forms = Counter(form for observation, arguments in answers if _slotted(observation, arguments) not in refused
                    for form in [_form(observation, arguments)] if form is not None and "{" in form)
    ranked = forms.most_common(2)
    if ranked and ranked[0][1] >= 2 and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        return ranked[0][0]  # the plurality: the route table measures it held out
    return None


class ScopeTracker:
    """Learned refusals and in-scope forms per action, and one episode's scope (see module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = (), *, place_of: Callable[[str], str | None],
                 carriers: Carriers | None = None) -> None:
        self.place_of = place_of
        self._carriers = carriers  # learned here when not given (`InventoryTracker` learns the same)
        self.refusals: dict[str, list[Refusal]] = {}  # action -> its refusals (templates), broadest level first
        self.placeless = False  # whether the evidence never shows a place (JSON tools): then an episode is one
        self.general: dict[str, Refusal] = {}  # level -> the refusal every action that learned one gives there
        self.measured: dict[str, set[str]] = {}  # action -> levels with enough out-of-scope turns to judge
        self.forms: dict[str, str] = {}  # action shape -> its usual in-scope answer with slots
        self.common: dict[str, set[str]] = {}  # action -> its common argument values
        self._learn(evidence)
        self.reset()

    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        self.common = _common_values(evidence)
        episodes = group_by_episode(evidence).values()
        self.carriers = self._carriers or learn_carriers(episodes, self.place_of)
        self.placeless = bool(evidence) and not any(self.place_of(item.observation) for item in evidence)
        rows, scoped = self._walk(episodes)
        for name, found in rows.items():
            self.refusals[name], self.measured[name] = _refusals(found)
        self.general = _general_refusals(self.refusals)
        for shape, answers in scoped.items():
            refused = {r.observation for r in self.refusals.get(shape.split("(", 1)[0].split(" ", 1)[-1], [])}
            form = _usual_form(answers, refused)
            if form is not None:
                self.forms[shape] = form

    def _walk(self, episodes: Iterable[Sequence[Evidence]]) -> tuple[dict[str, list[_Row]], dict[str, list[_Answer]]]:
        """Replay the episodes' scope: every action's rows (its scope flags, answer and line, once a place is known)
        and the in-scope answers per action shape."""
        rows: dict[str, list[_Row]] = defaultdict(list)
        scoped: dict[str, list[_Answer]] = defaultdict(list)  # shape -> in-scope answers
        for items in episodes:
            scope = _Scope(self.place_of, set(), carriers=self.carriers, placeless=self.placeless)
            for item in items:
                arguments = item.arguments if isinstance(item.arguments, dict) else {}
                named = list(phrases(arguments).values())
                scope.common = self.common.get(item.action, set())
                if named and scope.located:  # before the first place shown, the evidence lacks the opening
                    flags = {level: all(scope.holds(level, p) for p in named) for level in LEVELS}
                    rows[item.action].append(_Row(flags, _slotted(item.observation, arguments),
                                                  " ".join(item.action_text.split())))
                    if flags["here"]:
                        held = all(p in scope.held for p in named)
                        scoped[_shape(item.action, arguments, held)].append(_Answer(item.observation, arguments))
                scope.observe(item.action, arguments, item.observation)
        return rows, scoped

    def reset(self, opening: str = "") -> None:
        self.scope = _Scope(self.place_of, set(), opening, self.carriers, self.placeless)
        self.affirmed: list[str] = [opening.lower()] if opening else []  # the episode's answers that refused nothing

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        self.scope.observe(name, arguments, observation)
        if observation not in self._refused_texts(name, arguments):
            self.affirmed.append(observation.lower())

    def _refused_texts(self, name: str, arguments: Mapping[str, Any]) -> set[str]:
        """The action's learned refusals (its own, else the general ones) with these arguments slotted."""
        found = self.refusals.get(name) or list(self.general.values())
        return {text for refusal in found for text in [_fill(refusal.observation, arguments)] if text is not None}

    def contradicted(self, name: str, arguments: Mapping[str, Any]) -> set[str]:
        """The action's episode-level refusals (a thing unknown anywhere) that this episode contradicts now: every
        thing the refusal names (its slots; all the action names when it has none) is in view and was named by an
        answer that refused nothing. Why: an answer adapted from another episode's refusal ("user X not found")
        is wrong once the episode showed X exists; the fallback should not give it."""
        found = phrases(arguments)
        if not found or not self.scope.located:
            return set()
        own = [r for r in self.refusals.get(name, []) if r.level == "episode"]
        general = self.general.get("episode")
        refusals = own or ([general] if general is not None and "episode" not in self.measured.get(name, set())
                           else [])
        out: set[str] = set()
        for refusal in refusals:
            slots = [key for key in found if "{" + key + "}" in refusal.observation] or list(found)
            named = [found[key] for key in slots]
            if all(self.scope.holds("here", p) and any(names(p, text) for text in self.affirmed) for p in named):
                text = _fill(refusal.observation, arguments)
                if text is not None:
                    out.add(text)
        return out

    def propose(self, name: str, arguments: Mapping[str, Any], *, carried_known: bool = True) -> list[CandidateAnswer]:
        """`carried_known`: whether what the agent carries is known (an inventory was shown, or episodes start
        empty-handed); when not, the thing a release acts on (`drop(object)`) may be carried unseen: not refused."""
        found = phrases(arguments)
        if not carried_known:
            found = {k: v for k, v in found.items() if (name, k) not in self.carriers.releases}
        named = list(found.values())
        if not named or not self.scope.located:
            return []
        self.scope.common = self.common.get(name, set())
        own = {refusal.level: refusal for refusal in self.refusals.get(name, [])}
        measured = self.measured.get(name, set())
        refusals = {level: own.get(level) or (self.general.get(level) if level not in measured else None)
                    for level in _BROADEST_FIRST}
        for level in _BROADEST_FIRST if any(refusals.values()) else ():
            missing = [p for p in named if not self.scope.holds(level, p)]
            if not missing:
                continue
            refusal = refusals[level]
            if refusal is None:  # a narrower level's refusal was learned only on things in scope at this one
                return []
            whose = f"{name!r}" if level in own else "every action that learned a refusal"
            answer = _fill(refusal.observation, arguments)
            if answer is None:
                return []
            return [CandidateAnswer("scope", answer, outcome="failure", form=refusal.observation, notes=[
                f"{missing[0]!r} is not in view ({level}): the evidence refused {whose} so in "
                f"{refusal.accuracy:.0%} of {refusal.turns} turns"])]
        held = all(p in self.scope.held for p in named)
        form = self.forms.get(_shape(name, arguments, held)) or self.forms.get(_shape(name, arguments))
        if form is None or not all(self.scope.holds("here", p) for p in named):
            return []
        observation = _fill(form, arguments)
        if observation is None:
            return []
        return [CandidateAnswer("scope_form", observation, form=form, notes=[
            f"everything {name!r} names is {'held' if held else 'in view'}: its usual answer"])]

    def snapshot(self) -> dict[str, Any]:
        return {"held": sorted(self.scope.held),
                "refusals": {name: [r.observation for r in found] for name, found in sorted(self.refusals.items())
                             if found}}


def _refusal(rows: Sequence[_Row], level: str) -> Refusal | None:
    """The refusal that (scope flags, answer template, action line) rows support at `level`, if any: one answer
    to most out-of-scope turns, for two action lines or more, and to few of (at least `MIN_TURNS`) turns in scope
    at every level (a narrower level may refuse the same way)."""
    out = [(answer, line) for flags, answer, line in rows if not flags[level]]
    inside = [answer for flags, answer, _ in rows if all(flags.values())]
    if len(out) < MIN_TURNS or len(inside) < MIN_TURNS:  # a refusal is a contrast: both sides must be seen
        return None
    answer, count = Counter(a for a, _ in out).most_common(1)[0]
    lines = {line for a, line in out if a == answer}
    leaked = sum(a == answer for a in inside)
    if count < _PRECISION * len(out) or len(lines) < 2 or leaked > _LEAK * max(len(inside), 1):
        return None
    return Refusal(answer, level, round((count + len(inside) - leaked) / len(rows), 4), len(rows))


class ScopeSource:
    """The `scope` source: a `ScopeTracker` reading places and what is carried through `places` and `inventory`."""

    def __init__(self, context: SourceContext) -> None:
        self.inventory = context.source("inventory").tracker
        self.tracker = ScopeTracker(context.evidence, place_of=context.source("places").tracker.place_of,
                                    carriers=self.inventory.carriers)
        self.gate = context.tracking

    def reset(self, opening: str) -> None:
        self.tracker.reset(opening)

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.name, step.arguments, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        if not self.gate:
            return []
        return self.tracker.propose(step.name, step.arguments, carried_known=self.inventory.known)

    def snapshot(self) -> dict[str, Any]:
        return self.tracker.snapshot()


# `scope` (a refusal of things not in view) is one answer the whole environment gives: an action too rare to have
# its own record is judged by the pooled one; `scope_form` depends on the action.
@answer_source("scope", requires=("places", "inventory"), snapshot_key="scope", answers=(
    Answer("scope", rank=50), Answer("scope_form", rank=130, per_action=True)))
def _scope(context: SourceContext) -> AnswerSource:
    """Refusals of things not in view, and the usual in-scope answer."""
    return ScopeSource(context)
