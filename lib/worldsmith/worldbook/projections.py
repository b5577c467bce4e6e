"""Projection reads: a tool whose answer is a part of the record an argument selects, learned from evidence.

    rules = learn_projections(evidence, store)            # list[Projection], one per tool at most
    text = render_projection(rule, record, child_of, arguments)   # the answer, or None when not known

`get_payment_methods(user_id)` answers the `payment_methods` object of the user record as a list of its
values; `list_order_ids(user_id, status)` answers the ids in the user's `orders` list whose order record has
that `status`. Per call of a tool, every record an argument names (the episode's version as last shown, when
no call of a non-reader tool named it since; else its initial version in the entity store, `RecordStore`) is
compared with the answer: each of its fields (at any depth of objects) whose value, values, keys, or a
subsequence of ids equals the answer proposes a candidate (`Projection.shape`). A `members` candidate learns
its filters: an argument that selects the children whose field equals it, on `SHARE` of the calls where every
child was known. Each candidate is then replayed on every call of its tool where the record was known: an
answer rendered the same (in the tool's JSON layout) supports it, another contradicts it; a rule is supported
with `MIN_SUPPORT` distinct argument values and at most `MAX_CONTRADICTION` contradictions per support.

One pass over the evidence to collect the calls, then one replay per candidate of its tool's calls: linear.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.worldbook.induce import group_by_episode
from worldsmith.worldbook.lookup import at_path
from worldsmith.worldbook.lookup_specs import Match, Projection, Shape
from worldsmith.worldbook.model import Evidence, RuleStatus, spread_turns
from worldsmith.worldbook.queries import MAX_CONTRADICTION, MIN_SUPPORT, SHARE, matches
from worldsmith.worldbook.record_store import (
    Layout,
    RecordStore,
    arguments_of,
    dump_layout,
    learn_readers,
    own_records,
    parse_structured,
    record_key,
    structured_layout,
)

__all__ = ["ChildLookup", "FieldValues", "Unmatchable", "answered_ids", "learn_projections", "project",
           "render_projection"]

RecordKey = tuple[str, str]
ChildLookup = Callable[[str, str], "dict[str, Any] | None"]  # (id key, id) -> the child record, None: unknown
Unmatchable = Callable[[str, Match, Any], bool]  # (child id key, filter, argument value) -> no such record can match
_PROVENANCE = 20
_DEFAULT_LAYOUT: Layout = (", ", ": ", False)


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


# ------------------------------------------------------------------------------------------- answering
def project(rule: Projection, record: Mapping[str, Any], child_of: ChildLookup,
            arguments: Mapping[str, Any], unmatchable: Unmatchable | None = None) -> Any:
    """The part of `record` the rule answers (a list or an object), or None when the record lacks it or a child
    a filter tests is unknown, unless `unmatchable` says no record of the child's kind can match a filter's
    argument (a status no record ever had): that child is left out unseen."""
    leaf = at_path(record, rule.path)
    if rule.shape == "value":
        return leaf if isinstance(leaf, list | dict) else None
    if rule.shape in ("values", "keys"):
        if not isinstance(leaf, dict):
            return None
        if rule.shape == "keys":
            return list(leaf)
        items = list(leaf.values())
        if rule.fields is None:
            return items
        if not all(isinstance(item, dict) and all(k in item for k in rule.fields) for item in items):
            return None
        return [{k: item[k] for k in rule.fields} for item in items]
    if not isinstance(leaf, list) or not all(_scalar(item) for item in leaf):
        return None
    given = [m for m in rule.filters if m.argument in arguments and arguments[m.argument] is not None]
    if not given:
        return list(leaf)
    if rule.child is None:
        return None
    kept = []
    for ident in leaf:
        child = child_of(rule.child, str(ident))
        if child is None:
            if unmatchable is not None and any(unmatchable(rule.child, m, arguments[m.argument]) for m in given):
                continue
            return None
        if all(matches(at_path(child, m.path), arguments[m.argument], m.mode) for m in given):
            kept.append(ident)
    return kept


def render_projection(rule: Projection, record: Mapping[str, Any], child_of: ChildLookup,
                      arguments: Mapping[str, Any], unmatchable: Unmatchable | None = None) -> str | None:
    """The tool's answer, in its JSON layout; None when the rule cannot tell it (`project`)."""
    value = project(rule, record, child_of, arguments, unmatchable)
    return None if value is None else dump_layout(value, rule.layout or _DEFAULT_LAYOUT)


