"""Write effects of tool-API calls learned from evidence: which fields a call changes, and how.

    rules = learn_tool_rules(evidence)        # list[ToolRule], kind "write"
    after = apply_changes(rule, before, arguments)             # the record once the call ran
    text = render_response(rule, before, after, arguments)     # what the call answers

A write is a call of a tool that has a selector (`records.learn_selectors`: its argument names a record) and
changed a field the record had (a first pass over the episodes alone tells; the other tools are readers). Its effects are learned from two kinds of evidence:

(a) a later read of the same record in the episode (the record before the call against the record the read
    shows, when no other write named it in between), and
(b) the call's own answer: the whole record (`record`) or some of its fields (`fields`), compared with the
    record as the episode last showed it or, where the episode has not, its initial version in the entity
    store (`records.RecordStore`: what other construction episodes showed).

Per tool and field, every relation that explains the new value is counted (`FieldChange.op`: copy an
argument, add / subtract it, append an entry built from arguments, constants and prior fields, remove or
move the items an argument names, sort an argument list, build an object, keep, copy another field, set a
constant). The first relation (in `CHANGE_OPS` order) holding on at least `MIN_SUPPORT` turns and `SHARE` of
the turns where the field could be checked is kept as supported; a field checked on fewer turns gets its best
relation as tentative; a field no relation explains often enough (it changes in ways the arguments and prior
state do not tell) gets its most common one as conflicted. A rule is supported when all its changes and
response fields are. Two passes over the evidence, dict indexes only: linear in the number of turns.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.worldbook.induce import group_by_episode
from worldsmith.worldbook.lookup_rules import learn_lookup_rules
from worldsmith.worldbook.model import Evidence, RuleProvenance, RuleStatus
from worldsmith.worldbook.record_store import (
    Layout,
    RecordStore,
    arguments_of,
    dump_layout,
    layout_of,
    learn_selectors,
    own_records,
    parse_structured,
    record_key,
)
from worldsmith.worldbook.summaries import EpisodeSummaries
from worldsmith.worldbook.toolrules import (
    ANSWER,
    CHANGE_OPS,
    FieldChange,
    ResponseKind,
    ResponseSpec,
    Selector,
    ToolRule,
)

__all__ = [
    "MIN_SUPPORT",
    "SHARE",
    "WriteConfig",
    "answer_form",
    "apply_changes",
    "fill_slots",
    "aliases",
    "learn_tool_rules",
    "learn_writes",
    "path_keys",
    "render_response",
]

MIN_SUPPORT = 2
SHARE = 0.8
PROVENANCE_CAP = 20
_PLAIN = re.compile(r"[A-Za-z0-9_\-]+")
_ABSENT: Any = object()


@dataclass(frozen=True)
class WriteConfig:
    min_support: int = MIN_SUPPORT
    share: float = SHARE
    provenance_cap: int = PROVENANCE_CAP


# ------------------------------------------------------------------------------------------------ paths
def _step(key: str) -> str:
    return key if _PLAIN.fullmatch(key) else "[" + re.sub(r"[\\\[\]]", r"\\\g<0>", key) + "]"


def path_of(keys: Sequence[str]) -> str:
    """A record path from its keys (`["address", "city"]` -> `address.city`; odd keys in brackets)."""
    return ".".join(_step(k) for k in keys).replace(".[", "[")


def path_keys(path: str) -> list[str]:
    """The keys of a record path (`path_of` reversed)."""
    keys = []
    for plain, bracketed in re.findall(r"([^.\[\]\\]+)|\[((?:\\.|[^\[\]\\])*)\]", path):
        keys.append(plain if plain else re.sub(r"\\(.)", r"\1", bracketed))
    return keys


def _get(record: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        if isinstance(record, list) and key.isdigit() and int(key) < len(record):
            record = record[int(key)]
        elif isinstance(record, dict) and key in record:
            record = record[key]
        else:
            return _ABSENT
    return record


def _leaves(record: Mapping[str, Any], depth: int = 3) -> dict[str, list[str]]:
    """JSON text of every value at depth <= `depth` -> the paths holding it (what `field` relations read)."""
    out: dict[str, list[str]] = defaultdict(list)
    stack: list[tuple[list[str], Any]] = [([k], v) for k, v in record.items()]
    while stack:
        keys, value = stack.pop()
        out[_key(value)].append(path_of(keys))
        if isinstance(value, dict) and len(keys) < depth:
            stack.extend(([*keys, k], v) for k, v in value.items())
        elif isinstance(value, list) and len(keys) < depth:
            stack.extend(([*keys, str(i)], v) for i, v in enumerate(value))
    return out


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


# ------------------------------------------------------------------------------------------------ answer forms
_MIN_SLOT = 3  # an argument value shorter than this is not slotted into an answer's form (it would match anywhere)
_SLOT = re.compile(r"\{arg\.([^{}]+)\}")


def answer_form(observation: str, arguments: Mapping[str, Any]) -> str:
    """The form of an answer an effect rule acts on: `json:list`, `json:` and an object's keys, else the text with
    the arguments' values as `{arg.name}` slots (`Payment method {arg.payment_method_id} removed.`): a refusal
    (an error text, an error object) has another form than the success it refuses."""
    value = parse_structured(observation)
    if isinstance(value, list):
        return "json:list"
    if isinstance(value, dict):
        return "json:" + ",".join(sorted(value))
    text = observation
    for name, given in sorted(arguments.items(), key=lambda kv: -len(str(kv[1]))):
        if isinstance(given, str | int) and not isinstance(given, bool) and len(str(given)) >= _MIN_SLOT:
            text = text.replace(str(given), "{arg." + name + "}")
    return text


def fill_slots(form: str, arguments: Mapping[str, Any]) -> str | None:
    """A text form with its `{arg.name}` slots filled from the arguments (None when one names no argument)."""
    missing = [name for name in _SLOT.findall(form) if name not in arguments]
    return None if missing else _SLOT.sub(lambda m: str(arguments[m.group(1)]), form)


# ------------------------------------------------------------------------------------------------ relations
def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _named(item: Any, name: Any) -> bool:
    """Whether an argument (a value or a list of them) names a list item (the item itself, or its id)."""
    names = name if isinstance(name, list) else [name]
    if item in names:
        return True
    if isinstance(item, dict):
        return any(v in names for k, v in item.items() if isinstance(v, str | int) and not isinstance(v, bool)
                   and (k == "id" or k.endswith("_id")))
    return False


Candidate = tuple[Any, ...]  # (op, operand...): hashable, one relation that explained a value


def _sources(value: Any, before: Mapping[str, Any], leaves: Mapping[str, list[str]],
             arguments: Mapping[str, Any]) -> set[Candidate]:
    """How a plain value could come: an argument, a field of the record before, a sum over the items an argument
    names, a constant."""
    text = _key(value)
    found: set[Candidate] = {("copy", a) for a, v in arguments.items() if _key(v) == text}
    found |= {("field", p) for p in leaves.get(text, ())}
    if _number(value):
        found |= _sums(value, before, arguments)
    found.add(("set", text))
    return found


def _sums(value: float, before: Mapping[str, Any], arguments: Mapping[str, Any]) -> set[Candidate]:
    """("sum", argument, list.key) where `value` is the sum of `key` over the items of the list the argument names."""
    found: set[Candidate] = set()
    for list_key, items in before.items():
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            continue
        for name, argument in arguments.items():
            named = [x for x in items if _named(x, argument)]
            if not named:
                continue
            for key, first in named[0].items():
                if _number(first) and abs(_total(named, key) - value) < 1e-6:
                    found.add(("sum", name, path_of([list_key, key])))
    return found


def _total(items: Sequence[Any], key: str) -> float:
    return round(sum(x[key] for x in items if isinstance(x, dict) and _number(x.get(key))), 6)


def _answer_id(answer: Any) -> Any:
    """The id of the record a call answered with (its first identifier field), `_ABSENT` for other answers."""
    if not isinstance(answer, dict):
        return _ABSENT
    own = next(iter(own_records(answer)), None)
    return own[1] if own is not None and own[2] is answer else _ABSENT


def _upserted(prior: Mapping[str, Any], answer: Any) -> dict[str, Any] | None:
    """An object of records (`{id: record}`) with the records the answer shows set under their ids: those keyed like
    its entries (None when the answer shows none)."""
    keys = {own[0] for value in prior.values() if (own := next(iter(own_records(value)), None)) is not None}
    entries = {str(ident): record for key, ident, record in own_records(answer) if not keys or key in keys}
    if not entries:
        return None
    return {**copy.deepcopy(dict(prior)), **copy.deepcopy(entries)}


def _without(prior: Mapping[str, Any], argument: Any) -> dict[str, Any]:
    """An object without the entries an argument names (by key, or by the id their value holds)."""
    names = {str(n) for n in (argument if isinstance(argument, list) else [argument])}
    return {k: v for k, v in prior.items() if k not in names and not _named(v, argument)}


def _dict_relations(new: dict[str, Any], prior: Any, arguments: Mapping[str, Any], answer: Any) -> set[Candidate]:
    """How an object of records changes: entries an argument names removed, the answer's records upserted."""
    if not isinstance(prior, dict) or new == prior:
        return set()
    found: set[Candidate] = {("remove", name) for name, argument in arguments.items()
                             if len(new) < len(prior) and new == _without(prior, argument)}
    if answer is not _ABSENT and _upserted(prior, answer) == new:
        found.add(("upsert",))
    return found


