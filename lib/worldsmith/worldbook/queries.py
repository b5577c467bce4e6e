"""Query rules: a tool whose answer is the id (or list) of the records whose attributes match its arguments.

`find_user_id_by_email(email)` answers `sara_doe_496`: the user record whose `email` equals the argument.
`learn_queries` finds, per tool, the answer's form (a bare id, a JSON string, a field of a small object, a list
of ids or records), the kind of record the answered ids belong to in the entity store
(`worldbook.record_store.RecordStore`), and for each argument the attribute path it is compared with (`first_name`
-> `name.first_name`, `zip` -> `address.zip`) and how (`exact`; `ci`, case-insensitive, only where some answer needed it; `contains`). The rule
is then replayed over every call of the tool: it is supported when it reproduces at least `MIN_SUPPORT`
answers for different arguments and contradicts at most `MAX_CONTRADICTION` of those it could check (an attribute
that matched once by chance makes no supported rule). A list's order is the one the evidence shows (first seen,
or by id). Calls whose answer was empty or an error where the rule matches nothing give the *empty* response
(`[]`, "No results", "Error: user not found"), argument values slotted where the text shows them (`empty`).

One pass over the evidence per tool and one index per rule: linear in the evidence.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from worldsmith.worldbook.lookup import at_path, leaves, selects_entities
from worldsmith.worldbook.lookup_specs import Form, Match, Mode, QueryRule
from worldsmith.worldbook.model import Evidence, RuleStatus, spread_turns
from worldsmith.worldbook.record_store import EpisodeRecords, Layout, RecordStore, dump_layout, parse_structured
from worldsmith.worldbook.record_store import structured_layout as layout_of
from worldsmith.worldbook.templates import slot_pieces

__all__ = [
    "MAX_CONTRADICTION",
    "MIN_SUPPORT",
    "Match",
    "QueryIndex",
    "QueryRule",
    "answer_forms",
    "fill_slots",
    "learn_queries",
    "matches",
    "render_answer",
    "run_query",
    "slot_arguments",
]

MIN_SUPPORT = 2
MAX_CONTRADICTION = 0.1
SHARE = 0.8  # an argument is compared with a path in this share of the answers at least
_MODES: tuple[Mode, ...] = ("exact", "ci", "contains")
_LISTS = frozenset({"field_list", "list", "records"})


# ------------------------------------------------------------------------------------------- answers
def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def answer_forms(observation: str) -> list[tuple[Form, str | None, list[Any]]]:
    """Every way the result can be read as ids: (form, field, ids). `[]` reads as a list with no ids."""
    value = parse_structured(observation)
    text = observation.strip()
    if value is None:
        return [("bare", None, [text])] if text and len(text) <= 80 and not any(c.isspace() for c in text) else []
    if isinstance(value, str):
        return [("json", None, [value])]
    if isinstance(value, list):
        if all(_scalar(item) for item in value):
            return [("list", None, value)]
        if all(isinstance(item, dict) for item in value):
            return [("records", None, value)]
        return []
    if isinstance(value, dict) and len(value) <= 3:
        out: list[tuple[Form, str | None, list[Any]]] = []
        for key, item in value.items():
            if _scalar(item):
                out.append(("field", key, [item]))
            elif isinstance(item, list) and all(_scalar(x) for x in item):
                out.append(("field_list", key, item))
        return out
    return []


def _mode(leaf: Any, argument: Any) -> Mode | None:
    """The strictest way `argument` matches `leaf` (a list leaf: one of its items), or None."""
    if isinstance(leaf, list):
        return "exact" if any(str(item) == str(argument) for item in leaf) else None
    if isinstance(leaf, bool) or isinstance(argument, bool) or leaf is None:
        return None
    left, right = str(leaf), str(argument)
    if left == right:
        return "exact"
    if left.lower() == right.lower():
        return "ci"
    if len(right) >= 3 and isinstance(leaf, str) and right.lower() in left.lower():
        return "contains"
    return None


def matches(leaf: Any, argument: Any, mode: Mode) -> bool:
    found = _mode(leaf, argument)
    return found is not None and _MODES.index(found) <= _MODES.index(mode)


def slot_arguments(text: str, arguments: Mapping[str, Any]) -> str:
    """`text` with each argument's value (two characters or more, longest first) as `{arg.name}` where it stands
    between token boundaries (`templates.slot_pieces`: `no` is never slotted inside "not"); a value two arguments
    hold is the one whose name says it names a record (`user_id` over `status`)."""
    pairs = sorted(((str(v), k) for k, v in arguments.items() if _scalar(v) and len(str(v)) >= 2),
                   key=lambda pair: (-len(pair[0]), not selects_entities(pair[1])))  # equal values: the id's name
    pieces = slot_pieces(text, [(name, value) for value, name in pairs])
    return "".join(piece if slot is None else "{arg." + slot + "}" for slot, piece in pieces)


def fill_slots(template: str, arguments: Mapping[str, Any]) -> str | None:
    """A slotted text with the arguments' values back in; None when it names an argument the call lacks."""
    out = template
    for name, value in arguments.items():
        out = out.replace("{arg." + name + "}", str(value))
    return None if "{arg." in out else out


