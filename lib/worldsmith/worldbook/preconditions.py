"""Preconditions: the error a tool answers when a test over its arguments and the records they select holds.

"Error: order not found", "Error: non-pending order cannot be cancelled", "Error: gift card balance is not
enough": for a tool whose evidence holds both successes and a recurring error text, `learn_preconditions` looks
for a test that holds on every call answered with that error and on no successful call, over the records the
call's arguments select (at the time of the call: the entity store laid under what the episode showed so far,
`worldbook.record_store.EpisodeRecords`), one hop further (an order's `user_id` selects the user), and the
arguments themselves:

- `unknown`: the selecting argument names no known record of its kind. Only where the store is complete for
  that kind (most ids that successful calls selected were shown by more than one episode, so an unseen id is
  likely absent, not merely unrecorded: `COMPLETE`); otherwise
- `invalid_form`: the id's form (`#x`, `x_x`) is none of the forms of the kind's known ids;
- `not_in_values`: a field of the selected record holds a value no successful call's record held
  (`status` not `pending`), where successes show few values (a state, not an attribute);
- `less_than`: a numeric field of the record is below a numeric argument (`balance < amount`);
- `not_member`: an argument is not among a record's list or object keys (a payment method not the user's);
- `arg_not_in`: an argument holds a value no successful call had, among few repeated ones (an enum).

The error text is a template with the call's argument values slotted (`{arg.order_id}`). Tests that need a
record the episode cannot know yet stay silent. One pass per episode over the evidence, candidates enumerated
from the failing calls only: linear in the evidence.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.worldbook.lookup import at_path, leaves, selects_entities
from worldsmith.worldbook.lookup_specs import Precondition, Test
from worldsmith.worldbook.model import Evidence, RuleStatus, spread_turns
from worldsmith.worldbook.queries import fill_slots, slot_arguments
from worldsmith.worldbook.record_store import (
    OWN_ID,
    EpisodeRecords,
    RecordStore,
    arguments_of,
    id_shape,
    parse_structured,
)

__all__ = ["COMPLETE", "Precondition", "check", "learn_preconditions", "selections"]

COMPLETE = 0.9
MIN_SUPPORT = 2
MAX_STATES = 5  # a field whose successes show more values (or each value once) is an attribute, not a state
MAX_ENUM = 8
MAX_SHAPES = 3  # a kind whose known ids show more forms has no form an id could fail
_ERROR = re.compile(r"\b(error|not|cannot|can't|invalid|insufficient|unable|fail\w*|denied|exceed\w*|already|"
                    r"must|no such|unknown|forbidden|unauthori[sz]ed)\b", re.IGNORECASE)
_MESSAGE = re.compile(r"(error|message|detail|reason|status|result)", re.IGNORECASE)
_ORDER: tuple[Test, ...] = ("unknown", "invalid_form", "arg_not_in", "not_member", "not_in_values", "less_than")


# ------------------------------------------------------------------------------------------- context
def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


Selected = dict[tuple[str, str | None], tuple[str, dict[str, Any] | None]]  # (argument, via) -> (kind, record)


def selections(arguments: Mapping[str, Any], view: EpisodeRecords, selects: Mapping[str, str]) -> Selected:
    """The records a call's arguments select now (argument -> kind learned), and one hop on through the record's
    fields that name records of their own kind (`user_id` of an order)."""
    out: Selected = {}
    for name, kind in selects.items():
        value = arguments.get(name)
        if not _scalar(value):
            continue
        record = view.get(kind, value)
        out[(name, None)] = (kind, record)
        for field, inner in (record or {}).items():
            if field != kind and _scalar(inner) and view.store.has_kind(field):
                out[(name, field)] = (field, view.get(field, inner))
    return out


@dataclass
class _Call:
    item: Evidence
    arguments: dict[str, Any]
    selected: Selected
    template: str | None  # the slotted error text; None for a success


def _members(container: Any) -> set[str]:
    if isinstance(container, dict):
        return {str(k) for k in container}
    if isinstance(container, list):
        out = set()
        for entry in container:
            if isinstance(entry, dict):
                out |= {str(v) for k, v in entry.items() if (k == "id" or k.endswith("_id")) and _scalar(v)}
            elif _scalar(entry):
                out.add(str(entry))
        return out
    return set()


def check(rule: Precondition, arguments: Mapping[str, Any], selected: Selected, view: EpisodeRecords) -> bool | None:
    """Whether the precondition's failure holds for this call (True: the call fails), None when unknowable."""
    value = arguments.get(rule.argument)
    if rule.test == "arg_not_in":
        return None if not _scalar(value) else value not in rule.values
    if rule.test in ("unknown", "invalid_form"):
        if not _scalar(value) or rule.kind is None:
            return None
        if rule.test == "invalid_form":
            return id_shape(value) not in rule.values
        return not view.known(rule.kind, value)
    _, record = selected.get((rule.argument, rule.via), (None, None))
    if record is None:
        return None
    field = at_path(record, rule.path)
    if rule.test == "not_in_values":
        return None if field is None else field not in rule.values
    other = arguments.get(rule.other or "")
    if rule.test == "less_than":
        return field < other if _number(field) and _number(other) else None
    if rule.test == "not_member":
        return None if field is None or not _scalar(other) else str(other) not in _members(field)
    return None


