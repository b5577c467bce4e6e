"""Rule induction with state: observation forms, free slots, conditions and effects checked by replay.

The deterministic builder's core. For every action it

1. turns each observation into a *form*: enumerations become state slots
   (`{world.contents[arg.target]}`), argument values become `{arg.x}` slots;
2. merges forms that differ in a few words into one template with *free slots* ("You arrive at
   loc 22." / "loc 5." -> `{world.go.slot1[arg.target]}`), keyed by the argument under which the
   value stays the same within an episode (checked on the evidence);
3. replays every episode (`EpisodeReplay`: each turn votes on its form's conditions, settles earlier
   proposals, proposes effects), tracking the state its observations reveal, and reads
   - **conditions**: a property the form states ("The cabinet 1 is closed.") that already held
     before the turn, or that sibling forms state and this one never does (then it is `None`);
   - **effects**: such a property that changed with the turn becomes a `set`; list and property
     changes nothing in the turn shows ("take" moves an object out of a receptacle) are proposed
     from the arguments and kept only when later observations confirm them (the receptacle seen
     again without the object) and do not contradict them.

Statuses come afterwards from `replay.review_rules`, which falsifies every rule against all evidence.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.worldbook.engine import (
    EffectError,
    apply_effects,
    get_path,
    is_missing,
    literal_value,
    match_template,
    resolve_path,
    set_path,
)
from worldsmith.worldbook.facts import (
    CONTENTS,
    STATUS,
    action_collection,
    extract_facts,
    find_lists,
    find_properties,
    list_owner,
    parse_json_object,
)
from worldsmith.worldbook.model import Condition, Effect, Evidence, Rule, RuleProvenance, RuleStatus, join_path
from worldsmith.worldbook.templates import make_template

__all__ = [
    "CandidateKey",
    "EffectCandidate",
    "EffectKey",
    "EpisodeReplay",
    "Form",
    "FormKey",
    "FormTag",
    "InducedRules",
    "InductionConfig",
    "PlacedForm",
    "ReplayContext",
    "Vote",
    "episode_of",
    "group_by_episode",
    "implied_properties",
    "induce_candidates",
    "induce_forms",
    "induce_rules",
    "observation_form",
    "turn_facts",
]

_TOKEN = re.compile(r"\{\{|\}\}|\{[^{}]*\}|\w+|[^\w\s]|\s+")


@dataclass(frozen=True)
class InductionConfig:
    max_free_slots: int = 3  # words in which two observations may differ and still share a template
    max_forms_per_action: int = 20
    min_confirmations: int = 2  # later observations that must confirm a proposed effect
    max_contradiction_share: float = 0.1
    max_provenance: int = 50


@dataclass
class Form:
    """One observation template of an action and the turns whose observations it fits."""

    action: str
    template: str
    turns: list[str] = field(default_factory=list)
    outcome: str = "success"
    free_slots: list[str] = field(default_factory=list)  # paths of free slots, keyed later


@dataclass
class EffectCandidate:
    effect: Effect
    confirmations: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)


def episode_of(turn_id: str) -> str:
    return turn_id.rsplit("#", 1)[0]


def group_by_episode(evidence: Iterable[Evidence]) -> dict[str, list[Evidence]]:
    """Evidence per episode, in turn order (turn ids are `<episode>#<index>`)."""
    grouped: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        grouped[episode_of(item.turn_id)].append(item)
    for items in grouped.values():
        items.sort(key=lambda item: int(item.turn_id.rsplit("#", 1)[1]))
    return dict(grouped)


def _args(item: Evidence) -> dict[str, Any]:
    return item.arguments if isinstance(item.arguments, dict) else {}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text.lower()).strip("_") or "action"


def unique_slugs(actions: Iterable[str]) -> dict[str, str]:
    """Each action's slug for rule ids, unique: an action whose slug another (earlier in sorted order) already has
    gets a digest of its name added (`getUserId` beside `getuserid`, `f(x='a` beside `f`), so two actions never
    make rules of one id."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for action in sorted(set(actions)):
        slug = _slug(action)
        if slug in taken:
            slug = f"{slug}_{hashlib.sha256(action.encode()).hexdigest()[:8]}"
        taken.add(slug)
        out[action] = slug
    return out


