"""Tool-API records as an answer source: writes answered with the learned changes, reads with the record as it is.

`RecordTracker` keeps, per episode, the last version of every record the episode showed (JSON answers read
as records by `worldbook.record_store.own_records`) and applies the book's supported write rules
(`Worldbook.tool_rules`, learned by `worldbook.writes`) to the record a write selects, and its supported effect
rules to the record another argument names, as it observes each call (a card the answer shows set in the user's
payment methods, the new order's id appended to the user's orders; only after answers of the forms the rule acts
on: a refusal changes nothing). It proposes:

- `record_write`: a write answered from the selected record (the episode's last version, else its initial
  version in the cross-episode entity store) with the learned changes applied, in the tool's own layout;
- `record_read`: a read of a record the episode has (changed since by a write the answer did not show, or
  shown earlier by another tool), in the read tool's layout;
- `record_store`: the first read of a record other construction episodes showed (all its fields stable
  across them), from the entity store;
- `record_absent`: the API's learned answer for an id that does not exist (`sim.sources.unseen`), for an id this
  episode was told does not exist, or one no answer or store showed that the evidence's rates say is absent;
- `record_invented`: a read (or a write) of an entity no answer or store showed that exists: its record built from
  the read tool's learned response schema (`UnseenEntities.invent`), the asked id echoed, and remembered like any
  answered record once committed.

The session's answers are its state (what an agent acting open loop relies on): `record_read`,
`record_absent` and `record_invented` are authoritative (`Answer.authoritative`): a record it answered is what
later reads return, a "not found" stays not found. A write is not: its learned refusals (preconditions) come
first, so routing picks among them and the write's answer as it does teacher-forced. And no answer about another entity is
let through: `veto` refuses any source's answer to a read or write whose own record is another id of the
selected kind.

The entity store (`worldbook.record_store.RecordStore`, `record_store`) is built once per harness here and shared
with the `lookups` source (`sim.sources.lookups`), which declares `requires=("records",)`.

Each proposal carries the records it read or changed (`CandidateAnswer.records`: key, before, after), which the
prediction's audit keeps. Like every tracker it proposes; the route table decides per tool.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, TrackerSource
from worldsmith.sim.sources.registry import answer_source
from worldsmith.sim.sources.unseen import Existence, UnseenEntities, unechoed
from worldsmith.worldbook.model import Evidence
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
    top_record,
)
from worldsmith.worldbook.summaries import EpisodeSummaries
from worldsmith.worldbook.toolrules import ToolRule
from worldsmith.worldbook.writes import aliases, answer_form, apply_changes, render_response

__all__ = ["RECORD_SOURCES", "RecordTracker", "record_store"]

RECORD_SOURCES = ("record_write", "record_read", "record_store", "record_absent", "record_invented")
RecordKey = tuple[str, str]
_WHOLE_SHARE = 0.8  # a read answers with the whole record when its answer is the selected record this often


def _record_entry(key: RecordKey, before: Any, after: Any) -> dict[str, Any]:
    return {"key": f"{key[0]}={key[1]}", "before": before, "after": after}


def _effectful(evidence: Sequence[Evidence], known: set[str], reads: Collection[str] = frozenset()) -> set[str]:
    """Tools (besides `known` ones) that changed what they named: a record they named was shown differently after
    their call than before it, on at least half the times they alone named a record shown before (one pass). A
    change is laid to a call only when no other call named the record, or a record nested in it (a card inside its
    user), in between: a read between a write and the next read of the record is not blamed for the write's change
    (nor is a write, for a read's), nor for what the next call, not one of the `reads`, shows in its own answer.
    What a call's own answer showed is as the call left it."""
    from worldsmith.worldbook.induce import group_by_episode

    named: Counter[str] = Counter()
    blamed: Counter[str] = Counter()
    for items in group_by_episode(evidence).values():
        last: dict[str, Any] = {}  # id -> its record as last shown
        since: dict[str, set[str]] = defaultdict(set)  # id -> tools that named it since it was last shown
        for item in items:
            value = parse_structured(item.observation)
            found = [(str(ident), record) for _, ident, record in own_records(value)] if value is not None else []
            callers = {ident: _named_since(since, last.get(ident)) | since.get(ident, set()) for ident, _ in found}
            if item.action not in reads:  # a call that is not a read may have changed what its own answer shows
                for ident in {str(v) for v in arguments_of(item).values() if isinstance(v, str | int)} & callers.keys():
                    callers[ident].add(item.action)
            for ident, record in found:
                tools = callers[ident]
                if ident in last and len(tools) == 1 and not tools <= known:
                    tool = next(iter(tools))
                    named[tool] += 1
                    blamed[tool] += any(last[ident][k] != record[k] for k in last[ident].keys() & record.keys())
                last[ident] = record
            for ident, _ in found:
                since.pop(ident, None)
            shown = {ident for ident, _ in found}
            for argument in arguments_of(item).values():
                if isinstance(argument, str | int) and not isinstance(argument, bool) and str(argument) in last \
                        and str(argument) not in shown:
                    since[str(argument)].add(item.action)
    return {tool for tool, count in named.items() if blamed[tool] * 2 >= count and blamed[tool] > 0}


def _named_since(since: Mapping[str, set[str]], record: Any) -> set[str]:
    """The tools that named a record nested in `record` (as last shown) since it was shown."""
    if not since or record is None:
        return set()
    return {tool for _, inner, _ in own_records(record) for tool in since.get(str(inner), ())}


def _own_top(value: Any, argument: Any) -> bool:
    """Whether the whole answer is the record the argument names by its own identifier (its first one): an order
    answered by `place_order(user_id)` names the user, but is not the user's record."""
    if top_record(value, argument) is None:
        return False
    own = next(iter(own_records(value)), None)
    return own is not None and own[2] is value and str(own[1]) == str(argument)


def _wrapper(value: Any) -> str | None:
    """The key of an answer that is one record in a wrapper (`{"invoice": {...}}`), else None."""
    if isinstance(value, dict) and len(value) == 1:
        key, inner = next(iter(value.items()))
        return str(key) if isinstance(inner, dict) else None
    return None


def record_store(evidence: Sequence[Evidence], tool_rules: Sequence[ToolRule] = ()) -> RecordStore:
    """The record store of a book's evidence: the tools that write, as its write rules name them, show no initial
    versions (every other tool's answers are versions: as the build's tools stage took them)."""
    writes = {rule.tool for rule in tool_rules if rule.kind == "write"}
    return RecordStore.from_evidence(evidence, {item.action for item in evidence} - writes)


class RecordTracker:
    """Records of one episode, the book's write rules and the entity store (see the module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = (), tool_rules: Sequence[ToolRule] = (),
                 store: RecordStore | None = None, *, summaries: EpisodeSummaries | None = None) -> None:
        """`store`: the record store of `evidence` (`record_store`), built here when not given; `summaries`:
        per-episode pieces of an evidence list `evidence` is a subset of (`worldbook.summaries`)."""
        self.writes = {rule.tool: rule for rule in tool_rules if rule.kind == "write" and rule.selector is not None}
        self.executable = {tool for tool, rule in self.writes.items() if rule.executable}
        self.effects: dict[str, list[ToolRule]] = defaultdict(list)  # tool -> its executable effect rules
        for rule in tool_rules:
            if rule.kind == "effect" and rule.executable and rule.selector is not None:
                self.effects[rule.tool].append(rule)
        self.summaries = summaries
        self.selectors = learn_selectors(evidence, summaries=summaries)
        self.selectors.update({tool: (r.selector.argument, r.selector.key) for tool, r in self.writes.items()
                               if r.selector is not None})
        self.aliases = aliases(self.selectors)
        self.store = store if store is not None else record_store(evidence, tool_rules)
        self.layouts: dict[str, Layout] = {}
        self.reads: set[str] = set()  # tools whose answer is the selected record (its fields that tool shows)
        self.wraps: dict[str, str] = {}  # read tool -> the one key its answer wraps the record in (`{"invoice": …}`)
        self.shows: dict[str, frozenset[str]] = {}  # read tool -> the keys it always shows (a projection: a status)
        self._learn_reads(evidence)
        self.effectful = _effectful(evidence, self.reads | self.executable, self.reads)
        self.unseen = UnseenEntities(evidence, self.selectors, self.store, self.reads)
        self.reset()

    def _learn_reads(self, evidence: Sequence[Evidence]) -> None:
        layouts: dict[str, Counter[Layout]] = defaultdict(Counter)
        keysets: dict[str, Counter[frozenset[str]]] = defaultdict(Counter)
        whole: Counter[str] = Counter()
        wrapped: dict[str, Counter[str]] = defaultdict(Counter)  # tool -> the keys its answers wrap the record in
        answered: Counter[str] = Counter()
        for item in evidence:
            selector = self.selectors.get(item.action)
            if selector is None or item.action in self.writes:
                continue
            value = parse_structured(item.observation)
            arguments = arguments_of(item)
            if value is None or selector[0] not in arguments:
                continue
            answered[item.action] += 1
            wrapper = _wrapper(value)
            if _own_top(value, arguments[selector[0]]):
                whole[item.action] += 1
                keysets[item.action][frozenset(value)] += 1
            elif wrapper is not None and _own_top(value[wrapper], arguments[selector[0]]):
                whole[item.action] += 1
                wrapped[item.action][wrapper] += 1
                keysets[item.action][frozenset(value[wrapper])] += 1
            layout = layout_of(item.observation, self.summaries)
            if layout is not None:
                layouts[item.action][layout] += 1
        self.layouts = {tool: counts.most_common(1)[0][0] for tool, counts in layouts.items()}
        self.reads = {tool for tool, count in whole.items() if count >= _WHOLE_SHARE * answered[tool]}
        self.wraps = {tool: key for tool, counts in wrapped.items() if tool in self.reads
                      for key, count in counts.most_common(1) if count >= _WHOLE_SHARE * whole[tool]}
        for tool, counts in keysets.items():
            keys, count = counts.most_common(1)[0]
            if count >= _WHOLE_SHARE * sum(counts.values()):
                self.shows[tool] = keys

    # ------------------------------------------------------------------ episode state
    def reset(self, opening: str = "") -> None:
        self.records: dict[RecordKey, dict[str, Any]] = {}  # the order of updates: the last is the newest
        self.changed: set[RecordKey] = set()  # records a write changed in ways its answer did not show
        self.stale: set[str] = set()  # ids a call of an unknown effect named since their record was last shown
        self.absent: set[RecordKey] = set()  # records the episode was answered do not exist
        self.partial: set[RecordKey] = set()  # records the episode saw only part of (nested, or a projection)
        self.present: set[RecordKey] = set()  # entities a call answered data about without showing their record
        self.touched: set[str] = set()  # ids a call of a tool that is not a read named: they may have come or gone
        self.links: dict[str, dict[str, Any]] = {}  # id -> fields it takes from the invented record that lists it
        self.texts: list[str] = [opening]  # what the episode was told and answered: where an id is listed

    def _keys(self, tool: str, ident: Any) -> list[RecordKey]:
        argument, key = self.selectors[tool]
        return [record_key(k, ident) for k in dict.fromkeys([key, *self.aliases.get(argument, ())])]

    def _selected(self, tool: str, arguments: Mapping[str, Any]) -> tuple[RecordKey, dict[str, Any], str] | None:
        """(key, record, where from) of the record a call names: the episode's newest version under the selector's
        key or an alias of its argument, else the store's initial version."""
        selector = self.selectors.get(tool)
        if selector is None or selector[0] not in arguments:
            return None
        keys = self._keys(tool, arguments[selector[0]])
        found = [k for k in keys if k in self.records]
        if found:
            order = {k: i for i, k in enumerate(self.records)}
            best = keys[0] if keys[0] in self.records and tool not in self.writes else max(found, key=order.__getitem__)
            return best, self.records[best], "episode"
        # A read that shows known fields only needs those stable (a search's `from_price` may vary across episodes
        # while the product's own fields do not); a write or a whole-record read needs every field stable.
        partial = tool not in self.writes and self.shows.get(tool) is not None
        for rkey in keys:
            stored = self.store.get(*rkey, stable_only=not partial)
            if stored is not None:
                return rkey, stored, "store"
        return None

    def _put(self, rkey: RecordKey, record: dict[str, Any]) -> None:
        self.records.pop(rkey, None)
        self.records[rkey] = record

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        value = parse_structured(observation)
        self.texts.append(unechoed(observation, arguments))
        self._existence(name, arguments, observation)
        named = {str(v) for v in arguments.values() if isinstance(v, str | int) and not isinstance(v, bool)}
        reported = {str(ident) for _, ident, _ in own_records(value)} if value is not None else set()
        selector = self._named(name, arguments)
        if selector is not None and observation == self.unseen.absent_answer(name, str(arguments[selector[0]]),
                                                                            selector[1]):
            reported.add(str(arguments[selector[0]]))
        # a call that names an id without reporting on it may have created or deleted it; one that reports is a sighting
        self.touched = (self.touched - reported) | (named - reported)
        if name in self.effectful:  # a call of unknown effect that changed what it named in the evidence
            self.stale.update(str(v) for v in arguments.values() if isinstance(v, str | int) and not isinstance(v, bool))
        updated = self._written(name, arguments, observation, value) if name in self.writes else None
        if value is not None:
            for key, ident, record in own_records(value):
                rkey = record_key(key, ident)
                known = self.records.get(rkey)  # a projection (a status read) updates what the episode knows of it
                whole = record is value or (name in self.wraps and isinstance(value, dict)
                                            and record is value.get(self.wraps[name]))
                if whole and not self._projection(name, key):
                    self.partial.discard(rkey)
                elif known is None:
                    self.partial.add(rkey)  # seen inside another answer, or through a projection: part of it
                self._put(rkey, {**known, **copy.deepcopy(record)} if known is not None and record.keys() < known.keys()
                          else copy.deepcopy(record))
                self.changed.discard(record_key(key, ident))
                self.absent.discard(record_key(key, ident))
                self.stale.discard(str(ident))
        if updated is not None:
            self.stale.discard(updated[0][1])
            self._put(updated[0], updated[1])
            if updated[2]:
                self.changed.add(updated[0])
        for rule in self.effects.get(name, ()):
            self._affected(rule, arguments, observation, value)

    def adopt(self, key: str, ident: str, record: dict[str, Any]) -> None:
        """An entity another source invented and answered (a query's fresh id): known in part from now on, its
        other fields invented on first read (`_whole`)."""
        rkey = record_key(key, ident)
        if rkey not in self.records:
            self._put(rkey, copy.deepcopy(record))
            self.partial.add(rkey)
        self.absent.discard(rkey)

    def _named(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        """(argument, id key) of the entity a call names: its selector, else an argument named as a kind of record
        the evidence shows an absent answer for (`get_user_payment_methods(user_id)`: a user)."""
        selector = self.selectors.get(name)
        if selector is not None:
            return selector if selector[0] in arguments else None
        return next(((argument, argument) for argument, value in arguments.items()
                     if argument in self.unseen.absent_by_key and isinstance(value, str | int)
                     and not isinstance(value, bool)), None)

    def _existence(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        """An answer that the named record does not exist: remembered (a record the episode had is gone)."""
        named = self._named(name, arguments)
        if named is None:
            return
        ident = str(arguments[named[0]])
        if observation != self.unseen.absent_answer(name, ident, named[1]):
            if parse_structured(observation) is not None:  # answered with data about it: it exists (its cards, its orders)
                self.present.add(record_key(named[1], ident))
            return
        for rkey in self._keys(name, ident) if name in self.selectors else [record_key(named[1], ident)]:
            self.absent.add(rkey)
            self.records.pop(rkey, None)
            self.changed.discard(rkey)

    def _affected(self, rule: ToolRule, arguments: Mapping[str, Any], observation: str, value: Any) -> None:
        """An effect rule's changes to the record its argument names, when the answer has a form it acts on (the
        record is then as the rule says, not stale)."""
        assert rule.selector is not None
        given = arguments.get(rule.selector.argument)
        if given is None or {"answer_form": answer_form(observation, arguments)} not in rule.conditions:
            return
        keys = [record_key(rule.selector.key, given), *(k for k in self.store.keys_for(given)
                                                         if k[0] != rule.selector.key)]
        rkey = next((k for k in keys if k in self.records), None)
        before = self.records[rkey] if rkey is not None else self.store.get(*keys[0])
        after = apply_changes(rule, before, arguments, value) if before is not None else None
        if after is not None:
            rkey = rkey or keys[0]
            self._put(rkey, after)
            self.changed.add(rkey)
            self.stale.discard(rkey[1])

    def _written(self, name: str, arguments: Mapping[str, Any], observation: str,
                 value: Any) -> tuple[RecordKey, dict[str, Any], bool] | None:
        """(key, the record after the write, whether the answer left some change unshown), from what it answered:
        a whole record is the new version; some fields update the record; a text is the learned success text or
        the write did not happen (a refusal)."""
        rule = self.writes[name]
        selected = self._selected(name, arguments)
        if selected is None or rule.response is None:
            return None
        rkey, before, _ = selected
        if isinstance(value, dict):
            if rule.response.kind == "record":
                return None  # `observe` reads the whole record from the answer
            known = {k: v for k, v in value.items() if k in before}
            after = apply_changes(rule, before, arguments) if rule.executable else None
            return rkey, {**(after if after is not None else before), **known}, after is not None
        if rule.executable and rule.response.kind == "text" and \
                answer_form(observation, arguments) == rule.response.text:
            after = apply_changes(rule, before, arguments)
            return (rkey, after, True) if after is not None else None
        return None

    # ------------------------------------------------------------------ proposals
    def propose(self, name: str, arguments: Mapping[str, Any], line: str = "") -> list[CandidateAnswer]:
        selector = self.selectors.get(name)
        if selector is None:  # a call that names an entity without selecting its record: only what was said of it
            named = self._named(name, arguments)
            rkey = record_key(named[1], arguments[named[0]]) if named is not None else None
            if rkey is None or rkey not in self.absent or rkey in self.records:
                return []
            return self._absent(name, rkey[1], f"{rkey[0]}={rkey[1]!r} was answered not to exist in this episode",
                                rkey[0])
        if selector[0] not in arguments:
            return []
        ident = str(arguments[selector[0]])
        keys = self._keys(name, ident)
        if any(k in self.absent for k in keys) and not any(k in self.records for k in keys):
            return self._absent(name, ident, f"{selector[1]}={ident!r} was answered not to exist in this episode")
        if name not in self.executable and name not in self.reads:
            return []  # a call whose answer the book cannot make (a create, a write with no rule): other sources
        found = self._propose_write(name, arguments) if name in self.executable else self._propose_read(name, arguments)
        if found or self._selected(name, arguments) is not None:
            return found
        return self._unseen(name, arguments, selector[1], ident)

    def _absent(self, name: str, ident: str, why: str, key: str | None = None) -> list[CandidateAnswer]:
        text = self.unseen.absent_answer(name, ident, key)
        return [CandidateAnswer("record_absent", text, notes=[why])] if text is not None else []

    def _unseen(self, name: str, arguments: Mapping[str, Any], key: str, ident: str) -> list[CandidateAnswer]:
        """A call naming an entity no answer of this episode and no stored record showed: absent, or invented."""
        decided = self.unseen.exists(name, key, ident, self.texts)
        if record_key(key, ident) in self.present:
            decided = Existence(True, "answered", None, 0)
        if not decided.exists:
            return self._absent(name, ident, decided.note(ident))
        reader = name if self.unseen.can_invent(name) and name not in self.writes else self._reader(key)
        if reader is None:
            return []
        record = self.unseen.invent(reader, key, arguments[self.selectors[name][0]], arguments, links=self.links)
        if record is None:
            return []
        rkey = record_key(key, ident)
        notes = [decided.note(ident), f"{key}={ident!r} invented from {reader}'s learned response schema "
                                      "(no answer or stored record showed it)"]
        if name in self.executable:
            rule = self.writes[name]
            after = apply_changes(rule, record, arguments)
            text = render_response(rule, record, after, arguments) if after is not None else None
            if text is None:
                return []
            return [CandidateAnswer("record_invented", text, rule=rule.id, notes=notes,
                                    records=[{**_record_entry(rkey, record, after), "origin": "invented"}])]
        layout = self.layouts.get(name)
        keys = self.shows.get(name)
        if layout is None:
            return []
        shown = {k: v for k, v in record.items() if keys is None or k in keys}
        return [CandidateAnswer("record_invented", self._render_read(name, shown, layout), notes=notes,
                                records=[{**_record_entry(rkey, None, record), "origin": "invented"}])]

    def veto(self, name: str, arguments: Mapping[str, Any], observation: str) -> str | None:
        """Why an answer to this call may not be given (None: it may): a call of the record `arguments` select
        answered with another record of that kind as its whole answer (or the one record a wrapper holds:
        `{"invoice": {...}}`), or, for a record neither the episode nor the store holds, with a recorded record of
        another entity and the asked id swapped in; or an answer that flips what this episode said of the entity's
        existence when nothing that could create or delete it named it since."""
        selector = self.selectors.get(name)
        if selector is None or selector[0] not in arguments:
            return None
        asked = str(arguments[selector[0]])
        flipped = self._flips(name, selector[1], asked, observation)
        if flipped is not None:
            return flipped
        value = parse_structured(observation)
        wrapper = _wrapper(value)
        if wrapper is not None:
            value = value[wrapper]  # the one record a wrapper holds
        if not isinstance(value, dict):
            return None
        own = next(iter(own_records(value)), None)
        if own is None or own[2] is not value or own[0] != selector[1]:
            return None
        if str(own[1]) != asked:
            return f"it answers about {own[0]}={own[1]!r}, not the {asked!r} asked"
        source = self.unseen.copied(own[0], asked, value)
        if source is None:
            return None
        known = self._selected(name, arguments)
        if known is not None and all(known[1].get(k, v) == v for k, v in value.items()):
            return None  # what this episode or the store holds of it: a record may equal another's but for its id
        return f"it is the recorded {own[0]}={source!r} with the asked id swapped in"

    def _flips(self, name: str, key: str, ident: str, observation: str) -> str | None:
        """Why an answer contradicts what the episode said of the entity's existence (None: it does not): "not found"
        for one it showed, or its record for one it said does not exist, with no call of another tool naming it
        since (a create or a delete may have)."""
        if ident in self.touched:
            return None
        rkey = record_key(key, ident)
        # with no learned absent form, only a read's answer can say so (a write's error may be about anything else)
        judged = self.unseen.absent_form(name) is not None or name in self.reads
        if (judged and (rkey in self.records or rkey in self.present)
                and self.unseen.says_absent(name, ident, observation)):
            return f"it says {key}={ident!r} does not exist, which this episode showed"
        value = parse_structured(observation)
        if rkey in self.absent and value is not None and any(
                str(found) == ident for _, found, _ in own_records(value)):
            return f"it shows {key}={ident!r}, which this episode answered does not exist"
        return None

    def _whole(self, rkey: RecordKey, record: dict[str, Any], arguments: Mapping[str, Any], *,
               invent: bool = True) -> tuple[dict[str, Any], str]:
        """(the episode's record of `rkey` with the fields a read of its kind shows, how: "as shown", "completed"
        or "invented"): an episode that saw part of a record (a status) completes it from the store, else
        (`invent`) from the response schema of a read of that kind (`UnseenEntities.invent`, what it knows kept)."""
        reader = self._reader(rkey[0])
        wanted = set(self.unseen.schemas[reader].keys) if reader is not None else set()
        if rkey not in self.partial or wanted <= record.keys():
            return record, "as shown"
        completed = self._completed(rkey, record, frozenset(wanted))
        if completed is not None:
            return completed, "completed"
        if not invent:
            return record, "as shown"
        assert reader is not None
        invented = self.unseen.invent(reader, rkey[0], rkey[1], arguments, base=record, links=self.links)
        return (invented, "invented") if invented is not None else (record, "as shown")

    def _projection(self, tool: str, key: str) -> bool:
        """Whether `tool` always shows fewer fields of a `key` record than the whole-record read does."""
        reader = self._reader(key)
        shows = self.shows.get(tool)
        return shows is not None and reader is not None and not set(self.unseen.schemas[reader].keys) <= shows

    def _reader(self, key: str) -> str | None:
        """A whole-record read tool of records keyed `key` (its response schema makes records of that kind)."""
        return next((tool for tool in sorted(self.reads) if self.selectors.get(tool, ("", ""))[1] == key
                     and self.unseen.can_invent(tool) and tool not in self.shows), None) or next(
            (tool for tool in sorted(self.reads) if self.selectors.get(tool, ("", ""))[1] == key
             and self.unseen.can_invent(tool)), None)

    def _propose_write(self, name: str, arguments: Mapping[str, Any]) -> list[CandidateAnswer]:
        rule = self.writes[name]
        selected = self._selected(name, arguments)
        if selected is None:
            return []
        rkey, before, where = selected
        if where == "episode":  # completed from the store only: a write's answer is judged by the route table
            before, _ = self._whole(rkey, before, arguments, invent=False)
        after = apply_changes(rule, before, arguments)
        text = render_response(rule, before, after, arguments) if after is not None else None
        if text is None:
            return []
        changed = ", ".join(f"{c.path} ({c.op})" for c in rule.changes)
        return [CandidateAnswer("record_write", text, rule=rule.id, records=[_record_entry(rkey, before, after)], notes=[
            f"{name} acts on {rkey[0]}={rkey[1]!r} ({'as this episode last showed it' if where == 'episode' else 'its initial version in the entity store'}); "
            f"tool rule {rule.id}: {changed}"])]

    def _render_read(self, name: str, shown: dict[str, Any], layout: Layout) -> str:
        """A read's answer: the record's fields it shows, in its wrapper where it has one, in its layout."""
        return dump_layout({self.wraps[name]: shown} if name in self.wraps else shown, layout)

    def _propose_read(self, name: str, arguments: Mapping[str, Any]) -> list[CandidateAnswer]:
        selected = self._selected(name, arguments)
        layout = self.layouts.get(name)
        if selected is None or layout is None:
            return []
        rkey, found, where = selected
        record: dict[str, Any] | None = found
        if rkey[1] in self.stale:
            return []  # a call whose effect the book does not know named it since: as shown may be as it was
        keys = self.shows.get(name)
        completed = invented = False
        if where == "episode" and rkey in self.partial:  # a record the episode saw part of: the rest from the store
            record, how = self._whole(rkey, found, arguments)  # or, where it lacks it, invented
            completed, invented = how == "completed", how == "invented"
        elif keys is not None and not keys <= found.keys() and where == "episode":
            record, completed = self._completed(rkey, found, keys), True
        if keys is not None and (record is None or not keys <= record.keys()):
            return []
        assert record is not None
        shown = {k: v for k, v in record.items() if keys is None or k in keys}  # in the record's order
        text = self._render_read(name, shown, layout)
        entry = [_record_entry(rkey, None, record)]
        if invented:
            return [CandidateAnswer("record_invented", text, records=[{**entry[0], "origin": "invented"}], notes=[
                f"{rkey[0]}={rkey[1]!r} as this episode knows it, the fields it never showed invented from "
                f"{name}'s learned response schema"])]
        if where == "store":
            return [CandidateAnswer("record_store", text, records=entry, notes=[
                f"{rkey[0]}={rkey[1]!r} as other construction episodes first showed it (every field stable)"])]
        why = "as a write changed it since it was shown" if rkey in self.changed else "as this episode last showed it"
        if completed:
            why += ", the fields it did not show as other construction episodes first showed them"
        return [CandidateAnswer("record_read", text, records=entry, notes=[f"{rkey[0]}={rkey[1]!r} {why}"])]

    def _completed(self, rkey: RecordKey, record: dict[str, Any], keys: frozenset[str]) -> dict[str, Any] | None:
        """The episode's version of a record that showed only part of it (a search listing a product's name and
        price) with the fields it lacks from the store's initial version, in the store's field order; None when a
        write changed it in ways not shown, or the store lacks a field (unknown, or unstable across episodes)."""
        stored = self.store.get(*rkey, stable_only=False)
        if rkey in self.changed or stored is None or not keys <= record.keys() | stored.keys():
            return None
        return {**{k: record.get(k, v) for k, v in stored.items()}, **record}

    def snapshot(self) -> dict[str, Any]:
        return {"records": sorted(f"{k}={v}" for k, v in self.records), "changed": sorted(f"{k}={v}" for k, v in
                                                                                            self.changed),
                "absent": sorted(f"{k}={v}" for k, v in self.absent),
                "write_rules": sorted(self.executable), "store": len(self.store)}


@answer_source("records", snapshot_key="records", answers=(
        Answer("record_write", rank=25, trusted=True),
        Answer("record_absent", rank=26, per_action=True, authoritative=True, fix_turns=False),
        Answer("record_read", rank=27, trusted=True, per_action=True, authoritative=True),
        Answer("record_invented", rank=29, per_action=True, authoritative=True, fix_turns=False),
        Answer("record_store", route="evidence:record_store", rank=135, per_action=True)))
def _records(context: SourceContext) -> AnswerSource:
    """Tool-API records: writes answered with their learned changes, reads of changed or known records."""
    return TrackerSource(RecordTracker(context.evidence, context.book.tool_rules if context.config.knowledge else (),
                                       summaries=context.summaries), gate=context.tracking)