def _list_relations(new: list[Any], prior: Any, before: Mapping[str, Any], name: str,
                    argument: Any) -> set[Candidate]:
    """How a list field's new value comes from one argument: sorted, items removed, items moved from a list."""
    found: set[Candidate] = set()
    if isinstance(argument, list) and argument and new != argument:
        try:
            if new == sorted(argument):
                found.add(("sorted_arg", name))
        except TypeError:
            pass
    if isinstance(prior, list) and len(new) < len(prior) and new == [x for x in prior if not _named(x, argument)]:
        found.add(("remove", name))
    if new and (prior is _ABSENT or new != prior):
        for key, source in before.items():
            if isinstance(source, list) and new == [x for x in source if _named(x, argument)]:
                found.add(("move", name, key))
    return found


def _explain(new: Any, prior: Any, before: Mapping[str, Any], leaves: Mapping[str, list[str]],
             arguments: Mapping[str, Any],
             answer: Any = _ABSENT) -> tuple[set[Candidate], dict[tuple[str, str], set[Candidate]]]:
    """Every relation explaining `new` (a field's value after the call), and for objects / appended entries the
    relations explaining each of their keys ((shape, key) -> candidates). `answer`: the call's JSON answer, where
    the relations may read it (effects on another record: `_Effects`)."""
    found = _sources(new, before, leaves, arguments)
    if isinstance(new, dict):
        found |= _dict_relations(new, prior, arguments, answer)
    parts: dict[tuple[str, str], set[Candidate]] = {}
    if prior is not _ABSENT and new == prior:
        found.add(("keep",))
    for name, argument in arguments.items():
        if _number(new) and _number(prior) and _number(argument):
            if abs(new - (prior + argument)) < 1e-9:
                found.add(("add", name))
            if abs(new - (prior - argument)) < 1e-9:
                found.add(("sub", name))
        if isinstance(new, list):
            found |= _list_relations(new, prior, before, name, argument)
    if isinstance(new, list) and isinstance(prior, list) and len(new) == len(prior) + 1 and new[:-1] == prior:
        entry = new[-1]
        found |= {("append", "arg", a) for a, v in arguments.items() if v == entry}
        if answer is not _ABSENT and _answer_id(answer) == entry:
            found.add(("append", "answer"))
        if isinstance(entry, dict) and entry:
            shape = ",".join(entry)
            found.add(("append", "obj", shape))
            parts.update({(f"append:{shape}", k): _sources(v, before, leaves, arguments) for k, v in entry.items()})
    if isinstance(new, dict) and new and new != prior:
        shape = ",".join(new)
        found.add(("object", shape))
        parts.update({(f"object:{shape}", k): _sources(v, before, leaves, arguments) for k, v in new.items()})
    return found, parts