def _arg_name_of(value: str, arguments: Mapping[str, Any]) -> str | None:
    return next((name for name, v in arguments.items() if isinstance(v, (str, int, float)) and str(v) == value), None)


def observation_form(item: Evidence) -> str:
    """The observation with its enumerations as state slots and argument values as argument slots."""
    arguments = _args(item)
    observation = item.observation
    if parse_json_object(observation) is not None:
        return make_template(arguments, observation)
    pieces: list[str] = []
    position = 0
    for found in find_lists(observation):
        owner = list_owner(found, observation, arguments)
        key = _arg_name_of(owner, arguments) if owner is not None else None
        slot = (f"{{world.{CONTENTS}[arg.{key}]}}" if key is not None
                else f"{{world.{action_collection(item.action)}}}")
        pieces.append(make_template(arguments, observation[position:found.start]))
        pieces.append(slot)
        position = found.end
    pieces.append(make_template(arguments, observation[position:]))
    return "".join(pieces)


def implied_properties(template: str) -> dict[str, str]:
    """Property facts a template states in its literal text: `world.status.{arg.object}` -> "open"."""
    implied: dict[str, str] = {}
    for entity, value, _, _ in find_properties(template):
        slot = re.fullmatch(r"\{arg\.([A-Za-z0-9_]+)\}", entity.strip())
        if slot:
            implied[f"world.{STATUS}.{{arg.{slot.group(1)}}}"] = value.lower() if value.islower() else value
    return implied


def turn_facts(item: Evidence) -> dict[tuple[str, ...], Any]:
    """The generic facts the turn's observation shows (lists, properties, JSON keys)."""
    return {tuple(fact.path): fact.value for fact in extract_facts(item.action, _args(item), item.observation)}


# ----------------------------------------------------------------------------------------- forms
def _merge(template_tokens: list[str], other: list[str], free: set[int], limit: int) -> set[int] | None:
    if len(template_tokens) != len(other):
        return None
    differing = {i for i, (a, b) in enumerate(zip(template_tokens, other, strict=True)) if a != b and i not in free}
    if not differing:
        return free
    for i in differing:
        if template_tokens[i].startswith("{") or other[i].startswith("{") or not re.fullmatch(r"\w+", other[i]):
            return None
    merged = free | differing
    return merged if len(_runs(merged)) <= limit else None