# ------------------------------------------------------------------------------------------- lookup
class QueryIndex:
    """The records of a kind by their value at each exact / ci path of the rule (a dict look-up, not a scan)."""

    def __init__(self, rule: QueryRule, store: RecordStore) -> None:
        self.rule = rule
        self.indexed = [m for m in rule.matches if m.mode != "contains"]
        self.by_value: list[dict[str, list[str]]] = [defaultdict(list) for _ in self.indexed]
        self.order = {ident: at for at, ident in enumerate(store.of_kind(rule.kind))}
        for ident, record in store.of_kind(rule.kind).items():
            for match, index in zip(self.indexed, self.by_value, strict=True):
                for value in _values(at_path(record, match.path)):
                    index[_key(value, match.mode)].append(ident)

    def candidates(self, view: EpisodeRecords, arguments: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        at = next((i for i, m in enumerate(self.indexed) if m.argument in arguments), None)
        if at is None:
            return view.all(self.rule.kind)
        idents = self.by_value[at].get(_key(arguments[self.indexed[at].argument], self.indexed[at].mode), [])
        seen = view.seen.get(self.rule.kind, {})
        out = [(i, view.get(self.rule.kind, i)) for i in idents if i not in seen]
        out += [(i, r) for i, r in seen.items()]  # the episode's versions, which may match differently now
        out.sort(key=lambda pair: self.order.get(pair[0], len(self.order)))
        return [(i, r) for i, r in out if r is not None]


def _values(leaf: Any) -> list[Any]:
    return leaf if isinstance(leaf, list) else [leaf]


def _key(value: Any, mode: Mode) -> str:
    return str(value).lower() if mode == "ci" else str(value)


def run_query(rule: QueryRule, view: EpisodeRecords, arguments: Mapping[str, Any],
              index: QueryIndex | None = None) -> list[tuple[str, dict[str, Any]]] | None:
    """The (id, record) pairs the rule finds, in its order; an argument the call leaves out filters nothing (an
    optional filter); None when the call gives none of the compared arguments, or one that is not a value."""
    given = [m for m in rule.matches if m.argument in arguments]
    if not given or any(not _scalar(arguments[m.argument]) for m in given):
        return None
    index = index or QueryIndex(rule, view.store)
    found = [(ident, record) for ident, record in index.candidates(view, arguments)
             if all(matches(at_path(record, m.path), arguments[m.argument], m.mode) for m in given)]
    if rule.order == "id":
        found.sort(key=lambda pair: _sort_key(pair[0]))
    return found


def _sort_key(ident: str) -> tuple[int, Any]:
    return (0, int(ident)) if ident.lstrip("-").isdigit() else (1, ident)


def render_answer(rule: QueryRule, found: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """The tool's answer for these records, in its own form and layout; None when the form needs one id and there
    are none, or the layout is unknown."""
    ids = [_typed_id(rule.kind, ident, record) for ident, record in found]
    if rule.form in ("bare", "json", "field") and not ids:
        return None
    if rule.form == "bare":
        return str(ids[0])
    layout: Layout = rule.layout or (", ", ": ", True)
    if rule.form == "json":
        return dump_layout(ids[0], layout)
    if rule.form == "list":
        return dump_layout(ids, layout)
    if rule.form == "records":
        keys = rule.fields
        if keys is not None and any(key not in record for _, record in found for key in keys):
            return None
        return dump_layout([{k: record[k] for k in keys} if keys is not None else record for _, record in found],
                           layout)
    wrapper = dict(rule.wrapper or {})
    wrapper[rule.key or ""] = ids[0] if rule.form == "field" else ids
    return dump_layout(wrapper, layout)


def _typed_id(kind: str, ident: str, record: Mapping[str, Any]) -> Any:
    value = record.get(kind)
    return value if value is not None and str(value) == ident else ident


# ------------------------------------------------------------------------------------------- learning
def _scalars(item: Evidence) -> dict[str, Any]:
    arguments = item.arguments if isinstance(item.arguments, dict) else {}
    return {k: v for k, v in arguments.items() if _scalar(v)}


_Shape = tuple[Form, str | None, str]  # (form, field, record kind)


def _vote(item: Evidence, store: RecordStore, shapes: Counter[_Shape], present: Counter[tuple[_Shape, str]],
          paths: dict[tuple[_Shape, str], Counter[tuple[tuple[str, ...], Mode]]]) -> None:
    """Count, for one answer, each (form, kind) it can be read as and each path its arguments match in every
    answered record."""
    arguments = _scalars(item)
    for form, key, ids in answer_forms(item.observation):
        if form == "records":
            ids = [next((v for k, v in r.items() if k == "id" or k.endswith("_id")), None) for r in ids]
        if not ids or any(i is None for i in ids):
            continue
        kinds = set(store.kinds_of(ids[0]))
        for ident in ids[1:]:
            kinds &= set(store.kinds_of(ident))
        for kind in kinds:
            shape = (form, key, kind)
            shapes[shape] += 1
            records = [store.entity(kind, ident) for ident in ids]
            for name, value in arguments.items():
                present[(shape, name)] += 1
                common: dict[tuple[str, ...], Mode] | None = None
                for record in records:
                    here: dict[tuple[str, ...], Mode] = {}
                    for path, leaf in leaves(record):
                        mode = _mode(leaf, value)
                        if mode is not None and path:
                            here[path] = mode
                    common = here if common is None else {
                        p: max(m, here[p], key=_MODES.index) for p, m in common.items() if p in here}
                for path, mode in (common or {}).items():
                    paths[(shape, name)][(path, mode)] += 1


def _candidate(action: str, shape: _Shape, present: Counter[tuple[_Shape, str]], arguments: set[str],
               paths: Mapping[tuple[_Shape, str], Counter[tuple[tuple[str, ...], Mode]]]) -> QueryRule | None:
    """Each argument compared with the path it matched in `SHARE` of the answers of calls that gave it."""
    chosen: list[Match] = []
    for name in sorted(arguments):
        by_path: Counter[tuple[str, ...]] = Counter()
        strictest: dict[tuple[str, ...], Mode] = {}
        for (path, mode), n in paths.get((shape, name), Counter()).items():
            by_path[path] += n
            strictest[path] = max(strictest.get(path, "exact"), mode, key=_MODES.index)
        if not by_path:
            continue
        path, n = min(by_path.items(), key=lambda pair: (-pair[1], _MODES.index(strictest[pair[0]]), len(pair[0])))
        if n >= MIN_SUPPORT and n >= SHARE * present[(shape, name)]:
            chosen.append(Match(argument=name, path=list(path), mode=strictest[path]))
    form, key, kind = shape
    if not chosen or all(m.path in ([kind], ["id"]) for m in chosen):
        return None  # nothing compared, or only the record's own id: a selection, not a query
    return QueryRule(action=action, kind=kind, matches=chosen, form=form, key=key)


def _actual(rule: QueryRule, observation: str) -> list[str] | None:
    """The ids the observation answers in the rule's form (possibly none), or None when it is not that form."""
    for form, key, ids in answer_forms(observation):
        if form == rule.form and key == rule.key:
            if form == "records":
                return [str(r.get(rule.kind)) for r in ids]
            return [str(i) for i in ids]
    return None


_Found = list[tuple[str, dict[str, Any]]]


def _count_layout(rule: QueryRule, observation: str, layouts: Counter[Layout], fields: Counter[tuple[str, ...]],
                  wrappers: Counter[str]) -> None:
    """Count how an answer is written: its JSON layout, a record list's keys, a small object's other fields."""
    layout = layout_of(observation)
    if layout is not None:
        layouts[layout] += 1
    if rule.form == "records":
        fields.update(tuple(record) for record in parse_structured(observation))
    if rule.form in ("field", "field_list"):
        value = parse_structured(observation)
        wrappers[repr(sorted((k, repr(v)) for k, v in value.items() if k != rule.key))] += 1


def _review(rule: QueryRule, calls: Sequence[tuple[Evidence, _Found | None]], store: RecordStore) -> QueryRule:
    """Score what the rule found on every call of its tool (with the episode's records at the time): support,
    contradictions (answers whose records the store knows, found otherwise), list order and the empty response."""
    known = store.of_kind(rule.kind)
    layouts: Counter[Layout] = Counter()
    wrappers: Counter[str] = Counter()
    orders: Counter[str] = Counter()
    empties: Counter[str] = Counter()
    ids_right: list[tuple[Evidence, list[tuple[str, dict[str, Any]]]]] = []
    contradicting: list[str] = []
    fields: Counter[tuple[str, ...]] = Counter()
    empty_wrong = 0
    argument_sets: set[str] = set()
    for item, found in calls:
        if found is None:
            continue
        arguments = _scalars(item)
        predicted = [ident for ident, _ in found]
        actual = _actual(rule, item.observation)
        if actual:
            _count_layout(rule, item.observation, layouts, fields, wrappers)
            single = rule.form in ("bare", "json", "field")
            by_id = sorted(predicted, key=_sort_key)
            if (predicted[:1] if single else predicted) == actual:
                orders["insertion"] += 1
            if (by_id[:1] if single else by_id) == actual:
                orders["id"] += 1
            if set(actual) == set(predicted) or (single and predicted and actual[0] in predicted):
                ids_right.append((item, found))
            elif all(ident in known for ident in actual):  # an answer naming records never shown judges nothing
                contradicting.append(item.turn_id)
        elif not predicted:
            empties[slot_arguments(item.observation.strip(), arguments)] += 1
        else:
            empty_wrong += 1
    order = "id" if orders["id"] > orders["insertion"] else "insertion"
    wrapper = None
    if rule.form in ("field", "field_list") and wrappers:
        if len(wrappers) > 1:
            return rule.model_copy(update={"status": RuleStatus.CONFLICTED, "support": len(ids_right)})
        sample = next(i for i, _ in calls if _actual(rule, i.observation))
        wrapper = {k: v for k, v in parse_structured(sample.observation).items()}
    empty, empty_support = (empties.most_common(1)[0] if empties else (None, 0))
    drafted = rule.model_copy(update={"layout": layouts.most_common(1)[0][0] if layouts else None, "wrapper": wrapper,
                                      "order": order, "fields": list(fields.most_common(1)[0][0]) if fields else None})
    supporting: list[str] = []
    for item, found in ids_right:  # the right records are not enough: the answer must be written as the tool does
        if render_answer(drafted, found if drafted.order == "insertion" else sorted(
                found, key=lambda pair: _sort_key(pair[0]))) == item.observation.strip():
            supporting.append(item.turn_id)
            argument_sets.add(repr(sorted(_scalars(item).items())))
        else:
            contradicting.append(item.turn_id)
    support = len(supporting)
    ok = len(argument_sets) >= MIN_SUPPORT and len(contradicting) <= MAX_CONTRADICTION * support
    return drafted.model_copy(update={
        "empty": empty, "empty_support": empty_support,
        "empty_contradicting": empty_wrong + sum(empties.values()) - empty_support,
        "status": RuleStatus.SUPPORTED if ok else RuleStatus.TENTATIVE, "support": support,
        "contradicting": len(contradicting), "supporting_turns": spread_turns(supporting, 20),
        "contradicting_turns": spread_turns(contradicting, 20)})


def learn_queries(evidence: Iterable[Evidence], store: RecordStore | None = None) -> list[QueryRule]:
    """One query rule per tool whose answers are ids of stored records matched by its arguments (module doc):
    candidates voted per tool, then every candidate run on its tool's calls in one pass over the episodes (the
    records the episode showed so far laid over the store), then the best reviewed candidate per tool."""
    from worldsmith.worldbook.induce import group_by_episode

    evidence = list(evidence)
    store = store if store is not None else RecordStore.from_evidence(evidence)
    by_action: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        by_action[item.action].append(item)
    candidates: dict[str, list[QueryRule]] = {}
    for action, items in sorted(by_action.items()):
        shapes: Counter[_Shape] = Counter()
        present: Counter[tuple[_Shape, str]] = Counter()
        paths: dict[tuple[_Shape, str], Counter[tuple[tuple[str, ...], Mode]]] = defaultdict(Counter)
        arguments: set[str] = set()
        for item in items:
            arguments |= set(_scalars(item))
            _vote(item, store, shapes, present, paths)
        found = [_candidate(action, shape, present, arguments, paths)
                 for shape, count in sorted(shapes.items(), key=lambda pair: (-pair[1], str(pair[0])))
                 if count >= MIN_SUPPORT]
        if any(found):
            candidates[action] = [rule for rule in found if rule is not None]
    indexes = {id(rule): QueryIndex(rule, store) for rules in candidates.values() for rule in rules}
    calls: dict[int, list[tuple[Evidence, _Found | None]]] = defaultdict(list)
    view = EpisodeRecords(store)
    for items in group_by_episode(evidence).values():
        view.reset()
        for item in items:
            for rule in candidates.get(item.action, ()):
                calls[id(rule)].append((item, run_query(rule, view, _scalars(item), indexes[id(rule)])))
            view.observe(_scalars(item) | (item.arguments if isinstance(item.arguments, dict) else {}),
                         item.observation)
    rules: list[QueryRule] = []
    for action in sorted(candidates):
        reviewed = [_review(rule, calls[id(rule)], store) for rule in candidates[action]]
        rules.append(max(reviewed, key=lambda r: (r.status == RuleStatus.SUPPORTED, r.support - r.contradicting)))
    return rules