def _change(path: str, candidate: Candidate, parts: list[FieldChange], support: int, checked: int,
            status: RuleStatus) -> FieldChange:
    op = candidate[0]
    data: dict[str, Any] = {"path": path, "op": op, "support": support, "checked": checked, "status": status}
    if op in ("copy", "add", "sub", "remove", "sorted_arg"):
        data["argument"] = candidate[1]
    elif op == "move":
        data.update(argument=candidate[1], source=path_of([candidate[2]]))
    elif op == "sum":
        data.update(argument=candidate[1], source=candidate[2])
    elif op == "field":
        data["source"] = candidate[1]
    elif op == "set":
        data["value"] = json.loads(candidate[1])
    elif op == "append" and candidate[1] == "arg":
        data["argument"] = candidate[2]
    elif op == "append" and candidate[1] == ANSWER:
        data["source"] = ANSWER
    if op == "object" or (op == "append" and candidate[1] == "obj"):
        data["fields"] = parts
    return FieldChange.model_validate(data)


# ------------------------------------------------------------------------------------------------ counting
@dataclass
class _Field:
    """One (tool, path) over the turns that showed its new value."""

    checked: list[str] = field(default_factory=list)
    new_key: int = 0  # checked turns where the record before the call lacked the field
    changed: int = 0  # checked turns where the record had the field with another value
    held: dict[Candidate, list[str]] = field(default_factory=lambda: defaultdict(list))
    parts: dict[tuple[str, str], Counter[Candidate]] = field(default_factory=lambda: defaultdict(Counter))
    shapes: Counter[str] = field(default_factory=Counter)


@dataclass
class _Tool:
    turns: list[str] = field(default_factory=list)  # write turns whose record before the call was known
    kinds: Counter[ResponseKind] = field(default_factory=Counter)  # response kinds
    orders: Counter[tuple[str, ...]] = field(default_factory=Counter)  # JSON answers' key orders
    texts: Counter[str] = field(default_factory=Counter)  # text answers' forms (`answer_form`: arguments slotted)
    layouts: Counter[Layout] = field(default_factory=Counter)
    changes: dict[str, _Field] = field(default_factory=lambda: defaultdict(_Field))  # record path -> counts
    answer: dict[str, _Field] = field(default_factory=lambda: defaultdict(_Field))  # answer-only keys -> counts
    # text-answered writes and the record a later read showed: (turn, answer text, before, after, arguments); counted
    # once the run tells the tool's usual answer (its success text: another text is a refusal that wrote nothing)
    deferred: list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    def main_kind(self) -> tuple[ResponseKind, bool]:
        """The usual answer kind, and whether the answers agree on it (a text beside JSON records is a refusal)."""
        kind, count = self.kinds.most_common(1)[0]
        counted = sum(n for k, n in self.kinds.items() if kind == "text" or k != "text")
        return kind, count >= SHARE * counted


def _count(target: _Field, turn: str, new: Any, prior: Any, before: Mapping[str, Any],
           leaves: Mapping[str, list[str]], arguments: Mapping[str, Any], answer: Any = _ABSENT) -> None:
    found, parts = _explain(new, prior, before, leaves, arguments, answer)
    target.checked.append(turn)
    target.new_key += prior is _ABSENT
    target.changed += prior is not _ABSENT and new != prior
    for candidate in found:
        target.held[candidate].append(turn)
    for shape_key, candidates in parts.items():
        target.parts[shape_key].update(candidates)
        target.shapes[shape_key[0]] += 1


def aliases(selectors: Mapping[str, tuple[str, str]]) -> dict[str, list[str]]:
    """Per argument name, the id keys the tools it selects with key their records by (`order_id` names the record
    `get_order_details` shows as `id` and `cancel_order` answers as `order_id`): one entity under several keys."""
    out: dict[str, list[str]] = defaultdict(list)
    for argument, key in sorted(selectors.values()):
        if key not in out[argument]:
            out[argument].append(key)
    return dict(out)


