"""Replay rules over recorded trajectories: rule selection, state tracking, review and validation.

`replay_evidence` walks each trajectory with its observed prefix: before a turn it asks the rules
what the observation will be (the most specific executable rule whose conditions hold; when a more
specific rule's conditions are unknown, the best-supported rule not ruled out is taken and marked
*assumed*), then reads the
real observation back into state (the rule whose template fits it, its effects, what it shows).
The same walk serves three purposes:

- `review_rules` falsifies every rule against all evidence (a counterexample — the rule was chosen
  and the observation does not fit its template — demotes it to conflicted; too little support
  leaves it tentative);
- `validate` reports per-action coverage (a supported rule applied) and exact match of the rendered
  observation on held-out trajectories;
- `check_rule` shows, for one rule, where it matches and where it fails (the Worldbook page).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from worldsmith.worldbook.engine import (
    EffectError,
    apply_effects,
    check_conditions,
    copy_state,
    literal_value,
    match_template,
    render,
    resolve_path,
    set_path,
    template_slots,
)
from worldsmith.worldbook.facts import extract_facts
from worldsmith.worldbook.model import (
    Condition,
    Evidence,
    ListFormat,
    Rule,
    RuleProvenance,
    RuleStatus,
    Worldbook,
    join_path,
)

__all__ = [
    "MatchMemo",
    "ReplayCache",
    "ReplayReport",
    "ReviewConfig",
    "RuleReplay",
    "Selection",
    "TurnCheck",
    "TurnResult",
    "check_rule",
    "list_formats",
    "observe_turn",
    "replay_evidence",
    "review_rules",
    "select_rule",
]


@dataclass(frozen=True)
class Selection:
    """Which rule answers an action here (None when none applies).

    `assumed`: a more specific rule's conditions could not be checked (the state they test is still
    unknown), so the best-supported rule not ruled out was taken, its unknown conditions assumed.
    """

    rule: Rule | None
    route: Literal["rule", "assumed", "no_rule"]
    conflicts: tuple[str, ...] = ()


def _order(rule: Rule) -> tuple[int, int, int, str]:
    return (-rule.priority, -len(rule.conditions), -rule.support, rule.id)


def select_rule(rules: Sequence[Rule], arguments: Mapping[str, Any], state: Mapping[str, Any]) -> Selection:
    """The most specific rule whose conditions hold, unless a more specific one is undecidable here.

    Two rules of equal rank whose conditions both hold and whose templates differ are a recorded
    conflict: the first by support is used and the others are named in `conflicts`.
    """
    return _select(sorted(rules, key=_order), arguments, state)


def _select(ranked: Sequence[Rule], arguments: Mapping[str, Any], state: Mapping[str, Any]) -> Selection:
    """`select_rule` on rules already in `_order` (a replay sorts each action's rules once, not every turn)."""
    # a rule without conditions always holds (`check_conditions([])` is True): most rules have none
    verdicts = [(rule, check_conditions(rule.conditions, arguments, state) if rule.conditions else True)
                for rule in ranked]
    for index, (rule, verdict) in enumerate(verdicts):
        if verdict is None:
            open_rules = [other for other, v in verdicts if v is not False]
            best = max(open_rules, key=lambda other: (other.support, other.priority, other.id))
            return Selection(best, "assumed")
        if verdict:
            rank = _order(rule)[:2]
            rivals = tuple(other.id for other, v in verdicts[index + 1:]
                           if v and _order(other)[:2] == rank and other.template != rule.template)
            return Selection(rule, "rule", rivals)
    return Selection(None, "no_rule")


def list_formats(book: Worldbook) -> dict[str, ListFormat]:
    """List formats by path prefix (`world.contents`, as `join_path` writes it), from the state schema; "*" is
    the default."""
    formats: dict[str, ListFormat] = {}
    for path in book.state_schema.paths:
        segments = resolve_path(path.path.split(".{", 1)[0].split("[arg.", 1)[0], {})
        if path.list_format is not None and segments:
            formats.setdefault(join_path(segments), path.list_format)
            formats.setdefault("*", path.list_format)
    return formats


def _arguments(item: Evidence) -> dict[str, Any]:
    return item.arguments if isinstance(item.arguments, dict) else {}


class MatchMemo:
    """What each template reads from each turn (`match_template`), and the facts each turn shows (`extract_facts`),
    worked out once per pair and per turn.

    A review replays the same evidence several rounds against rules whose templates stay put (narrowing adds
    conditions, settling changes statuses), and a replay matches a turn against the chosen rule and again while
    reading it back: with a memo each (turn, template) is matched once. Turns are held by identity, so a memo serves
    the evidence objects it saw (and any subset of them: cross-fit folds share one). Matched values are shared
    (strings and lists, which state takes whole and never edits); facts come back copied where they are dicts or lists (a JSON result's object is edited in place once in state).
    """

    def __init__(self) -> None:
        self._by_turn: dict[int, tuple[Evidence, dict[str, dict[tuple[str, ...], Any] | None]]] = {}
        self._facts: dict[int, tuple[Evidence, list[tuple[list[str], Any]]]] = {}

    def facts(self, item: Evidence) -> list[tuple[list[str], Any]]:
        entry = self._facts.get(id(item))
        if entry is None or entry[0] is not item:
            shown = [(fact.path, fact.value) for fact in extract_facts(item.action, _arguments(item), item.observation)]
            entry = self._facts[id(item)] = (item, shown)
        return [(path, copy_state(value) if isinstance(value, (dict, list)) else value) for path, value in entry[1]]

    def match(self, template: str, item: Evidence) -> dict[tuple[str, ...], Any] | None:
        entry = self._by_turn.get(id(item))
        if entry is None or entry[0] is not item:
            entry = self._by_turn[id(item)] = (item, {})
        found = entry[1]
        if template not in found:
            found[template] = match_template(template, item.observation, _arguments(item))
        return found[template]


def observe_turn(rules: Sequence[Rule], item: Evidence, state: Mapping[str, Any],
                 formats: Mapping[str, ListFormat] | None = None, *,
                 memo: MatchMemo | None = None) -> tuple[dict[str, Any], Rule | None]:
    """The state after an observed turn, and the rule whose template the observation fits.

    The fitting rule's effects apply first; what the observation shows then overwrites them, so an
    observed output always wins over a rule.
    """
    return _observe(sorted(rules, key=_observe_order), item, state, formats, memo)


def _observe_order(rule: Rule) -> tuple[bool, int, int, int, str]:
    return (not rule.executable, *_order(rule))


def _observe(rules: Sequence[Rule], item: Evidence, state: Mapping[str, Any],
             formats: Mapping[str, ListFormat] | None, memo: MatchMemo | None) -> tuple[dict[str, Any], Rule | None]:
    """`observe_turn` on rules already in `_observe_order` (a replay sorts each action's rules once)."""
    arguments = _arguments(item)
    fitting: Rule | None = None
    shown: dict[tuple[str, ...], Any] = {}
    for rule in rules:
        values = (memo.match(rule.template, item) if memo is not None
                  else match_template(rule.template, item.observation, arguments))
        if values is not None:
            fitting, shown = rule, values
            break
    new = dict(state)
    if fitting is not None and fitting.outcome == "success":
        try:
            new = apply_effects(state, fitting.effects, arguments, formats)
        except EffectError:
            new = dict(state)
    facts = (memo.facts(item) if memo is not None
             else [(fact.path, fact.value) for fact in extract_facts(item.action, arguments, item.observation)])
    for path, value in facts:
        set_path(new, path, value)
    for segments, value in shown.items():
        set_path(new, list(segments), value)
    if fitting is not None:  # what the fitting form states about properties holds now
        for condition in fitting.conditions:
            if condition.path and condition.op == "eq":
                stated = resolve_path(condition.path, arguments)
                if stated is not None:
                    set_path(new, stated, condition.value)
    return new, fitting


@dataclass
class TurnResult:
    turn_id: str
    action: str
    route: str  # "rule" (conditions checked), "assumed" (some unknown), "no_rule"
    rule: str | None
    rendered: str | None
    observed: str
    exact: bool
    fits: bool  # the observation fits the chosen rule's template
    explained_by: str | None  # the supported rule whose template the observation fits, if any
    conflicts: list[str] = field(default_factory=list)


@dataclass
class ReplayReport:
    turns: list[TurnResult]

    def per_action(self) -> dict[str, dict[str, Any]]:
        table: dict[str, dict[str, Any]] = defaultdict(lambda: {"turns": 0, "covered": 0, "verified": 0, "rendered": 0,
                                                                "exact": 0, "explained": 0})
        for turn in self.turns:
            row = table[turn.action]
            row["turns"] += 1
            row["covered"] += turn.rule is not None
            row["verified"] += turn.route == "rule"
            row["rendered"] += turn.rendered is not None
            row["exact"] += turn.exact
            row["explained"] += turn.explained_by is not None
        for row in table.values():
            for key in ("covered", "verified", "rendered", "exact", "explained"):
                row[f"{key}_rate"] = round(row[key] / row["turns"], 4) if row["turns"] else 0.0
        return dict(sorted(table.items(), key=lambda pair: -pair[1]["turns"]))

    def totals(self) -> dict[str, Any]:
        n = len(self.turns)
        def rate(count: int) -> float:
            return round(count / n, 4) if n else 0.0
        return {"turns": n, "coverage": rate(sum(t.rule is not None for t in self.turns)),
                "coverage_verified": rate(sum(t.route == "rule" for t in self.turns)),
                "rendered": rate(sum(t.rendered is not None for t in self.turns)),
                "exact_match": rate(sum(t.exact for t in self.turns)),
                "explained": rate(sum(t.explained_by is not None for t in self.turns)),
                "conflicts": sum(bool(t.conflicts) for t in self.turns)}

    def common_actions(self, share: float = 0.05) -> dict[str, Any]:
        """Coverage and exact match over the actions that make up at least `share` of the turns."""
        per_action = self.per_action()
        n = len(self.turns) or 1
        common = [a for a, row in per_action.items() if row["turns"] / n >= share]
        turns = sum(per_action[a]["turns"] for a in common) or 1
        return {"actions": common, "turns": turns,
                "coverage": round(sum(per_action[a]["covered"] for a in common) / turns, 4),
                "coverage_verified": round(sum(per_action[a]["verified"] for a in common) / turns, 4),
                "exact_match": round(sum(per_action[a]["exact"] for a in common) / turns, 4)}

    def to_json(self, *, with_turns: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"totals": self.totals(), "common_actions": self.common_actions(),
                               "per_action": self.per_action()}
        if with_turns:
            out["turns"] = [asdict(turn) for turn in self.turns]
        return out


def _group(evidence: Iterable[Evidence]) -> list[list[Evidence]]:
    from worldsmith.worldbook.induce import group_by_episode

    return list(group_by_episode(evidence).values())


def replay_evidence(rules: Sequence[Rule], evidence: Iterable[Evidence], *,
                    formats: Mapping[str, ListFormat] | None = None, executable_only: bool = True,
                    memo: MatchMemo | None = None, cache: ReplayCache | None = None) -> ReplayReport:
    """Predict every turn from its observed prefix with the rules, and compare with what was observed.

    `memo` carries the template matches over from an earlier replay of the same evidence (`review_rules`);
    `cache` the episodes' results of earlier replays, reused where they cannot differ (`ReplayCache`)."""
    memo = memo if memo is not None else MatchMemo()
    by_action: dict[str, list[Rule]] = defaultdict(list)
    for rule in rules:
        by_action[rule.action].append(rule)
    # each action's rules in the orders selection and read-back use, sorted once (sorting is stable: the same
    # order as sorting them every turn)
    choosing = {action: sorted((r for r in group if r.executable or not executable_only), key=_order)
                for action, group in by_action.items()}
    reading = {action: sorted(group, key=_observe_order) for action, group in by_action.items()}
    keys = cache.action_keys(choosing, reading, formats) if cache is not None else {}
    results: list[TurnResult] = []
    for episode in _group(evidence):
        if cache is None:
            results += _replay_episode(episode, choosing, reading, formats, executable_only, memo)
            continue
        found = cache.get(episode, keys, executable_only)
        if found is None:
            found = _replay_episode(episode, choosing, reading, formats, executable_only, memo)
            cache.put(episode, keys, executable_only, found)
        results += found
    return ReplayReport(results)


def _replay_episode(episode: Sequence[Evidence], choosing: Mapping[str, Sequence[Rule]],
                    reading: Mapping[str, Sequence[Rule]], formats: Mapping[str, ListFormat] | None,
                    executable_only: bool, memo: MatchMemo) -> list[TurnResult]:
    """One episode's turns replayed from an empty state (episodes never share state: each is replayed alone)."""
    results: list[TurnResult] = []
    state: dict[str, Any] = {}
    for item in episode:
        arguments = _arguments(item)
        selection = _select(choosing.get(item.action, []), arguments, state)
        rendered = None
        if selection.rule is not None:
            rendered = render(selection.rule.template, arguments, state, formats)
        fits = selection.rule is not None and memo.match(selection.rule.template, item) is not None
        state, fitting = _observe(reading.get(item.action, []), item, state, formats, memo)
        explained = fitting.id if fitting is not None and (fitting.executable or not executable_only) else None
        results.append(TurnResult(
            turn_id=item.turn_id, action=item.action, route=selection.route,
            rule=selection.rule.id if selection.rule else None, rendered=rendered, observed=item.observation,
            exact=rendered == item.observation, fits=fits, explained_by=explained,
            conflicts=list(selection.conflicts),
        ))
    return results


def _rule_key(rule: Rule) -> tuple[Any, ...]:
    """Everything of a rule one replay reads, but its support (which only orders rules: the orders are keyed)."""
    return (rule.id, rule.action, rule.template, rule.outcome, rule.priority, rule.executable,
            tuple(effect.model_dump_json() for effect in rule.effects),
            tuple(condition.model_dump_json() for condition in rule.conditions))


def _dense_ranks(keys: Sequence[Any]) -> tuple[int, ...]:
    """Each key's rank among the distinct keys: the order and the ties, without the keys."""
    distinct = {key: rank for rank, key in enumerate(sorted(set(keys)))}
    return tuple(distinct[key] for key in keys)


class ReplayCache:
    """Episodes' replay results kept for later replays of the same episodes, reused only where they cannot differ.

    An episode is replayed from an empty state, so its turns' results depend on nothing but its own turns, the
    list formats and, for each action it takes, that action's rules: their order for selection and for read-back,
    the ties among them that decide an assumed choice, and what of each rule a replay reads (`_rule_key`: all but
    the support, which only orders them). That is the key: a settling round that demoted one action's rule replays
    only the episodes that take the action, and a cross-fit fold whose rules for an episode's actions are the
    same as another fold's (the same candidates, in the same order) reuses that fold's results. `per_episode`
    bounds the results kept per episode (the most recently used). For one evidence list (episodes are known by
    their first turn id and length) and one `MatchMemo`'s values: a replay's results never depend on the memo, only
    its speed."""

    def __init__(self, per_episode: int = 4) -> None:
        self.per_episode = per_episode
        self.hits = 0
        self.misses = 0
        self._ids: dict[tuple[Any, ...], int] = {}  # an action's replay key, interned
        self._rules: dict[int, tuple[Rule, tuple[Any, ...]]] = {}  # rule object -> (it, its key)
        self._actions: dict[tuple[str, int], tuple[str, ...]] = {}  # an episode's actions
        self._results: dict[tuple[str, int], dict[tuple[Any, ...], list[TurnResult]]] = {}

    def _key(self, rule: Rule) -> tuple[Any, ...]:
        entry = self._rules.get(id(rule))
        if entry is None or entry[0] is not rule:
            entry = self._rules[id(rule)] = (rule, _rule_key(rule))
        return entry[1]

    def action_keys(self, choosing: Mapping[str, Sequence[Rule]], reading: Mapping[str, Sequence[Rule]],
                    formats: Mapping[str, ListFormat] | None) -> dict[str, int]:
        """Per action, an id that two replays share only when they replay the action's turns alike."""
        shown = tuple(sorted((path, fmt.model_dump_json()) for path, fmt in (formats or {}).items()))
        out = {}
        for action, rules in reading.items():
            chosen = choosing.get(action, [])
            key = (shown, tuple(self._key(r) for r in chosen), tuple(self._key(r) for r in rules),
                   _dense_ranks([(r.support, r.priority, r.id) for r in chosen]))
            out[action] = self._ids.setdefault(key, len(self._ids))
        return out

    def _entry(self, episode: Sequence[Evidence], keys: Mapping[str, int],
               executable_only: bool) -> tuple[tuple[str, int], tuple[Any, ...]]:
        name = (episode[0].turn_id, len(episode))
        actions = self._actions.get(name)
        if actions is None:
            actions = self._actions[name] = tuple(sorted({item.action for item in episode}))
        return name, (executable_only, *(keys.get(action, -1) for action in actions))

    def get(self, episode: Sequence[Evidence], keys: Mapping[str, int],
            executable_only: bool) -> list[TurnResult] | None:
        name, key = self._entry(episode, keys, executable_only)
        kept = self._results.get(name)
        found = kept.pop(key, None) if kept is not None else None
        if kept is None or found is None:
            self.misses += 1
            return None
        kept[key] = found  # most recently used last
        self.hits += 1
        return found

    def put(self, episode: Sequence[Evidence], keys: Mapping[str, int], executable_only: bool,
            results: list[TurnResult]) -> None:
        name, key = self._entry(episode, keys, executable_only)
        kept = self._results.setdefault(name, {})
        kept[key] = results
        while len(kept) > self.per_episode:
            del kept[next(iter(kept))]


@dataclass(frozen=True)
class ReviewConfig:
    min_support: int = 3  # turns a rule must fit to be supported
    min_share: float = 0.05  # of its action's turns
    max_counterexample_share: float = 0.0  # any counterexample demotes (0.0), or a tolerated share
    max_provenance: int = 50
    min_contrast: int = 2  # counterexamples sharing an argument value before a rule is narrowed instead


# Shapes of an argument value that often decide an answer's form, as (regex that holds, regex that does not):
# a file extension (`mv(destination='notes.txt')` renames, `mv(destination='archive')` moves into a folder), a path
# separator, a number, a leading dash (an option).
ARGUMENT_SHAPES: tuple[tuple[str, str], ...] = (
    (r"\.[A-Za-z0-9]{1,5}$", r"^(?!.*\.[A-Za-z0-9]{1,5}$)"),
    (r"/", r"^[^/]*$"),
    (r"^-?\d+(?:\.\d+)?$", r"^(?!-?\d+(?:\.\d+)?$)"),
    (r"^-", r"^(?!-)"),
)


def _shown(item: Evidence, segments: Sequence[str]) -> Any:
    """The value an observation shows at a state path (its facts), or None."""
    return next((fact.value for fact in extract_facts(item.action, _arguments(item), item.observation)
                 if list(fact.path) == list(segments)), None)


def _emptiness_condition(rule: Rule, counter: Sequence[str], supporting: Sequence[str],
                         by_turn: Mapping[str, Evidence]) -> Condition | None:
    """A list the rule's template shows that was empty on every counterexample and never on a supporting turn (or
    the reverse): "You are carrying: {world.inventory}." holds when the inventory is not empty."""
    for slot in template_slots(rule.template):
        if slot.path is None or slot.key_arg is not None:
            continue
        segments = slot.path.split(".")
        against = [_shown(by_turn[t], segments) for t in counter if t in by_turn]
        held = [_shown(by_turn[t], segments) for t in supporting if t in by_turn]
        if not against or not held or not all(isinstance(v, list) for v in (*against, *held)):
            continue
        condition = None
        if all(v == [] for v in against) and all(v for v in held):
            condition = Condition(path=slot.path, op="ne", value=[])
        elif all(v for v in against) and all(v == [] for v in held):
            condition = Condition(path=slot.path, op="eq", value=[])
        if condition is not None and condition not in rule.conditions:
            return condition
    return None


def _contrast_condition(rule: Rule, counter: Sequence[str], supporting: Sequence[str],
                        by_turn: Mapping[str, Evidence], min_contrast: int) -> Condition | None:
    """What sets the counterexamples apart from the supporting turns, as a condition that keeps the supporting
    turns: an argument value every counterexample shares and no supporting turn has ("cd .." vs "cd docs":
    `arg != value`), else an argument shape (`ARGUMENT_SHAPES`) every supporting turn has and no counterexample
    has (`arg matches`). None when there is no such contrast."""
    if len(counter) < min_contrast:
        return None
    counter_args = [_arguments(by_turn[t]) for t in counter if t in by_turn]
    support_args = [_arguments(by_turn[t]) for t in supporting if t in by_turn]
    names = sorted(set.intersection(*(set(a) for a in counter_args)) if counter_args else set())
    for name in names:
        values = {str(a[name]) for a in counter_args}
        if len(values) == 1 and support_args and all(str(a.get(name)) not in values for a in support_args):
            value = literal_value(counter_args[0][name])
            if Condition(arg=name, op="ne", value=value) not in rule.conditions:
                return Condition(arg=name, op="ne", value=value)
    emptiness = _emptiness_condition(rule, counter, supporting, by_turn)
    if emptiness is not None:
        return emptiness
    for name in names:
        if not support_args or any(name not in a for a in support_args):
            continue
        for holds, lacks in ARGUMENT_SHAPES:
            counter_has = {re.search(holds, str(a[name])) is not None for a in counter_args}
            support_has = {re.search(holds, str(a[name])) is not None for a in support_args}
            if len(counter_has) == 1 and support_has == {not next(iter(counter_has))}:
                condition = Condition(arg=name, op="matches", value=holds if True in support_has else lacks)
                if condition not in rule.conditions:
                    return condition
    return None


def _entity_key(rule: Rule, supporting: Sequence[Mapping[str, Any]],
                answers: Mapping[str, Mapping[str, set[str]]]) -> str | None:
    """The argument whose one value every supporting turn had, when no other value of it ever got this constant
    answer (the answer is that entity's record, not the action's); None when there is none."""
    text = render(rule.template, {}, {}) or ""
    for name in sorted(supporting[0]):
        values = {str(a.get(name)) for a in supporting}
        others = [seen for value, seen in answers.get(name, {}).items() if value not in values]
        if len(values) == 1 and others and not any(text in seen for seen in others):
            return name
    return None


def _key_constant_records(rules: Sequence[Rule], evidence: Sequence[Evidence],
                          by_turn: Mapping[str, Evidence]) -> list[Rule]:
    """A constant answer seen only for one value of an argument that varies (one user's profile, one reservation)
    is that entity's record, not the action's rule: it is keyed by `arg == value`, so it answers only that entity."""
    answers: dict[str, dict[str, dict[str, set[str]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(set)))
    for item in evidence:  # action -> argument -> value -> the observations it got
        for name, value in _arguments(item).items():
            answers[item.action][name][str(value)].add(item.observation)
    keyed: list[Rule] = []
    for rule in rules:
        supporting = [_arguments(by_turn[t]) for t in rule.provenance.supporting if t in by_turn]
        if template_slots(rule.template) or not supporting or rule.conditions or rule.status == RuleStatus.DEPRECATED:
            keyed.append(rule)
            continue
        key = _entity_key(rule, supporting, answers[rule.action])
        if key is None:
            keyed.append(rule)
            continue
        condition = Condition(arg=key, op="eq", value=literal_value(supporting[0][key]))
        keyed.append(rule.model_copy(update={
            "conditions": [condition],
            "description": (rule.description + f"; keyed: {key} == {supporting[0][key]!r} (a constant answer "
                            "seen for that entity only: its record, not the action's rule)").lstrip("; ")}))
    return keyed


def review_rules(rules: Sequence[Rule], evidence: Sequence[Evidence], config: ReviewConfig = ReviewConfig(),
                 *, formats: Mapping[str, ListFormat] | None = None, memo: MatchMemo | None = None,
                 cache: ReplayCache | None = None) -> list[Rule]:
    """Statuses, support, confidence, counterexamples and provenance from replaying all evidence.

    A rule is supported when enough turns fit its template and no turn where it was chosen
    contradicts it; chosen-but-not-fitting turns are counterexamples (conflicted); too little
    support stays tentative. Deprecated rules (a person's decision) stay deprecated. Before a rule
    is demoted, a contrast is looked for: when at least `min_contrast` counterexamples share an
    argument value no supporting turn has, the rule is narrowed by `arg != value` and reviewed again.
    A constant answer seen for one entity only is first keyed by that entity's argument.

    `memo`: template matches of these turns worked out before (a turn's match against a template does not depend on
    the other turns or the rules: cross-fit folds review subsets of one evidence list with one memo); `cache`:
    episodes' replay results of earlier reviews of that list (`ReplayCache`; one is made for this review when
    none is given: a settling round replays only the episodes whose actions' rules it changed).
    """
    by_turn = {item.turn_id: item for item in evidence}
    rules = _key_constant_records(rules, evidence, by_turn)
    memo = memo if memo is not None else MatchMemo()  # every round replays the same turns against the same templates
    cache = cache if cache is not None else ReplayCache()
    for _ in range(3):  # a few rounds of narrowing at most
        reviewed = _review_once(rules, evidence, config, formats, memo, cache)
        narrowed = False
        for index, rule in enumerate(reviewed):
            if rule.status != RuleStatus.CONFLICTED:
                continue
            condition = _contrast_condition(rule, rule.counterexamples, rule.provenance.supporting, by_turn,
                                            config.min_contrast)
            if condition is not None:
                rules[index] = rules[index].model_copy(update={
                    "conditions": [*rules[index].conditions, condition],
                    "description": (rules[index].description + f"; narrowed: {condition.arg} {condition.op} "
                                    f"{condition.value!r} (it sets the counterexamples apart from the supporting "
                                    "turns)").lstrip("; ")})
                narrowed = True
        if not narrowed:
            return _settle(reviewed, evidence, config, formats, memo, cache)
    return _settle(_review_once(rules, evidence, config, formats, memo, cache), evidence, config, formats, memo,
                   cache)


def _settle(reviewed: list[Rule], evidence: Sequence[Evidence], config: ReviewConfig,
            formats: Mapping[str, ListFormat] | None, memo: MatchMemo, cache: ReplayCache) -> list[Rule]:
    """Replay the supported rules alone: one that a stronger rule shadowed in review (never chosen, so never
    contradicted) is chosen once that rule is demoted, and must hold there too (two constant forms of one
    action, neither conditioned: the weaker would otherwise answer every turn unchecked). Repeated until no rule is
    demoted: each round can expose the next of several constant forms (one entity's record each), and a round cap
    would leave the next one supported unchecked. Each round demotes a rule, so it ends."""
    for _ in range(len(reviewed) + 1):
        report = replay_evidence(reviewed, evidence, formats=formats, memo=memo, cache=cache)
        chosen: Counter[str] = Counter()
        against: dict[str, list[str]] = defaultdict(list)
        for turn in report.turns:
            if turn.rule and turn.route == "rule":
                chosen[turn.rule] += 1
                if not turn.fits:
                    against[turn.rule].append(turn.turn_id)
        demoted = False
        for index, rule in enumerate(reviewed):
            counter = against.get(rule.id, [])
            if rule.status == RuleStatus.SUPPORTED and counter and \
                    len(counter) > config.max_counterexample_share * max(1, chosen[rule.id]):
                reviewed[index] = rule.model_copy(update={
                    "status": RuleStatus.CONFLICTED, "counterexamples": counter[: config.max_provenance],
                    "confidence": round(rule.support / (rule.support + len(counter)), 4),
                    "provenance": RuleProvenance.capped(rule.provenance.supporting, counter,
                                                        cap=config.max_provenance).model_copy(
                        update={"supporting_total": rule.provenance.supporting_total})})
                demoted = True
        if not demoted:
            break
    return reviewed


def _review_once(rules: Sequence[Rule], evidence: Sequence[Evidence], config: ReviewConfig,
                 formats: Mapping[str, ListFormat] | None, memo: MatchMemo, cache: ReplayCache) -> list[Rule]:
    trial = [r.model_copy(update={"status": RuleStatus.SUPPORTED}) if r.status != RuleStatus.DEPRECATED else r
             for r in rules]
    report = replay_evidence(trial, evidence, formats=formats, memo=memo, cache=cache)
    per_action_turns: dict[str, int] = defaultdict(int)
    fitting: dict[str, list[str]] = defaultdict(list)
    chosen: dict[str, int] = defaultdict(int)
    against: dict[str, list[str]] = defaultdict(list)
    for turn in report.turns:
        per_action_turns[turn.action] += 1
        if turn.explained_by:
            fitting[turn.explained_by].append(turn.turn_id)
        if turn.rule and turn.route == "rule":  # an assumed choice is a guess, not a claim of the rule
            chosen[turn.rule] += 1
            if not turn.fits:
                against[turn.rule].append(turn.turn_id)
    reviewed: list[Rule] = []
    for rule in rules:
        support = len(fitting[rule.id])
        counter = against[rule.id]
        share = support / per_action_turns[rule.action] if per_action_turns[rule.action] else 0.0
        if rule.status == RuleStatus.DEPRECATED:
            status = RuleStatus.DEPRECATED
        elif counter and len(counter) > config.max_counterexample_share * max(1, chosen[rule.id]):
            status = RuleStatus.CONFLICTED
        elif support >= config.min_support and share >= config.min_share:
            status = RuleStatus.SUPPORTED
        else:
            status = RuleStatus.TENTATIVE
        decided = support + len(counter)
        reviewed.append(rule.model_copy(update={
            "status": status, "support": support,
            "confidence": round(support / decided, 4) if decided else 0.0,
            "counterexamples": counter[: config.max_provenance],
            "provenance": RuleProvenance.capped(fitting[rule.id], counter, cap=config.max_provenance),
        }))
    return reviewed


@dataclass
class TurnCheck:
    turn_id: str
    applicable: bool  # the rule was chosen for this turn with its conditions checked
    ok: bool | None  # the observation fits the rule (None when the rule was not chosen)
    expected: str
    rendered: str | None
    reason: str
    assumed: bool = False  # chosen although a more specific rule's conditions were unknown here


@dataclass
class RuleReplay:
    rule_id: str
    turns: list[TurnCheck]

    @property
    def applicable(self) -> int:
        return sum(t.applicable for t in self.turns)

    @property
    def matched(self) -> int:
        return sum(t.ok is True for t in self.turns)

    @property
    def failed(self) -> int:
        """Turns where the rule was chosen with checked conditions and the observation does not fit: counterexamples."""
        return sum(t.ok is False and t.applicable for t in self.turns)

    @property
    def assumed_misses(self) -> int:
        """Turns where the rule was only a guess (conditions unknown) and the observation took another form."""
        return sum(t.ok is False and t.assumed for t in self.turns)


def check_rule(book: Worldbook, rule: Rule, *, limit: int | None = None) -> RuleReplay:
    """Replay one rule (whatever its status) over the book's evidence for its action: where it is chosen,
    where its template fits the observation, and what it would have rendered."""
    others = [r for r in book.rules if r.id != rule.id]
    trial = [*others, rule.model_copy(update={"status": RuleStatus.SUPPORTED})]
    relevant = {item.turn_id.rsplit("#", 1)[0] for item in book.evidence if item.action == rule.action}
    evidence = [item for item in book.evidence if item.turn_id.rsplit("#", 1)[0] in relevant]
    report = replay_evidence(trial, evidence, formats=list_formats(book))
    checks: list[TurnCheck] = []
    for turn in report.turns:
        if turn.action != rule.action:
            continue
        applicable = turn.rule == rule.id and turn.route == "rule"
        assumed = turn.rule == rule.id and turn.route == "assumed"
        fits = turn.explained_by == rule.id or ((applicable or assumed) and turn.fits)
        if assumed:
            reason = ("assumed and fits" if fits else "assumed (a more specific rule's conditions were unknown "
                      "here); the observation took another form: not held against the rule")
        elif applicable:
            reason = ("rendered exactly" if turn.exact else "template fits; state differs" if turn.fits
                      else "chosen, but the observation does not fit the template")
        else:
            reason = f"not chosen ({turn.route}{': ' + turn.rule if turn.rule else ''})"
        chosen = applicable or assumed
        checks.append(TurnCheck(turn_id=turn.turn_id, applicable=applicable, ok=fits if chosen else None,
                                expected=turn.observed, rendered=turn.rendered if chosen else None, reason=reason,
                                assumed=assumed))
        if limit is not None and len(checks) >= limit:
            break
    return RuleReplay(rule_id=rule.id, turns=checks)
