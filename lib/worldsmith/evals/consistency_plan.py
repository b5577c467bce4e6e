"""What a consistency check probes, read from a worldbook alone: which tools read and which write, the argument
that names the entity each call is about, the ids to ask for (seen and never seen), and the write -> read pairs
whose records agree in the recordings.

Nothing here knows a world's tool names: every role comes from the book's tool rules, the selectors
`worldbook.record_store.learn_selectors` learns, and the recorded turns themselves.

- a *write* is a tool with a `write` or `effect` rule, or one whose recorded calls changed a record (on more than
  `CHANGE_SHARE` of them: a record shown again changed, nothing else having named it), or a new record (an identified object whose id nothing earlier in the episode
  named) answered to a call that named no id of its own;
- a *read* is any other tool with a query, projection or empty rule, or one that answered identified records on
  at least half of its JSON answers, or one whose calls name an entity (an id argument); the rest (a `cd`, a
  pressure gauge) are *other*: only the spelling invariant is checked on them;
- a tool's *id argument* is its learned selector, else the argument whose recorded values are most often the id
  of a record some answer showed; only id-like keys (`id`, `*_id`, `*_number`, `*_code`, ...) count as ids;
- a tool *answers about the id* (invariant 2 applies to it) when every recorded answer holding records of its
  selector's key holds the asked id among them;
- a write -> read pair *agrees* when, in the same episode, the read of the id the write answered with (nothing
  writing it in between) showed the same values on some fields in every recorded instance: those fields.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.sim.sources.unseen import UnseenEntities
from worldsmith.worldbook.induce import group_by_episode
from worldsmith.worldbook.model import Evidence, Worldbook
from worldsmith.worldbook.record_store import (
    ENTITY_ID,
    RecordStore,
    arguments_of,
    iter_records,
    learn_selectors,
    own_records,
    parse_structured,
)

__all__ = ["ID_FIELD", "MIN_BORROWED_FIELDS", "ProbePlan", "ToolProfile", "WritePair", "perturb_id", "plan_probes",
           "recorded_records", "without_id"]

MIN_BORROWED_FIELDS = 3  # a record with fewer other fields than this may be another's without being copied

ID_FIELD = re.compile(rf"({ENTITY_ID}|_number$|_code$)")  # an entity's id, not a name or a path
ABOUT_SHARE = 0.9  # a tool answers about the asked id when its recordings did on this share of checkable turns
AGREE_SHARE = 0.8  # a write -> read pair agrees when its field agreement held on this share of instances
CHANGE_SHARE = 0.1  # a tool writes when its calls showed a change on more than this share of them (not one slip)
READ_RULES = frozenset({"query", "projection", "empty"})
WRITE_RULES = frozenset({"write", "effect"})


@dataclass(frozen=True)
class WritePair:
    """A write and a later read of the record it answered with, and the fields the recordings show equal."""

    write: str
    read: str
    fields: tuple[str, ...]
    instances: int


@dataclass
class ToolProfile:
    """One tool's role and how to call it, as the book's recordings show."""

    name: str
    role: str  # "read", "write" or "other"
    why: str  # what made it so (a rule kind, a recorded change, a record shown)
    id_argument: str | None = None
    id_key: str | None = None  # the answers' record key that holds the id (invariant 2), when it is checked
    answers_about_id: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)  # recorded argument objects, distinct, in order

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "why": self.why, "id_argument": self.id_argument,
                "id_key": self.id_key, "answers_about_id": self.answers_about_id, "recorded_calls": len(self.calls)}


@dataclass
class ProbePlan:
    """The tools, the ids per id argument (seen in the recordings and never seen) and the agreeing pairs."""

    tools: dict[str, ToolProfile]
    seen_ids: dict[str, list[Any]]  # id argument -> ids the recordings named, in first-seen order
    unseen_ids: dict[str, list[Any]]  # id argument -> ids shaped like those, named nowhere in the recordings
    pairs: dict[tuple[str, str], WritePair]
    # id key -> a recorded record's fields but its id (canonical JSON) -> that record's id: what an answer about
    # another id that copies a recorded record with the id swapped in is recognised by (`consistency_checks.borrowed`)
    recorded: dict[str, dict[str, str]] = field(default_factory=dict)
    # what the evidence shows for an id that does not exist (`sim.sources.unseen`): an answer in that form says "not
    # found"; another error (a bad access token) says nothing of existence
    unseen: UnseenEntities | None = None

    def absent(self, tool: str, key: str | None, ident: Any, answer: str) -> bool:
        """Whether `answer` says `ident` does not exist (`UnseenEntities.says_absent`: the learned "does not exist"
        answer of `tool` or of tools of kind `key`; with none learned, any answer that shows no record and is not a
        refusal about another argument: the invariant's plain reading)."""
        return self.unseen is None or self.unseen.says_absent(tool, str(ident), answer, key)

    def tools_of(self, role: str, argument: str | None = None) -> list[ToolProfile]:
        return [t for t in self.tools.values() if t.role == role and t.calls
                and (argument is None or t.id_argument == argument)]

    def to_json(self) -> dict[str, Any]:
        return {"tools": [t.to_json() for t in self.tools.values()],
                "seen_ids": {k: len(v) for k, v in self.seen_ids.items()},
                "unseen_ids": {k: len(v) for k, v in self.unseen_ids.items()},
                "agreeing_pairs": [{"write": p.write, "read": p.read, "fields": list(p.fields),
                                    "instances": p.instances} for p in self.pairs.values()]}


def recorded_records(evidence: Sequence[Evidence]) -> dict[str, dict[str, str]]:
    """Per id key, every recorded record of at least `MIN_BORROWED_FIELDS` other fields, by its fields but the id
    (canonical JSON), mapped to its id (`ProbePlan.recorded`)."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for item in evidence:
        value = parse_structured(item.observation)
        if value is None:
            continue
        for key, ident, record in own_records(value):
            if len(record) > MIN_BORROWED_FIELDS:
                out[key].setdefault(without_id(record, key), str(ident))
    return dict(out)


def without_id(record: Mapping[str, Any], key: str) -> str:
    """A record's fields but its id `key`, as canonical JSON."""
    return json.dumps({k: v for k, v in record.items() if k != key}, sort_keys=True, default=str)


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _leaves(value: Any) -> set[str]:
    """Every scalar of a JSON value (not its keys), as text."""
    out: set[str] = set()
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif _scalar(node):
            out.add(str(node))
    return out


_TOKEN = re.compile(r"[^\s,;:()\[\]{}'\"]+")


def _named_by_answer(observation: str, value: Any) -> set[str]:
    """What an answer names: its JSON scalars, or a text's tokens (with a trailing full stop dropped)."""
    if value is not None:
        return _leaves(value)
    return {token.rstrip(".") for token in _TOKEN.findall(observation)}


def _top_records(value: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(id key, id, record) of the answer's own records: the whole answer, or the items of a list answer (nested
    records are parts, shown differently by different tools: an order's items are not the product's variants)."""
    nodes = value if isinstance(value, list) else [value]
    out = []
    for node in nodes:
        if isinstance(node, dict):
            own = next(((str(k), str(v)) for k, v in node.items() if _scalar(v) and ID_FIELD.search(str(k))), None)
            if own is not None:
                out.append((own[0], own[1], node))
    return out


def _changes_and_creations(evidence: Sequence[Evidence]) -> tuple[Counter[str], Counter[str]]:
    """Per tool, from the recordings: the changes it made (a record shown again with a field changed, blamed on
    the one tool that named the record in its arguments since it was last shown (and did not show it), else on
    the tool whose answer shows it: a cancel answering the cancelled order), and the records it created (its answer is one record whose
    id nothing earlier in the episode named, nor the call itself, to a call with arguments: a new order, a new
    ticket; a call without arguments reads the one thing it can, an account)."""
    changed: Counter[str] = Counter()
    created: Counter[str] = Counter()
    for items in group_by_episode(evidence).values():
        last: dict[tuple[str, str], dict[str, Any]] = {}
        since: dict[str, set[str]] = defaultdict(set)  # id -> tools that named it since it was last shown
        named_before: set[str] = set()
        for item in items:
            value = parse_structured(item.observation)
            named = _leaves(arguments_of(item))
            top = _top_records(value) if isinstance(value, dict) else []
            if named and top and top[0][1] not in named_before and top[0][1] not in named:
                created[item.action] += 1
            shown = _top_records(value)
            for key, ident, record in shown:
                before = last.get((key, ident))
                if before is not None and any(before[k] != record[k] for k in before.keys() & record.keys()):
                    blamed = since.get(ident, set()) - {item.action} or {item.action}
                    if len(blamed) == 1:
                        changed[next(iter(blamed))] += 1
                last[(key, ident)] = record
                since.pop(ident, None)
            for ident in named & {ident for _, ident in last} - {ident for _, ident, _ in shown}:
                since[ident].add(item.action)  # what its own answer showed is as the call left it
            named_before |= named | _named_by_answer(item.observation, value)
    return changed, created


def _record_ids(evidence: Iterable[Evidence]) -> dict[str, set[str]]:
    """Id key -> every id (as text) a recorded answer showed under it (id-like keys only)."""
    out: dict[str, set[str]] = defaultdict(set)
    for item in evidence:
        value = parse_structured(item.observation)
        for key, ident, _ in iter_records(value) if value is not None else ():
            if ID_FIELD.search(key):
                out[key].add(str(ident))
    return out


def _id_argument(tool: str, calls: Sequence[dict[str, Any]], selectors: dict[str, tuple[str, str]],
                 record_ids: dict[str, set[str]]) -> tuple[str | None, str | None]:
    """(argument, key): the learned selector when its key is id-like, else the argument whose recorded values are
    most often a record's id (on at least half of the calls)."""
    if tool in selectors and ID_FIELD.search(selectors[tool][1]):
        return selectors[tool]
    votes: Counter[tuple[str, str]] = Counter()
    for arguments in calls:
        for name, value in arguments.items():
            if _scalar(value):
                for key, ids in record_ids.items():
                    if str(value) in ids:
                        votes[(name, key)] += 1
    if not votes:
        return None, None
    (name, key), count = max(votes.items(), key=lambda kv: (kv[1], kv[0]))
    return (name, key) if count * 2 >= len(calls) else (None, None)


def _answers_about(items: Sequence[Evidence], argument: str, key: str) -> bool:
    """Whether the recorded answers holding records under `key` hold the asked id among them (`ABOUT_SHARE`)."""
    checked = held = 0
    for item in items:
        asked = arguments_of(item).get(argument)
        value = parse_structured(item.observation)
        ids = {str(i) for k, i, _ in iter_records(value) if k == key} if value is not None else set()
        if _scalar(asked) and ids:
            checked += 1
            held += str(asked) in ids
    return checked > 0 and held >= ABOUT_SHARE * checked


def _roles(book: Worldbook, by_tool: dict[str, list[Evidence]]) -> dict[str, tuple[str, str]]:
    """tool -> (role, why)."""
    kinds: dict[str, set[str]] = defaultdict(set)
    for rule in book.tool_rules:
        kinds[rule.tool].add(rule.kind)
    changed, created = _changes_and_creations(book.evidence)
    out: dict[str, tuple[str, str]] = {}
    for tool, items in by_tool.items():
        json_answers = [v for v in (parse_structured(i.observation) for i in items) if v is not None]
        with_records = sum(any(True for _ in iter_records(v)) for v in json_answers)
        if kinds[tool] & WRITE_RULES:
            out[tool] = ("write", f"{'/'.join(sorted(kinds[tool] & WRITE_RULES))} rule")
        elif changed[tool] > CHANGE_SHARE * len(items):
            out[tool] = ("write", f"answered a changed record on {changed[tool]} recorded turns")
        elif created[tool] and not kinds[tool] & READ_RULES:
            out[tool] = ("write", f"answered a new record on {created[tool]} recorded turns")
        elif kinds[tool] & READ_RULES:
            out[tool] = ("read", f"{'/'.join(sorted(kinds[tool] & READ_RULES))} rule")
        elif json_answers and with_records * 2 >= len(json_answers):
            out[tool] = ("read", f"answered records on {with_records} of {len(json_answers)} JSON answers")
        else:
            out[tool] = ("other", "no rule, record or change recorded")
    return out


def _distinct(values: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for value in values:
        text = repr(sorted(value.items(), key=lambda kv: kv[0]))
        if text not in seen:
            seen.add(text)
            out.append(value)
    return out


def _record_with(value: Any, ident: Any) -> dict[str, Any] | None:
    """The first record of an answer whose own id is `ident`."""
    if value is None:
        return None
    return next((record for _, i, record in own_records(value) if str(i) == str(ident)), None)


def _agreeing_pairs(evidence: Sequence[Evidence], tools: dict[str, ToolProfile]) -> dict[tuple[str, str], WritePair]:
    """Write -> read pairs whose records agree on some fields in every (`AGREE_SHARE`) recorded instance."""
    seen: Counter[tuple[str, str]] = Counter()
    agreed: Counter[tuple[str, str]] = Counter()
    fields: dict[tuple[str, str], set[str]] = {}
    for items in group_by_episode(evidence).values():
        for index, item in enumerate(items):
            profile = tools.get(item.action)
            if profile is None or profile.role != "write" or profile.id_argument is None:
                continue
            ident = arguments_of(item).get(profile.id_argument)
            written = _record_with(parse_structured(item.observation), ident) if _scalar(ident) else None
            if written is None:
                continue
            for later in items[index + 1:]:
                other = tools.get(later.action)
                if other is None or str(arguments_of(later).get(other.id_argument or "")) != str(ident):
                    continue
                if other.role != "read":
                    break  # another write of the record in between: nothing to compare
                pair = (item.action, later.action)
                read = _record_with(parse_structured(later.observation), ident)
                seen[pair] += 1
                same = {k for k in written.keys() & read.keys() if written[k] == read[k]} if read else set()
                if same:
                    agreed[pair] += 1
                    fields[pair] = same if pair not in fields else fields[pair] & same
                break
    return {pair: WritePair(pair[0], pair[1], tuple(sorted(fields[pair])), seen[pair])
            for pair in seen if agreed[pair] >= AGREE_SHARE * seen[pair] and fields.get(pair)}


def perturb_id(value: Any, rng: random.Random, taken: set[str], charset: dict[str, str]) -> Any:
    """An id shaped like `value` (its prefix up to the last separator kept, and the letters before a number; each
    later digit, lower or upper case letter replaced by one of the same class from `charset`), named nowhere in
    `taken`; None when 50 tries fail."""
    text = str(value)
    cut = max((i + 1 for i, c in enumerate(text) if not c.isalnum()), default=0)
    letters = re.match(r"[A-Za-z]*(?=\d)", text[cut:])  # a letters-then-digits part keeps its letters (#O123, INV12)
    cut += letters.end() if letters else 0
    for _ in range(50):
        tail = "".join(rng.choice(charset[_kind(c)]) if _kind(c) in charset else c for c in text[cut:])
        candidate = text[:cut] + tail
        if isinstance(value, int) and (candidate.startswith("0") and len(candidate) > 1):
            continue
        if candidate != text and candidate not in taken:
            return int(candidate) if isinstance(value, int) else candidate
    return None


def _kind(char: str) -> str:
    if char.isdigit():
        return "digit"
    if char in string.ascii_lowercase:
        return "lower"
    if char in string.ascii_uppercase:
        return "upper"
    return "other"


def _charset(values: Sequence[Any]) -> dict[str, str]:
    """Per character class, the characters the ids use (hex ids stay hex)."""
    chars: dict[str, set[str]] = defaultdict(set)
    for value in values:
        for char in str(value):
            if _kind(char) != "other":
                chars[_kind(char)].add(char)
    defaults = {"digit": string.digits, "lower": string.ascii_lowercase, "upper": string.ascii_uppercase}
    return {kind: "".join(sorted(chars[kind])) if len(chars[kind]) >= 5 else defaults[kind] for kind in defaults}


def plan_probes(book: Worldbook, *, seed: int = 0, unseen_per_argument: int = 8) -> ProbePlan:
    """The probe plan of `book` (deterministic for a seed)."""
    by_tool: dict[str, list[Evidence]] = defaultdict(list)
    for item in book.evidence:
        if item.action:
            by_tool[item.action].append(item)
    selectors = learn_selectors(book.evidence)
    record_ids = _record_ids(book.evidence)
    roles = _roles(book, by_tool)
    tools: dict[str, ToolProfile] = {}
    for tool, items in by_tool.items():
        calls = _distinct(arguments_of(item) for item in items if isinstance(item.arguments, dict))
        argument, key = _id_argument(tool, calls, selectors, record_ids)
        role, why = roles[tool]
        about = argument is not None and key is not None and _answers_about(items, argument, key)
        tools[tool] = ToolProfile(tool, role, why, argument, key if about else None, about, calls)
    seen_ids: dict[str, list[Any]] = defaultdict(list)
    for profile in tools.values():
        if profile.id_argument is None:
            continue
        for arguments in profile.calls:
            value = arguments.get(profile.id_argument)
            if _scalar(value) and value not in seen_ids[profile.id_argument]:
                seen_ids[profile.id_argument].append(value)
    taken = {text for item in book.evidence for text in _leaves(arguments_of(item))} | set().union(*record_ids.values()) \
        if book.evidence else set()
    blob = "\n".join(item.observation for item in book.evidence)
    rng = random.Random(f"consistency-ids:{seed}")
    unseen_ids: dict[str, list[Any]] = {}
    for argument, values in sorted(seen_ids.items()):
        charset = _charset(values)
        made: list[Any] = []
        for _ in range(unseen_per_argument * 3):
            candidate = perturb_id(rng.choice(values), rng, taken, charset)
            if candidate is not None and str(candidate) not in blob and candidate not in made:
                made.append(candidate)
            if len(made) >= unseen_per_argument:
                break
        unseen_ids[argument] = made
    store = RecordStore.from_evidence(book.evidence)
    return ProbePlan(tools=tools, seen_ids=dict(seen_ids), unseen_ids=unseen_ids,
                     pairs=_agreeing_pairs(book.evidence, tools), recorded=recorded_records(book.evidence),
                     unseen=UnseenEntities(book.evidence, selectors, store, set()))