RecordKey = tuple[str, str]


class _Learner:
    """One pass over the evidence counting each selecting tool's relations (see the module doc)."""

    def __init__(self, evidence: Sequence[Evidence], config: WriteConfig, *, readers: set[str] | None,
                 store: RecordStore, selectors: Mapping[str, tuple[str, str]],
                 effects: Sequence[ToolRule] = (), summaries: EpisodeSummaries | None = None) -> None:
        self.config = config
        self.summaries = summaries  # observations' layouts read once (`worldbook.summaries`)
        self.effects: dict[str, list[ToolRule]] = defaultdict(list)  # executable effect rules, applied as calls go
        for rule in effects:
            if rule.executable and rule.selector is not None:
                self.effects[rule.tool].append(rule)
        self.selectors = dict(selectors)
        self.aliases = aliases(self.selectors)
        self.readers = readers
        self.store = store
        self.tools: dict[str, _Tool] = defaultdict(_Tool)

    def _keys(self, argument: str, key: str, ident: str) -> list[RecordKey]:
        return [record_key(k, ident) for k in dict.fromkeys([key, *self.aliases.get(argument, ())])]

    def _before(self, records: Mapping[RecordKey, dict[str, Any]], argument: str, key: str,
                ident: str) -> tuple[RecordKey, dict[str, Any]] | None:
        """The record a call names: the episode's last version (under the selector's key or an alias of its
        argument: the one shown last), else the store's initial version."""
        keys = self._keys(argument, key, ident)
        found = [k for k in keys if k in records]
        if found:  # `records` keeps the order of updates
            order = {k: i for i, k in enumerate(records)}
            best = max(found, key=lambda k: order[k])
            return best, records[best]
        for rkey in keys:
            record = self.store.get(*rkey)
            if record is not None:
                return rkey, record
        return None

    def _reads(self, item: Evidence, write: tuple[str, dict[str, Any], dict[str, Any], str, str]) -> bool:
        """Whether this call's answer is a read of the record a pending write acted on: a reader's answer (before
        the readers are known, the first pass: any other tool's)."""
        return item.action in self.readers if self.readers is not None else item.action != write[0]

    def run(self, evidence: Sequence[Evidence]) -> None:
        for items in group_by_episode(evidence).values():
            self._episode(items)
        for tool in self.tools.values():  # text-answered writes: only the success text's turns wrote
            if tool.kinds and tool.main_kind()[0] == "text":
                success = tool.texts.most_common(1)[0][0]
                for turn, text, before, after, arguments in tool.deferred:
                    if answer_form(text, arguments) == success:
                        self._changes(tool, turn, before, after, arguments)
            tool.deferred.clear()

    def _episode(self, items: Sequence[Evidence]) -> None:
        records: dict[RecordKey, dict[str, Any]] = {}
        pending: dict[RecordKey, tuple[str, dict[str, Any], dict[str, Any], str, str]] = {}
        for item in items:
            arguments = arguments_of(item)
            value = parse_structured(item.observation)
            selector = self.selectors.get(item.action)
            shown = list(own_records(value)) if value is not None else []
            showing = {record_key(k, i) for k, i, _ in shown}
            named = {str(v) for v in arguments.values() if isinstance(v, str | int)}
            for rkey in [k for k in pending if k[1] in named and not (k in showing and self._reads(item, pending[k]))]:
                del pending[rkey]  # another write named the record: its next read is not this one's effect
            wrote: tuple[RecordKey, dict[str, Any]] | None = None
            if selector is not None and item.action not in (self.readers or ()) and selector[0] in arguments:
                found = self._before(records, selector[0], selector[1], str(arguments[selector[0]]))
                if found is not None:
                    rkey, before = found
                    after = self._answered(item, arguments, value, before)
                    if after is None:
                        for alias in self._keys(selector[0], selector[1], rkey[1]):
                            pending[alias] = (item.action, arguments, before, item.turn_id, item.observation)
                    else:
                        wrote = (rkey, after)
            for key, ident, record in shown:
                rkey = record_key(key, ident)
                if rkey in pending and self._reads(item, pending[rkey]):
                    tool, args, before, turn, text = pending[rkey]
                    for other in [k for k, v in pending.items() if v[3] == turn]:
                        del pending[other]
                    self.tools[tool].deferred.append((turn, text, before, record, args))
                records.pop(rkey, None)
                records[rkey] = record
            if wrote is not None:
                records.pop(wrote[0], None)
                records[wrote[0]] = wrote[1]
            for rule in self.effects.get(item.action, ()):
                self._affect(records, rule, item, arguments, value)

    def _affect(self, records: dict[RecordKey, dict[str, Any]], rule: ToolRule, item: Evidence,
                arguments: Mapping[str, Any], value: Any) -> None:
        """An effect rule's changes to the record its argument names (the records then are as the call left them)."""
        assert rule.selector is not None
        given = arguments.get(rule.selector.argument)
        if given is None or {"answer_form": answer_form(item.observation, arguments)} not in rule.conditions:
            return
        found = self._before(records, rule.selector.argument, rule.selector.key, str(given))
        after = apply_changes(rule, found[1], arguments, value) if found is not None else None
        if found is not None and after is not None:
            records.pop(found[0], None)
            records[found[0]] = after

    def _answered(self, item: Evidence, arguments: dict[str, Any], value: Any,
                  before: dict[str, Any]) -> dict[str, Any] | None:
        """Count what the answer shows; the record after the call when the answer shows its new fields."""
        tool = self.tools[item.action]
        tool.turns.append(item.turn_id)
        if not isinstance(value, dict):
            tool.kinds["text"] += 1
            tool.texts[answer_form(item.observation, arguments)] += 1
            return None
        layout = layout_of(item.observation, self.summaries)
        if layout is not None:
            tool.layouts[layout] += 1
        tool.orders[tuple(value)] += 1
        whole = len(before.keys() & value.keys()) >= max(1, SHARE * len(before))
        tool.kinds["record" if whole else "fields"] += 1
        if whole:
            self._changes(tool, item.turn_id, before, value, arguments)
            return value
        leaves = _leaves(before)
        after = dict(before)
        for key, new in value.items():
            if key in before:
                _count(tool.changes[path_of([key])], item.turn_id, new, before[key], before, leaves, arguments)
                after[key] = new
            else:
                _count(tool.answer[path_of([key])], item.turn_id, new, _ABSENT, before, leaves, arguments)
        return after

    def _changes(self, tool: _Tool, turn: str, before: dict[str, Any], after: Mapping[str, Any],
                 arguments: Mapping[str, Any]) -> None:
        leaves = _leaves(before)
        for key, new in after.items():
            _count(tool.changes[path_of([key])], turn, new, before.get(key, _ABSENT), before, leaves, arguments)

    # -------------------------------------------------------------------------------------------- rules
    def _decide(self, path: str, counts: _Field) -> FieldChange | None:
        """The relation kept for one field (None: the field stays as it was)."""
        checked = len(counts.checked)
        held = counts.held
        need = max(self.config.min_support, self.config.share * checked)
        ranked = sorted(held, key=lambda c: (CHANGE_OPS.index(c[0]), -len(held[c]), str(c)))
        for candidate in ranked:
            if len(held[candidate]) >= need:
                parts = self._parts(counts, candidate)
                if parts is None:
                    continue
                if candidate == ("keep",):
                    return None
                fine = all(p.status == RuleStatus.SUPPORTED for p in parts)
                return _change(path, candidate, parts, len(held[candidate]), checked,
                               RuleStatus.SUPPORTED if fine else RuleStatus.TENTATIVE)
        everywhere = [c for c in ranked if len(held[c]) == checked]  # holds on every turn, but too few of them
        status = RuleStatus.TENTATIVE if everywhere else RuleStatus.CONFLICTED
        candidate = everywhere[0] if everywhere else max(held, key=lambda c: (len(held[c]), str(c)))
        if candidate == ("keep",) and everywhere:
            return None
        parts = self._parts(counts, candidate)
        if parts is None or (not parts and candidate[0] in ("object", "append") and
                             candidate[1:2] not in (("arg",), (ANSWER,))):
            candidate = max((c for c in held if c[0] == "set"), key=lambda c: (len(held[c]), c[1]))
            parts, status = [], RuleStatus.CONFLICTED
        return _change(path, candidate, parts, len(held[candidate]), checked, status)

    def _parts(self, counts: _Field, chosen: Candidate) -> list[FieldChange] | None:
        """How each key of an object / appended entry is built (None when some key has no relation at all)."""
        if chosen[0] not in ("object", "append") or chosen[1:2] in (("arg",), (ANSWER,)):
            return []
        shape = f"{chosen[0]}:{chosen[-1]}"
        total = counts.shapes[shape] // max(1, len(chosen[-1].split(",")))
        out = []
        for key in chosen[-1].split(","):
            candidates = counts.parts.get((shape, key), Counter())
            if not candidates:
                return None
            best = min(candidates, key=lambda c: (CHANGE_OPS.index(c[0]) if candidates[c] >= max(
                self.config.min_support, self.config.share * total) else len(CHANGE_OPS), -candidates[c], str(c)))
            supported = candidates[best] >= max(self.config.min_support, self.config.share * total)
            out.append(_change(path_of([key]), best, [], candidates[best], max(total, candidates[best]),
                               RuleStatus.SUPPORTED if supported else RuleStatus.TENTATIVE))
        return out

    def rules(self) -> list[ToolRule]:
        out = []
        for name, tool in sorted(self.tools.items()):
            rule = self._rule(name, tool)
            if rule is not None:
                out.append(rule)
        return out

    def _rule(self, name: str, tool: _Tool) -> ToolRule | None:
        changes = [c for path, counts in sorted(tool.changes.items()) if (c := self._decide(path, counts))]
        if not changes or not tool.turns:
            return None
        kind, consistent = tool.main_kind()
        layout = tool.layouts.most_common(1)[0][0] if tool.layouts else (", ", ": ", False)
        keys = list(tool.orders.most_common(1)[0][0]) if tool.orders else []
        answer = [c for path, counts in sorted(tool.answer.items())
                  if path in keys and (c := self._decide(path, counts)) is not None] if kind == "fields" else []
        response = ResponseSpec(kind=kind, keys=keys if kind != "text" else [], fields=answer,
                                text=tool.texts.most_common(1)[0][0] if kind == "text" else None,
                                item_separator=layout[0], key_separator=layout[1], ensure_ascii=layout[2])
        failed = sorted({t for path, counts in tool.changes.items() for c in changes if c.path == path
                         for t in set(counts.checked) - set(counts.held.get(_candidate(c), ()))})
        checked = {t for c in changes for t in tool.changes[c.path].checked}
        supporting = [t for t in tool.turns if t in checked and t not in set(failed)]
        statuses = [c.status for c in [*changes, *answer]]
        if RuleStatus.CONFLICTED in statuses or not consistent:
            status = RuleStatus.CONFLICTED
        elif all(s == RuleStatus.SUPPORTED for s in statuses) and len(supporting) >= self.config.min_support:
            status = RuleStatus.SUPPORTED
        else:
            status = RuleStatus.TENTATIVE
        argument, key = self.selectors[name]
        return ToolRule(
            id=f"write:{name}", tool=name, kind="write", selector=Selector(argument=argument, key=key),
            changes=changes, response=response, status=status, support=len(supporting),
            counterexamples=failed[: self.config.provenance_cap],
            provenance=RuleProvenance.capped(supporting, failed, cap=self.config.provenance_cap),
            description=f"{name}({argument}) acts on the record whose {key} is the argument; "
                        + "; ".join(f"{c.path}: {c.op}" for c in changes))