# ------------------------------------------------------------------------------------------- learning
def _error_template(item: Evidence) -> str | None:
    value = parse_structured(item.observation)
    message = isinstance(value, dict) and len(value) == 1 and _MESSAGE.search(next(iter(value))) \
        and isinstance(next(iter(value.values())), str)
    if isinstance(value, dict | list) and not message:
        return None  # a JSON result: a success (a one-field message object, `{"error": ...}`, may be an error)
    text = item.observation.strip()
    failed = item.outcome is not None and item.outcome.startswith("failure")
    if not text or not (failed or _ERROR.search(text)):
        return None
    return slot_arguments(text, arguments_of(item))


def _selects(items: Sequence[Evidence], store: RecordStore) -> dict[str, str]:
    """Argument -> the record kind its value names on the tool's calls (most often)."""
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for item in items:
        for name, value in arguments_of(item).items():
            if _scalar(value) and selects_entities(name):
                for kind in store.kinds_of(value):
                    votes[name][kind] += 1
    return {name: counts.most_common(1)[0][0] for name, counts in votes.items()}


class _Successes:
    """What a tool's successful calls showed, computed once per (argument, hop, path) asked about."""

    def __init__(self, calls: Sequence[_Call]) -> None:
        self.calls = calls
        self._states: dict[tuple[str, str | None, tuple[str, ...]], set[Any]] = {}
        self._arguments: dict[str, Counter[str]] = {}

    def states(self, name: str, via: str | None, path: tuple[str, ...]) -> set[Any]:
        """The values the field held on success, when they look like a state: few, each seen twice on average
        (an attribute such as an email differs on every call); else empty."""
        key = (name, via, path)
        if key not in self._states:
            shown = [at_path(c.selected.get((name, via), ("", None))[1], path) for c in self.calls]
            values = {v for v in shown if v is not None and _scalar(v)}
            seen = sum(v is not None for v in shown)
            self._states[key] = values if len(values) <= MAX_STATES and seen >= 2 * len(values) else set()
        return self._states[key]

    def arguments(self, name: str) -> Counter[str]:
        if name not in self._arguments:
            self._arguments[name] = Counter(str(c.arguments[name]) for c in self.calls
                                            if _scalar(c.arguments.get(name)))
        return self._arguments[name]


def _candidates(action: str, call: _Call, successes: _Successes, template: str) -> list[Precondition]:
    """The tests one failing call suggests (each is checked on every call afterwards)."""
    out: list[Precondition] = []

    def make(**fields: Any) -> Precondition:
        return Precondition(action=action, template=template, **fields)

    for name, value in call.arguments.items():
        seen = successes.arguments(name)
        if _scalar(value) and 0 < len(seen) <= MAX_ENUM and sum(seen.values()) >= 3 * len(seen) \
                and str(value) not in seen:
            values = sorted({c.arguments[name] for c in successes.calls if _scalar(c.arguments.get(name))}, key=str)
            out.append(make(test="arg_not_in", argument=name, values=values))
    for (name, via), (_, record) in call.selected.items():
        kind = call.selected[(name, None)][0]  # what the argument selects; one hop on, the record of kind `via`
        if record is None:
            if via is None:
                out += [make(test="unknown", argument=name, kind=kind), make(test="invalid_form", argument=name,
                                                                                kind=kind)]
            continue
        out += _record_candidates(make, call, successes, name, via, kind, record)
    return out


def _record_candidates(make: Any, call: _Call, successes: _Successes, name: str, via: str | None, kind: str,
                       record: dict[str, Any]) -> list[Precondition]:
    out: list[Precondition] = []
    for path, field in leaves(record):
        if _scalar(field) and not OWN_ID.search(path[-1]):  # an identity is not a state
            states = successes.states(name, via, path)
            if states and field not in states:
                out.append(make(test="not_in_values", argument=name, via=via, kind=kind, path=list(path),
                                values=sorted(states, key=str)))
        for other, given in call.arguments.items():
            if _number(field) and _number(given) and field < given:
                out.append(make(test="less_than", argument=name, via=via, kind=kind, path=list(path), other=other))
    for key, container in record.items():
        members = _members(container) if isinstance(container, dict | list) else set()
        for other, given in call.arguments.items():
            if members and other != name and _scalar(given) and str(given) not in members:
                out.append(make(test="not_member", argument=name, via=via, kind=kind, path=[key], other=other))
    return out


