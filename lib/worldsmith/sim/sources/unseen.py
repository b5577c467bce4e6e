"""Entities the logs never showed: does one exist, how does the API say it does not, and what is its record.

An agent acting in a simulator names entities the construction logs never showed: an order id from its task,
an id the simulator itself answered earlier, an id it guessed. Answering such a call with another entity's
record (the nearest recorded answer with the id swapped in) makes the world contradict itself. This module
learns, from the book's evidence alone, what the records source (`sim.sources.records`) needs to answer it
consistently:

- **how the API answers an id that does not exist** (`absent_form`): per tool, the answer most calls of ids no
  evidence answer ever showed as a record got (the id as a slot: `Error: order {id} not found`), else the form
  other tools selecting the same kind of record use; only calls whose other arguments have values some answered
  call had count (a call with a bad access token is refused for the token: its answer is a *refusal*, which says
  nothing of the id, `says_absent`);
- **whether an id exists** (`exists`): the evidence's rate of found answers per tool (pooled over tools where a
  tool has few calls) for ids in three situations, the same situations a session is in: *listed* (an earlier
  answer or the task showed the id), *stored* (another episode showed its record) and *unlisted* (neither).
  An id the session answered about stays as answered (the records source remembers both kinds);
- **its record** (`invent`): from the read tool's learned response schema (the keys its answers show, in their
  order): the asked id echoed, fields the evidence shows equal to an argument taken from the arguments, other
  values drawn from the values the evidence shows for that field, with every identifier inside them replaced by
  a fresh one of the same shape (a drawn order never names another user or another order). Draws are seeded by
  the entity and the field, so two tools that show one field of one invented entity show the same value.

Nothing here is tuned to one world: every form, rate and value comes from the evidence.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
import string
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.worldbook.induce import group_by_episode
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.record_store import (
    OWN_ID,
    RecordStore,
    arguments_of,
    own_records,
    parse_structured,
    top_record,
)

__all__ = ["LISTED", "STORED", "UNLISTED", "Existence", "UnseenEntities", "mentions", "seeded", "slot_id",
           "unechoed"]

LISTED, STORED, UNLISTED = "listed", "stored", "unlisted"
MIN_CALLS = 3  # a tool's own rate speaks from this many calls in a situation; fewer: the rate pooled over tools
MIN_ABSENT = 2  # calls of ids never shown that an absent form needs
DERIVED_SHARE = 0.9  # a field equal to an argument this often is taken from the arguments
MIN_COPIED_FIELDS = 3  # a record with fewer other fields may equal another's without being a copy of it
_WORD = r"\w"  # a letter, digit or underscore of any script: what continues a token


def mentions(text: str, ident: str) -> bool:
    """Whether `text` shows `ident` as a whole token (not inside a longer word or number)."""
    if not ident:
        return False
    return re.search(rf"(?<!{_WORD}){re.escape(ident)}(?!{_WORD})", text) is not None


def unechoed(observation: str, arguments: Mapping[str, Any]) -> str:
    """What an answer tells beyond its own call: the values of the call's arguments taken out (an error that repeats a
    made-up id, `user no_such_quux not found`, lists nothing)."""
    for value in arguments.values():
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            observation = re.sub(rf"(?<!{_WORD}){re.escape(str(value))}(?!{_WORD})", " ", observation)
    return observation


def slot_id(text: str, ident: str) -> str:
    """`text` with each whole-token occurrence of `ident` as `{id}` (other braces doubled, so it renders back)."""
    escaped = text.replace("{", "{{").replace("}", "}}")
    return re.sub(rf"(?<!{_WORD}){re.escape(ident.replace('{', '{{').replace('}', '}}'))}(?!{_WORD})", "{id}",
                  escaped)


def _render(form: str, ident: str) -> str:
    return form.replace("{id}", ident).replace("{{", "{").replace("}}", "}")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _others_accepted(tool: str, selector: str, arguments: Mapping[str, Any],
                     accepted: Mapping[tuple[str, str], set[str]]) -> bool:
    """Whether every other argument of the call has a value some call of the tool that answered a record had: only
    then does the answer speak of the id (a call with a bad access token is refused for the token, not the id)."""
    return all(_text(given) in accepted[(tool, name)] for name, given in arguments.items()
               if name != selector and (tool, name) in accepted)


def _sightings(episodes: Mapping[str, Sequence[Evidence]], selectors: Mapping[str, tuple[str, str]]
               ) -> tuple[dict[str, set[str]], dict[tuple[str, str], set[str]]]:
    """(id -> the episodes whose answers showed its record, (tool, argument) -> the values of its calls that a
    record answered)."""
    shown: dict[str, set[str]] = defaultdict(set)
    accepted: dict[tuple[str, str], set[str]] = defaultdict(set)
    for episode, items in episodes.items():
        for item in items:
            value = parse_structured(item.observation)
            if value is None:
                continue
            for _, ident, _ in own_records(value):
                shown[str(ident)].add(episode)
            if item.action in selectors and next(iter(own_records(value)), None) is not None:
                for name, given in arguments_of(item).items():
                    accepted[(item.action, name)].add(_text(given))
    return shown, accepted


def _shows_record(value: Any, ident: str) -> bool:
    return value is not None and any(str(found) == ident for _, found, _ in own_records(value))


@dataclass(frozen=True)
class Existence:
    """A decision on whether an entity exists: the situation, the evidence's found rate there, and why."""

    exists: bool
    situation: str
    rate: float | None  # found share of the evidence's calls in this situation (None: no evidence of absence)
    calls: int

    def note(self, ident: str) -> str:
        if self.situation == "answered":
            return f"{ident!r} exists: this episode already answered data about it"
        if self.rate is None:
            return f"{ident!r} ({self.situation}) taken to exist: the evidence shows no answer of an absent id"
        verdict = "exists" if self.exists else "does not exist"
        return (f"{ident!r} {verdict}: {self.situation} ids were found in {self.rate:.0%} of {self.calls} "
                "evidence calls")