def _candidate(change: FieldChange) -> Candidate:
    """The counting key of a decided change (its relation without support or parts)."""
    if change.op in ("copy", "add", "sub", "remove", "sorted_arg"):
        return (change.op, change.argument)
    if change.op == "move":
        return ("move", change.argument, path_keys(change.source or "")[0])
    if change.op == "sum":
        return ("sum", change.argument, change.source)
    if change.op == "field":
        return ("field", change.source)
    if change.op == "set":
        return ("set", _key(change.value))
    if change.op == "append":
        if change.source == ANSWER and not change.argument and not change.fields:
            return ("append", ANSWER)
        return ("append", "arg", change.argument) if change.argument else \
            ("append", "obj", ",".join(p.path for p in change.fields))
    if change.op == "object":
        return ("object", ",".join(p.path for p in change.fields))
    return (change.op,)


def _writes(learner: _Learner) -> set[str]:
    """Tools whose calls changed a field the record had before, on at least `min_support` turns, by a relation the
    turns do not contradict: writes. A reader seen after an unobserved change looks conflicted, never consistent."""
    out = set()
    for name, tool in learner.tools.items():
        for path, counts in tool.changes.items():
            change = learner._decide(path, counts)
            if change is not None and change.status != RuleStatus.CONFLICTED and \
                    counts.changed >= learner.config.min_support and counts.new_key * 2 < len(counts.checked):
                out.add(name)
                break
    return out