def _calls(evidence: Sequence[Evidence], store: RecordStore, selects: Mapping[str, dict[str, str]],
           actions: set[str]) -> dict[str, list[_Call]]:
    """Each call of these tools with what its arguments selected at the time (one pass per episode)."""
    from worldsmith.worldbook.induce import group_by_episode

    out: dict[str, list[_Call]] = defaultdict(list)
    view = EpisodeRecords(store)
    for items in group_by_episode(evidence).values():
        view.reset()
        for item in items:
            if item.action in actions:
                arguments = arguments_of(item)
                out[item.action].append(_Call(item, arguments, selections(arguments, view, selects[item.action]),
                                              _error_template(item)))
            view.observe(arguments_of(item), item.observation)
    return out


def _score(rule: Precondition, calls: Sequence[_Call], store: RecordStore) -> Precondition:
    view = EpisodeRecords(store)  # `unknown` on learning: the store holds every record any episode showed
    supporting, contradicting = [], []
    for call in calls:
        holds = check(rule, call.arguments, call.selected, view)
        if holds is None:
            continue
        if call.template == rule.template and holds:
            supporting.append(call.item.turn_id)
        elif call.template is None and holds:
            contradicting.append(call.item.turn_id)
    ok = len(supporting) >= MIN_SUPPORT and not contradicting
    return rule.model_copy(update={"support": len(supporting), "contradicting": len(contradicting),
                                   "supporting_turns": spread_turns(supporting, 20),
                                   "contradicting_turns": spread_turns(contradicting, 20),
                                   "status": RuleStatus.SUPPORTED if ok else RuleStatus.TENTATIVE})


def _complete(kind: str, argument: str, calls: Sequence[_Call], store: RecordStore) -> bool:
    ids = [c.arguments[argument] for c in calls if c.template is None and _scalar(c.arguments.get(argument))
           and store.entity(kind, c.arguments[argument]) is not None]
    return store.coverage(kind, ids) >= COMPLETE


def learn_preconditions(evidence: Iterable[Evidence], store: RecordStore | None = None) -> list[Precondition]:
    """Per tool and recurring error text, the simplest test that separates it from the successes (module doc)."""
    evidence = list(evidence)
    store = store if store is not None else RecordStore.from_evidence(evidence)
    by_action: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        by_action[item.action].append(item)
    failing = {a for a, items in by_action.items()
               if any(_error_template(i) for i in items) and any(_error_template(i) is None for i in items)}
    selects = {action: _selects(by_action[action], store) for action in failing}
    calls = _calls(evidence, store, selects, failing)
    rules: list[Precondition] = []
    for action in sorted(failing):
        successes = _Successes([c for c in calls[action] if c.template is None])
        templates = Counter(c.template for c in calls[action] if c.template is not None)
        for template, count in sorted(templates.items(), key=lambda pair: (-pair[1], pair[0])):
            if count < MIN_SUPPORT:
                continue
            seen: dict[str, Precondition] = {}
            for call in calls[action]:
                if call.template == template:
                    for candidate in _candidates(action, call, successes, template):
                        seen.setdefault(candidate.model_dump_json(), candidate)
            scored = []
            for candidate in seen.values():
                if candidate.test == "unknown" and not _complete(candidate.kind or "", candidate.argument,
                                                                 calls[action], store):
                    continue
                if candidate.test == "invalid_form":
                    shapes = sorted(store.shapes(candidate.kind or ""))
                    if len(shapes) > MAX_SHAPES:
                        continue  # the kind's ids have no one form
                    candidate = candidate.model_copy(update={"values": shapes})
                scored.append(_score(candidate, calls[action], store))
            best = max(scored, key=lambda r: (r.status == RuleStatus.SUPPORTED, r.support - 2 * r.contradicting,
                                              -_ORDER.index(r.test), -len(r.path)), default=None)
            if best is not None and best.support >= 1:
                rules.append(best)
    return sorted(rules, key=lambda r: (r.action, _ORDER.index(r.test), -r.support))


def failure_text(rule: Precondition, arguments: Mapping[str, Any]) -> str | None:
    return fill_slots(rule.template, arguments)