class FieldValues:
    """The values a field of a kind of record takes, over every version of every record the evidence showed, and
    whether that set looks closed: no value held by one record only (Good-Turing: the chance that the next record
    holds a value never seen is the share of values seen once, here none). A filter argument outside a closed set
    matches no record of that kind, seen or not (`unmatchable`); an open set (names, ids) tells nothing."""

    def __init__(self, evidence: Sequence[Evidence]) -> None:
        self.evidence = evidence
        self._values: dict[tuple[str, tuple[str, ...]], dict[Any, set[str]] | None] = {}

    def values(self, key: str, path: Sequence[str]) -> dict[Any, set[str]] | None:
        """value -> the ids of the records that held it, for a closed set; None for an open or empty one."""
        cache = (key, tuple(path))
        if cache not in self._values:
            held: dict[Any, set[str]] = defaultdict(set)
            for item in self.evidence:
                answer = parse_structured(item.observation)
                for own, ident, record in own_records(answer) if answer is not None else ():
                    value = at_path(record, list(path)) if own == key else None
                    if _scalar(value):
                        held[value].add(str(ident))
            closed = bool(held) and all(len(ids) > 1 for ids in held.values())
            self._values[cache] = dict(held) if closed else None
        return self._values[cache]

    def unmatchable(self, key: str, match: Match, given: Any, also: Iterator[Any] | Sequence[Any] = ()) -> bool:
        """Whether no record of kind `key` can match `given` on the filter's field: the field's values are a closed
        set and none of them (nor of `also`, values this episode's records hold) matches."""
        values = self.values(key, match.path)
        if values is None or not _scalar(given):
            return False
        return not any(matches(value, given, match.mode) for value in [*values, *also])


# ------------------------------------------------------------------------------------------- evidence
@dataclass
class _Call:
    """One call of a tool with the records its arguments named, as known just before it."""

    item: Evidence
    answer: Any  # the JSON answer, None for a text
    records: list[tuple[str, RecordKey, dict[str, Any]]]  # (argument, record key, record)
    since: frozenset[str] = frozenset()  # the tools that named one of those records since the episode showed it
    children: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # id -> (id key, record)


class _EpisodeView:
    """Records as one episode last showed them, else their initial version in the store, with the tools that
    named each (or a record nested in it: a gift card inside its user) since it was shown."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.last: dict[RecordKey, dict[str, Any]] = {}
        self.keys: dict[str, list[str]] = defaultdict(list)  # id -> the id keys the episode showed it under
        self.since: dict[str, set[str]] = defaultdict(set)  # id -> the tools that named it since it was shown

    def record(self, ident: str) -> Iterator[tuple[RecordKey, dict[str, Any]]]:
        """The known versions of the records whose id is `ident`."""
        shown = self.keys.get(ident, [])
        for key in shown:
            yield record_key(key, ident), self.last[record_key(key, ident)]
        for rkey in self.store.keys_for(ident):
            if rkey[0] not in shown and (stored := self.store.get(*rkey)) is not None:
                yield rkey, stored

    def tools_since(self, record: Mapping[str, Any]) -> set[str]:
        """The tools that named the record, or one nested in it, since it was shown."""
        return {tool for _, inner, _ in own_records(record) for tool in self.since.get(str(inner), ())}

    def observe(self, item: Evidence, arguments: Mapping[str, Any], answer: Any) -> None:
        for ident in {str(v) for v in arguments.values() if _scalar(v)}:
            self.since[ident].add(item.action)
        for key, ident, record in own_records(answer) if answer is not None else ():
            rkey = record_key(key, ident)
            if rkey not in self.last:
                self.keys[rkey[1]].append(key)
            self.last[rkey] = record
        for ident in answered_ids(answer):  # shown again as what the call answered, not a reference inside it
            self.since.pop(ident, None)


def answered_ids(answer: Any) -> set[str]:
    """The ids of the records an answer is about: the whole answer's, or each item's of a list."""
    tops = answer if isinstance(answer, list) else [answer]
    out = set()
    for top in tops:
        found = next(iter(own_records(top)), None) if isinstance(top, dict) else None
        if found is not None and found[2] is top:
            out.add(str(found[1]))
    return out


def _collect(evidence: Sequence[Evidence], store: RecordStore) -> dict[str, list[_Call]]:
    """Per tool, its calls with JSON or text answers and the known records their scalar arguments name."""
    calls: dict[str, list[_Call]] = defaultdict(list)
    for items in group_by_episode(evidence).values():
        view = _EpisodeView(store)
        for item in items:
            arguments = arguments_of(item)
            answer = parse_structured(item.observation)
            named = [(name, rkey, record) for name, value in arguments.items() if _scalar(value)
                     for rkey, record in view.record(str(value))]
            if named:
                since = set().union(*(view.tools_since(record) for _, _, record in named)) - {item.action}
                call = _Call(item, answer, named, frozenset(since))
                if isinstance(answer, list) and all(_scalar(x) for x in answer):
                    for _, _, record in named:
                        for ident in {str(i) for _, leaf in _fields(record) if _ids(leaf) for i in leaf}:
                            found = next(view.record(ident), None)
                            if found is not None:
                                call.children[ident] = (found[0][0], found[1])
                calls[item.action].append(call)
            view.observe(item, arguments, answer)
    return calls


def _fields(record: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, value) of every list or object field at any depth of objects."""
    if isinstance(record, dict):
        for key, value in record.items():
            if isinstance(value, dict | list):
                yield (*prefix, str(key)), value
            if isinstance(value, dict):
                yield from _fields(value, (*prefix, str(key)))