# ------------------------------------------------------------------------------------------------ effects
# (turn, answer form, record before, record the next read showed, arguments, JSON answer)
_Sighting = tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any], Any]


class _Effects(_Learner):
    """Effects on *other* records than a write's own: per (tool, argument), the record the argument names (the
    episode's last version, else the store's) before the call against the next read of it (a reader's answer, or
    the whole-record answer of a write, but for the fields that write changes itself), when no other call named it
    in between, counted on the answer forms after which the record changed on at least half the turns
    (the forms of success; the relations may read the call's JSON answer: `upsert`, append its id)."""

    def __init__(self, evidence: Sequence[Evidence], config: WriteConfig, *, readers: set[str], store: RecordStore,
                 selectors: Mapping[str, tuple[str, str]], writes: Sequence[ToolRule]) -> None:
        super().__init__(evidence, config, readers=readers, store=store, selectors=selectors)
        self.own = {rule.tool: rule.selector.argument for rule in writes if rule.selector is not None}
        # writes answered with the whole record: a sighting of it too, but for the fields they change themselves
        self.showing = {rule.tool: {path_keys(c.path)[0] for c in rule.changes if c.op != "keep"} for rule in writes
                        if rule.response is not None and rule.response.kind == "record"}
        self.sightings: dict[tuple[str, str], list[_Sighting]] = defaultdict(list)
        self.id_keys: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)

    def run(self, evidence: Sequence[Evidence]) -> None:
        for items in group_by_episode(evidence).values():
            self._episode(items)

    def _named(self, records: Mapping[RecordKey, dict[str, Any]], order: Mapping[RecordKey, int],
               ident: str) -> tuple[RecordKey, dict[str, Any]] | None:
        """The record an argument value names: the episode's latest version under any id key, else the store's."""
        found = [k for k in self.store.keys_for(ident) if k not in records] + [k for k in order if k[1] == ident]
        shown = [k for k in found if k in records]
        if shown:
            best = max(shown, key=order.__getitem__)
            return best, records[best]
        for rkey in found:
            record = self.store.get(*rkey)
            if record is not None:
                return rkey, record
        return None

    def _episode(self, items: Sequence[Evidence]) -> None:
        records: dict[RecordKey, dict[str, Any]] = {}
        order: dict[RecordKey, int] = {}  # record key -> when it was last shown
        # first-seen order (a dict, not a set): records shown under two keys at one step tie in `_named`, and a
        # set's order would make the learned effects depend on the hash seed
        by_ident: dict[str, dict[RecordKey, None]] = defaultdict(dict)
        pending: dict[RecordKey, tuple[str, str, str, str, dict[str, Any], dict[str, Any], Any]] = {}
        for step, item in enumerate(items):
            arguments = arguments_of(item)
            value = parse_structured(item.observation)
            for key, ident, record in own_records(value) if value is not None else ():
                rkey = record_key(key, ident)
                waiting = pending.pop(rkey, None)
                if waiting is not None and item.action != waiting[0] and (
                        item.action in (self.readers or ()) or item.action in self.showing):
                    tool, argument, turn, form, before, args, answer = waiting
                    own = self.showing.get(item.action, set())
                    seen = {k: v for k, v in record.items() if k not in own}
                    self.sightings[(tool, argument)].append((turn, form, before, seen, args, answer))
                    self.id_keys[(tool, argument)][rkey[0]] += 1
                records[rkey], order[rkey] = record, step
                by_ident[rkey[1]][rkey] = None
            named = {str(v): name for name, v in arguments.items() if isinstance(v, str | int) and not isinstance(v, bool)}
            for rkey in [k for k in pending if k[1] in named]:
                del pending[rkey]  # another call named it: its next read is not the earlier call's effect
            form = answer_form(item.observation, arguments)
            for ident, name in named.items():
                if self.own.get(item.action) == name:
                    continue  # the write rule's own record
                found = self._named(records, {k: order[k] for k in by_ident.get(ident, ())}, ident)
                if found is not None:
                    pending[found[0]] = (item.action, name, item.turn_id, form, found[1], arguments,
                                         value if value is not None else _ABSENT)

    def rules(self) -> list[ToolRule]:
        out = []
        for (tool, argument), sightings in sorted(self.sightings.items()):
            rule = self._effect(tool, argument, sightings)
            if rule is not None:
                out.append(rule)
        return out

    def _effect(self, tool: str, argument: str, sightings: Sequence[_Sighting]) -> ToolRule | None:
        forms = Counter(s[1] for s in sightings)
        changed = Counter(form for _, form, before, after, _, _ in sightings
                          if any(before.get(k, _ABSENT) != v for k, v in after.items()))
        acting = sorted(f for f, n in changed.items() if n >= self.config.min_support and 2 * n >= forms[f])
        if not acting:
            return None
        counts: dict[str, _Field] = defaultdict(_Field)
        turns = []
        for turn, form, before, after, arguments, answer in sightings:
            if form in acting:
                turns.append(turn)
                leaves = _leaves(before)
                for key, new in after.items():
                    _count(counts[path_of([key])], turn, new, before.get(key, _ABSENT), before, leaves, arguments,
                           answer)
        changes = [c for path, fc in sorted(counts.items()) if (c := self._decide(path, fc))]
        supported = [c for c in changes if c.status == RuleStatus.SUPPORTED
                     and counts[c.path].changed >= self.config.min_support]
        if not supported:
            return None
        failed = sorted({t for c in changes for t in set(counts[c.path].checked) -
                         set(counts[c.path].held.get(_candidate(c), ()))})
        supporting = [t for t in turns if t not in set(failed)]
        fine = all(c.status == RuleStatus.SUPPORTED for c in changes) and len(supporting) >= self.config.min_support
        key = self.id_keys[(tool, argument)].most_common(1)[0][0]
        return ToolRule(
            id=f"effect:{tool}:{argument}", tool=tool, kind="effect", selector=Selector(argument=argument, key=key),
            changes=changes, conditions=[{"answer_form": form} for form in acting],
            status=RuleStatus.SUPPORTED if fine else RuleStatus.TENTATIVE, support=len(supporting),
            counterexamples=failed[: self.config.provenance_cap],
            provenance=RuleProvenance.capped(supporting, failed, cap=self.config.provenance_cap),
            description=f"{tool}({argument}) changes the record whose {key} is the argument, after answers of the "
                        f"form{'s' if len(acting) > 1 else ''} {', '.join(repr(f) for f in acting)}; "
                        + "; ".join(f"{c.path}: {c.op}" for c in changes))