class _Schema:
    """A read tool's learned response: its keys in order, each field's values, fields equal to an argument."""

    def __init__(self, examples: Sequence[tuple[dict[str, Any], Mapping[str, Any]]]) -> None:
        keysets = Counter(tuple(record) for record, _ in examples)
        self.keys: tuple[str, ...] = keysets.most_common(1)[0][0]
        self.values: dict[str, list[Any]] = defaultdict(list)
        same: dict[str, Counter[str]] = defaultdict(Counter)
        for record, arguments in examples:
            for name, value in record.items():
                self.values[name].append(value)
                for argument, given in arguments.items():
                    if given == value:
                        same[name][argument] += 1
        self.derived: dict[str, str] = {}
        for name, counts in same.items():
            argument, count = counts.most_common(1)[0]
            if count >= 2 and count >= DERIVED_SHARE * len(self.values[name]):
                self.derived[name] = argument


class UnseenEntities:
    """What the evidence says of ids it never showed (see the module doc)."""

    def __init__(self, evidence: Sequence[Evidence], selectors: Mapping[str, tuple[str, str]], store: RecordStore,
                 readers: set[str]) -> None:
        """`selectors`: tool -> (argument, id key) (`learn_selectors` and the write rules'); `readers`: the tools
        whose answer is the selected record (their response schemas are learned)."""
        self.selectors = selectors
        self.store = store
        episodes = group_by_episode(evidence)
        shown, accepted = _sightings(episodes, selectors)
        votes: dict[str, Counter[str]] = defaultdict(Counter)
        # per tool, what it answered when another argument had a value no answered call had: about that argument
        self.refusals: dict[str, set[str]] = defaultdict(set)
        examples: dict[str, list[tuple[dict[str, Any], Mapping[str, Any]]]] = defaultdict(list)
        calls: list[tuple[str, str, str, str]] = []  # (tool, id, observation, situation)
        for episode, items in episodes.items():
            seen_text: list[str] = []
            for item in items:
                selector = selectors.get(item.action)
                arguments = arguments_of(item)
                if selector is not None and selector[0] in arguments:
                    ident = str(arguments[selector[0]])
                    value = parse_structured(item.observation)
                    calls.append((item.action, ident, item.observation, _situation(ident, episode, seen_text, shown)))
                    if _shows_record(value, ident):
                        pass
                    elif not _others_accepted(item.action, selector[0], arguments, accepted):
                        self.refusals[item.action].add(slot_id(item.observation, ident))
                    elif ident not in shown:
                        votes[item.action][slot_id(item.observation, ident)] += 1
                    if item.action in readers and isinstance(value, dict) and top_record(value, arguments[selector[0]]):
                        examples[item.action].append((value, arguments))
                seen_text.append(unechoed(item.observation, arguments))
        self._learn_absent(votes)
        self._learn_rates(calls)
        self.schemas = {tool: _Schema(found) for tool, found in examples.items() if found}
        self.recorded: dict[tuple[str, bytes], str] = {}  # (id key, digest of a record's other fields) -> its id
        for items in episodes.values():
            for item in items:
                value = parse_structured(item.observation)
                for key, ident, record in own_records(value) if value is not None else ():
                    if len(record) > MIN_COPIED_FIELDS:
                        self.recorded.setdefault((key, _digest(record, key)), str(ident))

    def copied(self, key: str, ident: str, record: Mapping[str, Any]) -> str | None:
        """The id of the recorded record of another entity `record` (of `ident`) copies with the id swapped in: every
        other field equal (records of more than `MIN_COPIED_FIELDS` other fields); None when it copies none."""
        if len(record) <= MIN_COPIED_FIELDS:
            return None
        source = self.recorded.get((key, _digest(record, key)))
        return source if source is not None and source != ident else None

    def _learn_absent(self, votes: Mapping[str, Counter[str]]) -> None:
        """Per tool, the answer most calls of never-shown ids got (when most did, at least `MIN_ABSENT` times), and
        per id key the form its tools share most."""
        self.absent: dict[str, str] = {}
        by_key: dict[str, Counter[str]] = defaultdict(Counter)
        for tool, counts in votes.items():
            form, count = counts.most_common(1)[0]
            if count >= MIN_ABSENT and count * 2 >= counts.total():
                self.absent[tool] = form
                by_key[self.selectors[tool][1]][form] += count
        self.absent_by_key = {key: counts.most_common(1)[0][0] for key, counts in by_key.items()}

    def _learn_rates(self, calls: Sequence[tuple[str, str, str, str]]) -> None:
        """Found answers per tool (and pooled, "*") and situation, over the calls of tools with an absent form."""
        self.rates: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # (tool|*, situation) -> found, all
        for tool, ident, observation, situation in calls:
            form = self.absent_form(tool)
            if form is None:
                continue
            found = int(observation != _render(form, ident))
            for scope in (tool, "*"):
                self.rates[(scope, situation)][0] += found
                self.rates[(scope, situation)][1] += 1

    # ------------------------------------------------------------------ existence
    def absent_form(self, tool: str, key: str | None = None) -> str | None:
        """How `tool` answers an id that does not exist (`{id}` its slot), else how tools selecting the same kind of
        record (its selector's, else `key`) do; None when the evidence never showed one."""
        if tool in self.absent:
            return self.absent[tool]
        selector = self.selectors.get(tool)
        kind = selector[1] if selector is not None else key
        return self.absent_by_key.get(kind) if kind is not None else None

    def absent_answer(self, tool: str, ident: str, key: str | None = None) -> str | None:
        form = self.absent_form(tool, key)
        return _render(form, ident) if form is not None else None

    def says_absent(self, tool: str, ident: str, answer: str, key: str | None = None) -> bool:
        """Whether `answer` says the entity `ident` does not exist: the learned absent form, else (none learned)
        any answer that shows no record of it and is not a refusal about another argument (a bad access token)."""
        form = self.absent_form(tool, key)
        if form is not None:
            return answer == _render(form, ident)
        return (not _shows_record(parse_structured(answer), ident)
                and slot_id(answer, ident) not in self.refusals.get(tool, ()))

    def situation(self, key: str, ident: str, texts: Sequence[str]) -> str:
        """Where a session stands with an id: listed (a text it was told or answered shows it), stored (the book's
        store holds its record), else unlisted."""
        if any(mentions(text, ident) for text in texts):
            return LISTED
        if self.store.keys_for(ident):
            return STORED
        return UNLISTED

    def exists(self, tool: str, key: str, ident: str, texts: Sequence[str]) -> Existence:
        """Whether the entity `ident` (id key `key`) a call of `tool` names exists, for a session whose texts so far
        (task, opening, observations) are `texts` and that never answered about it."""
        situation = self.situation(key, ident, texts)
        if self.absent_form(tool) is None:  # the evidence never showed how this tool says an id does not exist
            return Existence(True, situation, None, 0)
        for scope in (tool, "*"):
            found, total = self.rates.get((scope, situation), (0, 0))
            if total >= MIN_CALLS:
                rate = found / total
                return Existence(rate >= 0.5, situation, rate, total)
        return Existence(True, situation, None, 0)

    # ------------------------------------------------------------------ invention
    def can_invent(self, tool: str) -> bool:
        return tool in self.schemas

    def invent(self, tool: str, key: str, ident: Any, arguments: Mapping[str, Any],
               base: Mapping[str, Any] | None = None,
               links: dict[str, dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """A record for `ident` in `tool`'s response schema: `base`'s fields kept (what the session already
        answered about it), the id echoed, derived fields from the arguments, the rest drawn (module doc).

        `links` (the session's): fields an entity listed inside another invented record takes from it (its owner's
        id: an order a user lists names that user), read for `ident` and written for the ids listed here."""
        schema = self.schemas.get(tool)
        if schema is None:
            return None
        known = {**(links or {}).get(str(ident), {}), **(base or {})}
        record: dict[str, Any] = {}
        for name in schema.keys:
            if name in known:
                record[name] = copy.deepcopy(known[name])
            elif name == key:
                record[name] = ident
            elif name in schema.derived and schema.derived[name] in arguments:
                record[name] = copy.deepcopy(arguments[schema.derived[name]])
            else:
                rng = seeded(key, str(ident), name)
                drawn = copy.deepcopy(rng.choice(schema.values[name]))
                if OWN_ID.search(name) and _scalar(drawn):
                    record[name] = self.fresh_id(name, drawn, rng)
                else:
                    renamed: dict[str, Any] = {}
                    record[name] = self._fresh(drawn, rng, renamed)
                    if links is not None and isinstance(drawn, list):  # ids it lists refer back to it
                        for new_id in renamed.values():
                            links.setdefault(str(new_id), {})[key] = ident
        if base is not None:
            record.update({name: copy.deepcopy(value) for name, value in base.items() if name not in record})
        return record

    def _fresh(self, value: Any, rng: random.Random, renamed: dict[str, Any] | None = None) -> Any:
        """`value` with every identifier in it (an id field, or a known record's id in a list) a fresh one, the same
        old id the same new one throughout, and a key that was an id renamed with it (a map of records by id)."""
        renamed = {} if renamed is None else renamed

        def new(kind: str, old: Any) -> Any:
            if str(old) not in renamed:
                renamed[str(old)] = self.fresh_id(kind, old, rng)
            return renamed[str(old)]

        if isinstance(value, dict):
            out = {name: (new(name, item) if OWN_ID.search(name) and _scalar(item)
                          else self._fresh(item, rng, renamed)) for name, item in value.items()}
            return {str(renamed.get(name, name)): item for name, item in out.items()}
        if isinstance(value, list):
            return [new(self.store.keys_for(item)[0][0], item) if _scalar(item) and self.store.keys_for(item)
                    else self._fresh(item, rng, renamed) for item in value]
        return value

    def fresh_id(self, kind: str, example: Any, rng: random.Random) -> Any:
        """A new id of `example`'s shape: its word prefix kept (`cu_`, `#O`, `pm_card_`, `TCK-`: everything before
        the first digit), each later letter or digit redrawn from its class (hex where the rest is hex); an integer
        id becomes another of as many digits."""
        if isinstance(example, int):
            digits = len(str(abs(example)))
            return rng.randrange(10 ** (digits - 1), 10 ** digits) if digits > 1 else rng.randrange(10)
        text = str(example)
        first = next((i for i, char in enumerate(text) if char.isdigit()), max(0, len(text) - 4))
        prefix, tail = text[:first], text[first:]
        hexadecimal = all(c in string.hexdigits for c in tail if c.isalnum())
        out = []
        for char in tail:
            if char.isdigit():
                out.append(rng.choice(string.digits))
            elif char.isalpha() and hexadecimal:
                out.append(rng.choice("abcdef" if char.islower() else "ABCDEF"))
            elif char.islower():
                out.append(rng.choice(string.ascii_lowercase))
            elif char.isupper():
                out.append(rng.choice(string.ascii_uppercase))
            else:
                out.append(char)
        return prefix + "".join(out)


def _situation(ident: str, episode: str, seen: Sequence[str], shown: Mapping[str, set[str]]) -> str:
    """An evidence call's situation: its id listed by an earlier answer of its episode, else stored (another
    episode showed its record), else unlisted."""
    if any(mentions(text, ident) for text in seen):
        return LISTED
    if shown.get(ident, set()) - {episode}:
        return STORED
    return UNLISTED


def _digest(record: Mapping[str, Any], key: str) -> bytes:
    """A record's fields but its id `key`, hashed: what tells a copy of it with another id."""
    text = json.dumps({k: v for k, v in record.items() if k != key}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def seeded(*parts: str) -> random.Random:
    """A random generator seeded by `parts`: the same entity, field or call always draws the same."""
    return random.Random(hashlib.sha256("\x00".join(parts).encode()).digest())