def _runs(positions: set[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for position in sorted(positions):
        if runs and position == runs[-1][-1] + 2:  # "loc 22": a word, a space, a word stay one slot
            runs[-1].extend([position - 1, position])
        elif runs and position == runs[-1][-1] + 1:
            runs[-1].append(position)
        else:
            runs.append([position])
    return runs


def cluster_forms(action: str, forms: Mapping[str, list[Evidence]], config: InductionConfig) -> list[Form]:
    """Forms that differ in a few words share one template with free slots."""
    clusters: list[tuple[list[str], set[int], list[Evidence]]] = []
    for template, items in sorted(forms.items(), key=lambda pair: (-len(pair[1]), pair[0])):
        tokens = _TOKEN.findall(template)
        for index, (rep, free, members) in enumerate(clusters):
            merged = _merge(rep, tokens, free, config.max_free_slots)
            if merged is not None:
                clusters[index] = (rep, merged, members + items)
                break
        else:
            clusters.append((tokens, set(), list(items)))
    out: list[Form] = []
    prefix = f"world.{_slug(action)}"
    for tokens, free, members in clusters:
        text = list(tokens)
        slots: list[str] = []
        for number, run in enumerate(_runs(free), start=1):
            before = [t for t in tokens[: run[0]] if re.fullmatch(r"[A-Za-z]\w*", t)]
            name = _slug(before[-1]) if before else f"slot{number}"
            path = f"{prefix}.{name}" if f"{prefix}.{name}" not in slots else f"{prefix}.{name}{number}"
            slots.append(path)
            text[run[0]] = "{" + path + "}"
            for position in run[1:]:
                text[position] = ""
        outcomes = Counter(item.outcome or "success" for item in members)
        out.append(Form(action=action, template="".join(text), turns=[item.turn_id for item in members],
                        outcome=outcomes.most_common(1)[0][0], free_slots=slots))
    out.sort(key=lambda form: (-len(form.turns), form.template))
    return out[: config.max_forms_per_action]


def _key_free_slots(form: Form, items: Sequence[Evidence]) -> None:
    """Key each free slot by the argument under which its value repeats within an episode."""
    if not form.free_slots:
        return
    seen: dict[tuple[str, str, str | None, str], Any] = {}
    score: Counter[tuple[str, str | None]] = Counter()
    for item in items:
        values = match_template(form.template, item.observation, _args(item))
        if values is None:
            continue
        episode = episode_of(item.turn_id)
        for path in form.free_slots:
            value = values.get(tuple(path.split(".")))
            for arg in [None, *sorted(_args(item))]:
                key = (episode, path, arg, str(_args(item).get(arg)) if arg else "")
                if key in seen:
                    score[(path, arg)] += 1 if seen[key] == value else -5
                seen[key] = value
    template = form.template
    first = sorted(_args(items[0])) if items else []
    main = "target" if "target" in first else "object" if "object" in first else (first[0] if first else None)
    for path in form.free_slots:
        keyed = [(score[(path, arg)], arg) for (p, arg) in score if p == path and arg is not None]
        best_score, best_arg = max(keyed, default=(0, main))
        if best_score < 0 and score[(path, None)] > 0:
            continue  # the same value all episode long, whatever the arguments: a keyless slot
        if best_arg:
            template = template.replace("{" + path + "}", "{" + path + f"[arg.{best_arg}]}}")
    form.template = template


# ----------------------------------------------------------------------------------------- replay
class FormKey(NamedTuple):
    """A form's identity: its action and its rank among the action's forms (the `r<rank>` of its rule id)."""

    action: str
    rank: int


class FormTag(NamedTuple):
    """What effects are filed under: the action and the form's template, so forms that read alike share them."""

    action: str
    template: str


class EffectKey(NamedTuple):
    """A proposed effect as a key: the op, the path template and the value's text."""

    op: str
    path: str
    value: str

    @classmethod
    def of(cls, effect: Effect) -> EffectKey:
        return cls(effect.op, effect.path, f"{effect.value}")


class CandidateKey(NamedTuple):
    """One effect proposed after turns of one form."""

    form: FormTag
    effect: EffectKey


class Vote(NamedTuple):
    """What a form's turn showed about a path: a property value the form states, or a membership, and the verdict
    against the state before the turn (`same`, `changed`, `unknown`; `contains`, `lacks`)."""

    path: str
    value: Any
    verdict: str


@dataclass
class _Pending:
    candidate: CandidateKey
    path: tuple[str, ...]
    item: Any  # the list member or the property value predicted
    present: bool  # lists: should the member be there; properties: always True
    mentions: frozenset[str]  # a later turn naming all of these may have changed the path since
    turn_id: str
    touched: bool = False  # such a turn came: a later observation that agrees still confirms, one that does not
    # proves nothing (the other turn may have moved it: `put`), where a read (`examine`) would void a confirmation

    def holds(self, value: Any) -> bool:
        """Whether an observed value agrees with the prediction."""
        return (self.item in value) == self.present if isinstance(value, list) else value == self.item


_LIST_OPS: tuple[Literal["remove", "append"], ...] = ("remove", "append")


def _arg_texts(arguments: Mapping[str, Any]) -> set[str]:
    return {str(v) for v in arguments.values() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}


@lru_cache(maxsize=4096, typed=True)
def _effect(op: str, path: str, value: Any) -> Effect:
    """A proposed effect, made once: every turn of an action proposes the same few, and validating each anew was a
    good part of the induction (the instances are shared, so they are never edited)."""
    return Effect(op=op, path=path, value=value)  # type: ignore[arg-type]


def _candidates(item: Evidence, families: Mapping[str, set[Any]]) -> list[tuple[Effect, str]]:
    """(effect, main value) proposals for this turn, from its argument roles and the state families."""
    arguments = {k: v for k, v in _args(item).items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
    if not arguments:
        return []
    names = sorted(arguments)
    moved = "object" if "object" in arguments else names[0]
    out: list[tuple[Effect, str]] = []
    if CONTENTS in families:
        for other in names:
            if other == moved:
                continue
            for op in _LIST_OPS:
                out.append((_effect(op, f"world.{CONTENTS}.{{arg.{other}}}", f"{{arg.{moved}}}"),
                            str(arguments[moved])))
    for collection in sorted(families.get("__keyless__", set())):
        for op in _LIST_OPS:
            out.append((_effect(op, join_path(["world", collection]), f"{{arg.{moved}}}"),
                        str(arguments[moved])))
    for name in names:
        for value in sorted(families.get(STATUS, set()), key=str):
            out.append((_effect("set", f"world.{STATUS}.{{arg.{name}}}", value), str(arguments[name])))
    return out


def _families(facts_by_turn: Mapping[str, dict[tuple[str, ...], Any]]) -> dict[str, set[Any]]:
    families: dict[str, set[Any]] = defaultdict(set)
    for facts in facts_by_turn.values():
        for path, value in facts.items():
            if len(path) == 3 and path[1] == CONTENTS:
                families[CONTENTS].add(None)
            elif len(path) == 3 and path[1] == STATUS:
                families[STATUS].add(value)
            elif len(path) == 2 and isinstance(value, list):
                families["__keyless__"].add(path[1])
    return families


def _membership_votes(arguments: Mapping[str, Any], state: Mapping[str, Any]) -> list[Vote]:
    """Before the turn, does a collection named by one argument hold another argument's value?"""
    votes: list[Vote] = []
    names = sorted(k for k, v in arguments.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool))
    for holder in names:
        items = get_path(state, ["world", CONTENTS, str(arguments[holder])])
        if not isinstance(items, list):
            continue
        for member in names:
            if member != holder:
                verdict = "contains" if str(arguments[member]) in items else "lacks"
                votes.append(Vote(f"world.{CONTENTS}.{{arg.{holder}}}", f"{{arg.{member}}}", verdict))
    return votes


def _resolve(path: str, arguments: Mapping[str, Any]) -> tuple[str, ...] | None:
    segments = resolve_path(path, arguments)
    return tuple(segments) if segments is not None else None


def _pending(key: CandidateKey, effect: Effect, value: str, segments: tuple[str, ...], before: Any,
             turn_id: str) -> _Pending | None:
    """The prediction an effect makes about a path, or None when there is nothing to learn (the path unknown before
    the turn, or the effect would change nothing)."""
    if effect.op in _LIST_OPS:
        present = effect.op == "append"
        if not isinstance(before, list) or (value in before) == present:
            return None
        # a later turn naming the member (and the holder, when an argument names it) may move it
        mentions = frozenset({value, segments[-1]}) if "{arg." in effect.path else frozenset({value})
        return _Pending(key, segments, value, present, mentions, turn_id)
    if is_missing(before) or before == effect.value:
        return None
    return _Pending(key, segments, effect.value, True, frozenset({value}), turn_id)


class PlacedForm(NamedTuple):
    """The form a turn's observation fits, with its key."""

    key: FormKey
    form: Form


@dataclass(frozen=True)
class ReplayContext:
    """What the passes over the episodes share: each turn's form and facts, the state families, the collections
    that start empty, and the property paths each action's forms state."""

    form_of: Mapping[str, PlacedForm]
    facts_by_turn: Mapping[str, dict[tuple[str, ...], Any]]
    families: Mapping[str, set[Any]]
    empty_at_start: Sequence[str]
    stated: Mapping[str, set[str]]

    @classmethod
    def of(cls, evidence: Sequence[Evidence], forms: Mapping[str, list[Form]]) -> ReplayContext:
        """The context of `forms` (action -> its forms, ranked) over the evidence they were induced from."""
        form_of = {turn_id: PlacedForm(FormKey(action, rank), form) for action, action_forms in forms.items()
                   for rank, form in enumerate(action_forms, start=1) for turn_id in form.turns}
        facts_by_turn = {item.turn_id: turn_facts(item) for item in evidence}
        families = _families(facts_by_turn)
        # What an argument-less action lists (the inventory) is taken as empty when an episode starts: effects on
        # it can then be proposed before it is first shown, and later observations confirm or contradict them.
        with_arguments = {item.action for item in evidence if _args(item)}
        listed = {action_collection(item.action) for item in evidence if item.action not in with_arguments}
        empty_at_start = sorted(set(families.get("__keyless__", set())) & listed)
        # Property paths each action's forms state; a sibling form that never states one implies None.
        stated = {action: {p for f in fs for p in implied_properties(f.template)} for action, fs in forms.items()}
        return cls(form_of, facts_by_turn, families, empty_at_start, stated)


class EpisodeReplay:
    """One pass over every episode, tracking the state its observations reveal. Each turn of a form *votes* on the
    form's conditions, *settles* earlier proposals against what it shows, and *proposes* effects for later turns
    to confirm or contradict. `predicted` (form tag -> effects) is applied to the state after each turn of that
    form: a second pass checks later turns against the effects the first confirmed."""

    def __init__(self, context: ReplayContext, predicted: Mapping[FormTag, list[Effect]] | None = None) -> None:
        self.context = context
        self.predicted: Mapping[FormTag, list[Effect]] = predicted or {}
        self.votes: dict[FormKey, Counter[Vote]] = defaultdict(Counter)
        self.candidates: dict[str, dict[CandidateKey, EffectCandidate]] = defaultdict(dict)  # per action

    def run(self, evidence: Sequence[Evidence]) -> EpisodeReplay:
        for items in group_by_episode(evidence).values():
            self._episode(items)
        return self

    def _episode(self, items: Sequence[Evidence]) -> None:
        empty = self.context.empty_at_start
        state: dict[str, Any] = {"world": {name: [] for name in empty}} if empty else {}
        pending: list[_Pending] = []
        for item in items:
            placed = self.context.form_of.get(item.turn_id)
            observed = dict(self.context.facts_by_turn[item.turn_id])
            if placed is not None:
                self.vote(item, placed, state, observed)
            pending = self.settle(pending, observed, _arg_texts(_args(item)))
            pending += self.propose(item, placed.form if placed is not None else None, state)
            state = self._advance(state, item, placed.form if placed is not None else None, observed)

    def vote(self, item: Evidence, placed: PlacedForm, state: Mapping[str, Any],
             observed: dict[tuple[str, ...], Any]) -> None:
        """Tally what the form states against the state before the turn; what it shows joins `observed`."""
        arguments = _args(item)
        tally = self.votes[placed.key]
        implied: dict[str, str | None] = dict(implied_properties(placed.form.template))
        for path in self.context.stated.get(item.action, set()):
            implied.setdefault(path, None)
        for path, value in implied.items():
            segments = _resolve(path, arguments)
            if segments is None:
                continue
            before = get_path(state, segments)
            verdict = "unknown" if is_missing(before) else ("same" if before == value else "changed")
            tally[Vote(path, value, verdict)] += 1
            observed.setdefault(segments, value)
        observed.update(match_template(placed.form.template, item.observation, arguments) or {})
        for vote in _membership_votes(arguments, state):
            tally[vote] += 1

    def settle(self, pending: Sequence[_Pending], observed: Mapping[tuple[str, ...], Any],
               mentioned: set[str]) -> list[_Pending]:
        """Confirm or contradict the proposals whose path this turn shows; the rest stay pending, marked touched
        when the turn names everything that could have moved them."""
        still: list[_Pending] = []
        for proposal in pending:
            if proposal.path not in observed:
                proposal.touched = proposal.touched or proposal.mentions <= mentioned
                still.append(proposal)
                continue
            record = self.candidates[proposal.candidate.form.action][proposal.candidate]
            if proposal.holds(observed[proposal.path]):
                record.confirmations.append(proposal.turn_id)
            elif not proposal.touched:
                record.contradictions.append(proposal.turn_id)
        return still

    def propose(self, item: Evidence, form: Form | None, state: Mapping[str, Any]) -> list[_Pending]:
        """The effects a successful turn may have had that the state before it can tell, as pending predictions."""
        if (form.outcome if form else item.outcome or "success") != "success":
            return []
        tag = FormTag(item.action, form.template if form is not None else "")  # effects belong to a form
        arguments = _args(item)
        proposals: list[_Pending] = []
        for effect, value in _candidates(item, self.context.families):
            segments = _resolve(effect.path, arguments)
            if segments is None:
                continue
            key = CandidateKey(tag, EffectKey.of(effect))
            proposal = _pending(key, effect, value, segments, get_path(state, segments), item.turn_id)
            if proposal is None:
                continue
            proposals.append(proposal)
            self.candidates[item.action].setdefault(key, EffectCandidate(effect))
        return proposals

    def _advance(self, state: dict[str, Any], item: Evidence, form: Form | None,
                 observed: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
        """The state after the turn: the form's predicted effects, then everything the turn showed."""
        if form is not None and form.outcome == "success":
            try:
                state = apply_effects(state, self.predicted.get(FormTag(item.action, form.template), []), _args(item))
            except EffectError:  # an effect that does not fit this turn: what it shows is still read below
                pass
        for segments, value in observed.items():
            set_path(state, list(segments), value)
        return state


def _by_action(evidence: Iterable[Evidence]) -> dict[str, list[Evidence]]:
    by_action: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        by_action[item.action].append(item)
    return by_action


def induce_forms(evidence: Sequence[Evidence], config: InductionConfig = InductionConfig()) -> dict[str, list[Form]]:
    """Every action's observation forms, ranked, with their free slots keyed."""
    forms: dict[str, list[Form]] = {}
    for action, items in sorted(_by_action(evidence).items()):
        raw: dict[str, list[Evidence]] = defaultdict(list)
        for item in items:
            raw[observation_form(item)].append(item)
        forms[action] = cluster_forms(action, raw, config)
        by_turn = {item.turn_id: item for item in items}
        for form in forms[action]:
            _key_free_slots(form, [by_turn[t] for t in form.turns])
    return forms


class InducedRules(BaseModel):
    """Candidate rules and, per rule id, every turn whose observation formed its template (uncapped, unlike the
    provenance): what a cross-fitted fold keeps of a candidate induced over all trajectories (`sim.route_learning`)."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Rule]
    origins: dict[str, list[str]] = Field(default_factory=dict)


def induce_rules(evidence: Sequence[Evidence], config: InductionConfig = InductionConfig()) -> list[Rule]:
    """Rules with templates, conditions and replay-checked effects, for every action in the evidence.

    Statuses, support and provenance are provisional (supporting = the turns a form fits);
    `replay.review_rules` settles them by falsifying each rule against all evidence.
    """
    return induce_candidates(evidence, config).rules


def induce_candidates(evidence: Sequence[Evidence], config: InductionConfig = InductionConfig()) -> InducedRules:
    """`induce_rules` with each rule's origin turns."""
    forms = induce_forms(evidence, config)
    context = ReplayContext.of(evidence, forms)
    # Two passes: the second carries the effects the first confirmed into the state it checks later turns against
    # (a `put` can only be seen to take something out of an inventory that a `take` was seen to fill).
    first = EpisodeReplay(context).run(evidence)
    predicted = {FormTag(action, form.template): [r.effect for r in _form_effects(first.candidates.get(action, {}),
                                                                                   action, form, config)]
                 for action, action_forms in forms.items() for form in action_forms if form.outcome == "success"}
    second = EpisodeReplay(context, predicted).run(evidence)
    return _assemble(forms, second.votes, second.candidates, _by_action(evidence), config)


def _json_effects(form: Form, by_turn: Mapping[str, Evidence]) -> list[Effect]:
    """A JSON tool result's keys as `set` effects on `world.<key>`: the argument a value always equals, else the
    constant every result of the form shows (values that vary with hidden state are read back when observed)."""
    results = [(by_turn[t], parse_json_object(by_turn[t].observation)) for t in form.turns if t in by_turn]
    if not results or any(data is None for _, data in results):
        return []
    effects: list[Effect] = []
    keys = set.intersection(*(set(data) for _, data in results if data is not None))
    for key in sorted(keys):
        if key == "error":
            continue
        values = [data[key] for _, data in results if data is not None]
        names = set.intersection(*({n for n, v in _args(item).items() if v == data[key]}  # type: ignore[index]
                                   for item, data in results))
        if names:
            effects.append(Effect(op="set", path=join_path(["world", key]), value=f"{{arg.{sorted(names)[0]}}}"))
        elif all(v == values[0] for v in values) and not isinstance(values[0], (dict, list)):
            effects.append(Effect(op="set", path=join_path(["world", key]), value=literal_value(values[0])))
    return effects


_NONE = EffectCandidate(Effect(op="set", path="world.none"))  # a candidate a form never saw


def _accepted_effects(records: Mapping[EffectKey, EffectCandidate], config: InductionConfig) -> list[EffectCandidate]:
    chosen: dict[tuple[str, str | None], EffectCandidate] = {}  # one `set` per path, one list change per member
    for record in records.values():
        confirmed = len(record.confirmations)
        if confirmed < config.min_confirmations:
            continue
        if len(record.contradictions) > config.max_contradiction_share * confirmed:
            continue
        slot = (record.effect.path, None if record.effect.op == "set" else f"{record.effect.value}")
        if slot not in chosen or confirmed > len(chosen[slot].confirmations):
            chosen[slot] = record
    order = {"remove": 0, "delete": 0, "append": 1, "set": 2}
    return sorted(chosen.values(), key=lambda r: (order.get(r.effect.op, 3), r.effect.path, str(r.effect.value)))


def _form_effects(proposed: Mapping[CandidateKey, EffectCandidate], action: str, form: Form,
                  config: InductionConfig) -> list[EffectCandidate]:
    """A form's effects: its own confirmed candidates (what followed the turns it answered: a failure's "You can't
    see any such thing." adds nothing to the inventory, though its action is `take`), and the action's confirmed
    ones pooled over its forms where no turn of this form contradicted them."""
    pooled: dict[EffectKey, EffectCandidate] = {}
    for key, record in proposed.items():
        merged = pooled.setdefault(key.effect, EffectCandidate(record.effect))
        merged.confirmations += record.confirmations
        merged.contradictions += record.contradictions
    tag = FormTag(action, form.template)
    own = {key.effect: record for key, record in proposed.items() if key.form == tag}
    return _accepted_effects({**{k: v for k, v in pooled.items() if not own.get(k, _NONE).contradictions}, **own},
                             config)


def _read_votes(tally: Counter[Vote], values_by_path: Mapping[str, set[Any]],
                config: InductionConfig) -> tuple[list[Condition], list[Effect]]:
    """A form's conditions and `set` effects from its votes: a membership that always held is required, a property
    that held before the turn (or, never seen before, tells the action's forms apart) is a condition, and one that
    changed with the turn is an effect."""
    conditions: list[Condition] = []
    effects: list[Effect] = []
    per_path: dict[tuple[str, Any], Counter[str]] = defaultdict(Counter)
    for (path, value, verdict), count in tally.items():
        per_path[(path, value)][verdict] += count
    for (path, value), verdicts in sorted(per_path.items(), key=lambda pair: (pair[0][0], str(pair[0][1]))):
        if verdicts["contains"] or verdicts["lacks"]:  # a membership test: a requirement when it always held
            if verdicts["contains"] >= config.min_confirmations and not verdicts["lacks"]:
                conditions.append(Condition(path=path, op="contains", value=value))
        elif verdicts["same"] and not verdicts["changed"]:
            conditions.append(Condition(path=path, op="eq", value=value))
        elif not verdicts["changed"] and len(values_by_path[path]) > 1:
            conditions.append(Condition(path=path, op="eq", value=value))  # never seen before: it selects
        elif value is not None:
            effects.append(Effect(op="set", path=path, value=value))
    return conditions, effects


def _assemble(forms: Mapping[str, list[Form]], votes: Mapping[FormKey, Counter[Vote]],
              candidates: Mapping[str, Mapping[CandidateKey, EffectCandidate]], by_action: Mapping[str, list[Evidence]],
              config: InductionConfig) -> InducedRules:
    rules: list[Rule] = []
    origins: dict[str, list[str]] = {}
    by_turn = {item.turn_id: item for items in by_action.values() for item in items}
    slugs = unique_slugs(forms)
    for action, action_forms in sorted(forms.items()):
        proposed = candidates.get(action, {})
        tallies = [votes.get(FormKey(action, rank), Counter()) for rank in range(1, len(action_forms) + 1)]
        # Values each property path takes across this action's forms: a path that tells forms apart selects them.
        values_by_path: dict[str, set[Any]] = defaultdict(set)
        for tally in tallies:
            for path, value, verdict in tally:
                if verdict in ("same", "changed", "unknown"):
                    values_by_path[path].add(value)
        for rank, (form, tally) in enumerate(zip(action_forms, tallies, strict=True), start=1):
            accepted = _form_effects(proposed, action, form, config)
            conditions, effects = _read_votes(tally, values_by_path, config)
            if form.outcome == "success":
                taken = {(e.op, e.path) for e in effects}
                effects = [r.effect for r in accepted if (r.effect.op, r.effect.path) not in taken] + effects
                effects += _json_effects(form, by_turn)
            share = len(form.turns) / max(1, len(by_action[action]))
            effect_note = "".join(
                f"; effect {r.effect.op} {r.effect.path} {r.effect.value!s} confirmed by {len(r.confirmations)} "
                f"later observation(s), contradicted by {len(r.contradictions)}" for r in accepted
            ) if form.outcome == "success" else ""
            origins[f"{slugs[action]}.r{rank}"] = list(form.turns)
            rules.append(Rule(
                id=f"{slugs[action]}.r{rank}", action=action, conditions=conditions, effects=effects,
                outcome=form.outcome if form.outcome.startswith("failure") or form.outcome == "success" else "success",
                template=form.template, status=RuleStatus.TENTATIVE, support=len(form.turns),
                confidence=round(share, 4),
                provenance=RuleProvenance.capped(form.turns, cap=config.max_provenance),
                description=f"{len(form.turns)} of {len(by_action[action])} '{action}' turns ({share:.0%}) fit this "
                            f"observation form{effect_note}",
            ))
    return InducedRules(rules=rules, origins=origins)