def learn_tool_rules(evidence: Sequence[Evidence], config: WriteConfig | Any = None, *,
                     store: RecordStore | None = None, families: Mapping[str, str] | None = None,
                     summaries: EpisodeSummaries | None = None) -> list[ToolRule]:
    """Write rules for every tool whose calls change the record they select (see the module doc). `config` is a
    `WriteConfig` (anything else, e.g. the build's config, means the defaults). Linear passes: every selecting
    tool's relations against the episodes alone (which tools write), the entity store from the other tools'
    answers (`store`, built here when not given), the writes' relations against episodes and store, the effects
    on other records (`_Effects`), and where some effect executes the writes' relations again with the records as
    the effects left them; the look-up rules learn over the same store. `summaries`: per-episode pieces of an
    evidence list `evidence` is a subset of (`worldbook.summaries`; the cross-fit folds share them)."""
    settings = config if isinstance(config, WriteConfig) else WriteConfig()
    selectors, writes = learn_writes(evidence, settings, summaries=summaries)
    readers = {item.action for item in evidence} - writes
    if store is None:
        store = RecordStore.from_evidence(evidence, readers, families)
    learner = _Learner(evidence, settings, readers=readers, store=store, selectors=selectors, summaries=summaries)
    learner.run(evidence)
    rules = learner.rules()
    effects = _Effects(evidence, settings, readers=readers, store=store, selectors=selectors, writes=rules)
    effects.run(evidence)
    effect_rules = effects.rules()
    if any(rule.executable for rule in effect_rules):  # the writes again, their records as the effects left them
        learner = _Learner(evidence, settings, readers=readers, store=store, selectors=selectors, effects=effect_rules,
                           summaries=summaries)
        learner.run(evidence)
        rules = learner.rules()
    return rules + effect_rules + learn_lookup_rules(evidence, readers=readers, families=families, store=store)