def _ids(leaf: Any) -> bool:
    return isinstance(leaf, list) and all(_scalar(x) for x in leaf)


def _subsequence(part: Sequence[Any], whole: Sequence[Any]) -> bool:
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


_Candidate = tuple[str, str, tuple[str, ...], Shape, tuple[str, ...] | None]  # argument, key, path, shape, fields


def _candidates(call: _Call) -> Iterator[_Candidate]:
    """Every projection of a named record that equals this call's answer."""
    value = call.answer
    if not isinstance(value, list | dict):
        return
    for argument, rkey, record in call.records:
        for path, leaf in _fields(record):
            if leaf == value:
                yield argument, rkey[0], path, "value", None
            if isinstance(leaf, dict) and isinstance(value, list):
                items = list(leaf.values())
                if items == value:
                    yield argument, rkey[0], path, "values", None
                elif _cut(items, value):
                    yield argument, rkey[0], path, "values", tuple(value[0])
                if list(leaf) == value and value:
                    yield argument, rkey[0], path, "keys", None
            if _ids(leaf) and _ids(value) and _subsequence(value, leaf) and (value or leaf):
                yield argument, rkey[0], path, "members", None


def _cut(items: list[Any], value: list[Any]) -> bool:
    """Whether each answered item is its record cut to the same fewer keys."""
    if not value or len(items) != len(value) or not all(isinstance(v, dict) for v in value):
        return False
    keys = list(value[0])
    return all(list(v) == keys and isinstance(i, dict) and set(keys) < set(i) and all(i[k] == v[k] for k in keys)
               for i, v in zip(items, value, strict=True))


# ------------------------------------------------------------------------------------------- learning
def _child_lookup(call: _Call) -> ChildLookup:
    def lookup(key: str, ident: str) -> dict[str, Any] | None:
        found = call.children.get(ident)
        return found[1] if found is not None and found[0] == key else None
    return lookup


def _filters(candidate: _Candidate, calls: Sequence[_Call]) -> tuple[str | None, list[Match]]:
    """A `members` candidate's child id key and filters: each other argument compared with the child field that
    selects exactly the answered children on `SHARE` of the calls where every child was known."""
    argument, key, path = candidate[0], candidate[1], candidate[2]
    held: Counter[tuple[str, tuple[str, ...]]] = Counter()
    checked: Counter[str] = Counter()
    child_keys: Counter[str] = Counter()
    for call in calls:
        record = next((r for a, k, r in call.records if a == argument and k[0] == key), None)
        leaf = at_path(record, path) if record is not None else None
        if not isinstance(leaf, list) or not _ids(leaf) or not _ids(call.answer) or not call.answer \
                or not all(str(i) in call.children for i in leaf):
            continue
        children = [(i, call.children[str(i)]) for i in leaf]
        child_keys.update(k for _, (k, _) in children)
        for name, given in arguments_of(call.item).items():
            if name == argument or not _scalar(given):
                continue
            checked[name] += 1
            paths = {p for _, (_, child) in children for p, v in child.items() if _scalar(v)}
            for field_name in paths:
                kept = [i for i, (_, child) in children if matches(child.get(field_name), given, "exact")]
                if kept == call.answer:
                    held[(name, (field_name,))] += 1
    chosen: dict[str, Match] = {}
    for (name, field_path), count in sorted(held.items(), key=lambda kv: (-kv[1], kv[0])):
        if name not in chosen and count >= MIN_SUPPORT and count >= SHARE * checked[name]:
            chosen[name] = Match(argument=name, path=list(field_path), mode="exact")
    child = child_keys.most_common(1)[0][0] if child_keys else None
    return child, list(chosen.values())