def learn_writes(evidence: Sequence[Evidence], config: WriteConfig = WriteConfig(), *,
                 summaries: EpisodeSummaries | None = None) -> tuple[dict[str, tuple[str, str]], set[str]]:
    """(selectors, the tools that write): every selecting tool's relations counted against the episodes alone."""
    selectors = learn_selectors(evidence, summaries=summaries)
    probe = _Learner(evidence, config, readers=None, store=RecordStore(), selectors=selectors, summaries=summaries)
    probe.run(evidence)
    return selectors, _writes(probe)


# ------------------------------------------------------------------------------------------------ applying
def _copied(value: Any) -> Any:
    return value if value is _ABSENT else copy.deepcopy(value)


def _from_answer(change: FieldChange, current: Any, answer: Any) -> Any:
    """An effect's value read from the call's answer: the object with its records upserted, the list with its id."""
    if answer is _ABSENT:
        return _ABSENT
    if change.op == "upsert":
        merged = _upserted(current, answer) if isinstance(current, dict) else None
        return _ABSENT if merged is None else merged
    ident = _answer_id(answer)
    return _ABSENT if ident is _ABSENT or not isinstance(current, list) else [*current, ident]


def _value(change: FieldChange, before: Mapping[str, Any], current: Any, arguments: Mapping[str, Any],
           answer: Any = _ABSENT) -> Any:
    """A change's new value (`_ABSENT` when the arguments, the record or the answer do not give it)."""
    if change.op == "upsert" or (change.op == "append" and change.source == ANSWER):
        return _from_answer(change, current, answer)
    given = arguments.get(change.argument, _ABSENT) if change.argument else _ABSENT
    op = change.op
    if op == "set":
        return copy.deepcopy(change.value)
    if op == "copy":
        return _copied(given)
    if op == "keep":
        return current
    if op == "field":
        return _copied(_get(before, path_keys(change.source or "")))
    if op in ("add", "sub"):
        if not (_number(current) and _number(given)):
            return _ABSENT
        return current + given if op == "add" else current - given
    if op == "sum":
        keys = path_keys(change.source or "")
        items = _get(before, keys[:-1])
        return _total([x for x in items if _named(x, given)], keys[-1]) if isinstance(items, list) and \
            given is not _ABSENT else _ABSENT
    if op == "sorted_arg":
        return sorted(given) if isinstance(given, list) else _ABSENT
    if op == "remove":  # nothing to remove: the call is refused (learned removals always removed something)
        kept: Any = _without(current, given) if isinstance(current, dict) and given is not _ABSENT else \
            [x for x in current if not _named(x, given)] if isinstance(current, list) and given is not _ABSENT \
            else _ABSENT
        return _ABSENT if kept is _ABSENT or len(kept) == len(current) else kept
    if op == "move":
        source = _get(before, path_keys(change.source or ""))
        return [copy.deepcopy(x) for x in source if _named(x, given)] if isinstance(source, list) and \
            given is not _ABSENT else _ABSENT
    built: Any = given
    if change.fields:
        parts = {path_keys(p.path)[-1]: _value(p, before, _ABSENT, arguments) for p in change.fields}
        built = _ABSENT if any(v is _ABSENT for v in parts.values()) else parts
    if op == "object" or built is _ABSENT:
        return built
    return [*current, built] if isinstance(current, list) else _ABSENT  # append


def apply_changes(rule: ToolRule, before: Mapping[str, Any], arguments: Mapping[str, Any],
                  answer: Any = None) -> dict[str, Any] | None:
    """The record after the call: `before` with the rule's changes (None when one cannot be computed here).
    `answer`: the call's JSON answer, which effect rules' changes may read (None: not known)."""
    after = copy.deepcopy(dict(before))
    for change in rule.changes:
        keys = path_keys(change.path)
        current = _get(before, keys)
        new = _value(change, before, current, arguments, _ABSENT if answer is None else answer)
        if new is _ABSENT:
            return None
        target = after
        for key in keys[:-1]:
            target = target.setdefault(key, {})
            if not isinstance(target, dict):
                return None
        target[keys[-1]] = new
    return after


def render_response(rule: ToolRule, before: Mapping[str, Any], after: Mapping[str, Any],
                    arguments: Mapping[str, Any]) -> str | None:
    """What the call answers, in the tool's own layout (None when a field of it cannot be computed)."""
    response = rule.response
    if response is None:
        return None
    if response.kind == "text":
        return fill_slots(response.text or "", arguments)
    layout = (response.item_separator, response.key_separator, response.ensure_ascii)
    if response.kind == "record":
        order = [k for k in response.keys if k in after] + [k for k in after if k not in response.keys]
        return dump_layout({k: after[k] for k in order}, layout)
    built = {path_keys(c.path)[0]: c for c in response.fields}
    out: dict[str, Any] = {}
    for key in response.keys:
        if key in after:
            out[key] = after[key]
        elif key in built:
            value = _value(built[key], before, _ABSENT, arguments)
            if value is _ABSENT:
                return None
            out[key] = value
        else:
            return None
    return dump_layout(out, layout)