def _review(tool: str, candidate: _Candidate, calls: Sequence[_Call], layout: Layout | None,
            readers: set[str]) -> Projection:
    """The candidate replayed on every call of its tool where its record was known, and not named since it was
    shown by a tool that is not a reader (a write) or one after which the answers go wrong (`_blamed`): support
    and contradictions; those tools are the rule's `unsure_after`."""
    argument, key, path, shape, fields = candidate
    child, filters = _filters(candidate, calls) if shape == "members" else (None, [])
    rule = Projection(action=tool, argument=argument, key=key, path=list(path), shape=shape,
                      fields=list(fields) if fields is not None else None, child=child, filters=filters,
                      layout=layout)
    judged: list[tuple[_Call, bool]] = []
    for call in calls:
        record = next((r for a, k, r in call.records if a == argument and k[0] == key), None)
        text = render_projection(rule, record, _child_lookup(call), arguments_of(call.item)) if record else None
        if text is not None:
            judged.append((call, text == call.item.observation.strip()))
    blamed = _blamed(judged) | {tool for call, _ in judged for tool in call.since if tool not in readers}
    supporting: list[str] = []
    contradicting: list[str] = []
    values: set[str] = set()
    for call, right in judged:
        if call.since & blamed:
            continue
        if right:
            supporting.append(call.item.turn_id)
            values.add(repr(sorted((k, repr(v)) for k, v in arguments_of(call.item).items())))
        else:
            contradicting.append(call.item.turn_id)
    support = len(supporting)
    ok = len(values) >= MIN_SUPPORT and len(contradicting) <= MAX_CONTRADICTION * support
    return rule.model_copy(update={"status": RuleStatus.SUPPORTED if ok else RuleStatus.TENTATIVE,
                                   "support": support, "contradicting": len(contradicting),
                                   "unsure_after": sorted(blamed),
                                   "supporting_turns": spread_turns(supporting, _PROVENANCE),
                                   "contradicting_turns": spread_turns(contradicting, _PROVENANCE)})


def _blamed(judged: Sequence[tuple[_Call, bool]]) -> set[str]:
    """The tools after whose naming the record the answer was mostly rendered wrong (at least `MIN_SUPPORT`
    times): they change it in ways the evidence does not tell, so a call after them is not judged (nor, when
    simulating, answered) until the record is shown again."""
    named: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for call, right in judged:
        named.update(call.since)
        if not right:
            wrong.update(call.since)
    return {tool for tool, n in wrong.items() if n >= MIN_SUPPORT and 2 * n >= named[tool]}


_SHAPES: tuple[Shape, ...] = ("value", "values", "keys", "members")  # the plainer reading first on a tie


def learn_projections(evidence: Sequence[Evidence], store: RecordStore | None = None,
                      readers: set[str] | None = None) -> list[Projection]:
    """At most one projection rule per tool: its best reviewed candidate (module doc). `readers`: the tools that
    never change what they show (learned when not given)."""
    evidence = list(evidence)
    readers = learn_readers(evidence) if readers is None else readers
    store = store if store is not None else RecordStore.from_evidence(evidence, readers)
    rules: list[Projection] = []
    for tool, calls in sorted(_collect(evidence, store).items()):
        if tool not in readers:
            continue
        counts: Counter[_Candidate] = Counter(c for call in calls for c in dict.fromkeys(_candidates(call)))
        proposed = [c for c, n in counts.items() if n >= MIN_SUPPORT]
        if not proposed:
            continue
        layouts = Counter(layout for call in calls if call.answer is not None
                          for layout in [structured_layout(call.item.observation)] if layout is not None)
        layout = layouts.most_common(1)[0][0] if layouts else None
        reviewed = [_review(tool, c, calls, layout, readers) for c in proposed]
        rules.append(max(reviewed, key=lambda r: (r.status == RuleStatus.SUPPORTED, r.support - r.contradicting,
                                                  -_SHAPES.index(r.shape), -len(r.path))))
    return rules
