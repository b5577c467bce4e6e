"""`Redactor`: replace e-mails, phone and card numbers and person names by consistent pseudonyms.

One redactor holds one dataset's mapping (value -> pseudonym, per kind) and its secret: the same value gets the
same pseudonym in every text, JSON field, tool argument, observation and prompt it redacts, so an entity keyed by
its e-mail is still one entity after redaction. A value that already is one of its pseudonyms is left alone
(an e-mail, phone or card recorded again after a simulator served it), except for names, which come from a
finite pool: a real name that happens to equal a pseudonym still gets a pseudonym of its own.

Text that is JSON is redacted as JSON: every string (keys too) and every card-like integer, with fields that
name a person or a phone (`structured`) redacted as such whatever their content, and the text keeps its own
layout (each changed string literal replaced in place; re-serialised only when that cannot be done exactly).
Names found anywhere in an episode (a `first_name` field, "Hi Mateo", "Ada Lovelace") are learnt before any of
its text is redacted, so a name is replaced in the system prompt as well as in the record it was found in.

Limits: a name is only found by the rules in `detect.names_in` and `structured` (no statistical model); a
name first seen in a later episode is not replaced in earlier ones already redacted; a name word in lower
case inside free text is left alone (too many are ordinary words).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections import Counter
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import orjson
import phonenumbers

from worldsmith.traces.model import Episode
from worldsmith.traces.redaction import pseudonyms
from worldsmith.traces.redaction.detect import (
    DEFAULT_REGIONS,
    Kind,
    Span,
    card_spans,
    email_name_words,
    email_spans,
    luhn_valid,
    names_in,
    phone_spans,
    words,
)
from worldsmith.traces.redaction.structured import FieldKind, field_kind, list_kind, person_object
from worldsmith.traces.rows import EPISODE_COLUMNS, TURN_COLUMNS, EpisodeRows, episode_to_rows
from worldsmith.util.atomic import atomic_write_bytes
from worldsmith.util.errors import BadInputError

__all__ = ["KINDS", "MAPPING_FORMAT", "Redactor"]

KINDS: tuple[Kind, ...] = ("email", "phone", "card", "name")
MAPPING_FORMAT = "worldsmith.redaction/v1"
# The columns holding recorded text (JSON or not); ids, names of tools, provenance and paths are not redacted.
_EPISODE_TEXT = tuple(EPISODE_COLUMNS.index(c) for c in (
    "task", "initial_observation", "initial_info", "final_context", "metadata", "initial_state"))
_TURN_TEXT = tuple(TURN_COLUMNS.index(c) for c in (
    "action_arguments", "action_raw", "action_parse_error", "observation", "info", "context", "state"))
_DIGIT_RUN = re.compile(r"\d(?:\D{0,3}\d){6,}")
_NOT_NAME_WORDS = frozenset({"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "jr", "sr", "ii", "iii", "iv",
                             "van", "von", "der", "den", "de", "da", "di", "del", "la", "le", "bin", "al", "st"})
_CACHE_LIMIT = 100_000
_NAME_ATTEMPTS = 64


class Redactor:
    """Replaces personal data by keyed pseudonyms; `save`/`load` keep its mapping (and secret) in a file."""

    def __init__(self, secret: bytes | None = None, *, regions: tuple[str, ...] = DEFAULT_REGIONS) -> None:
        self.secret = secret if secret is not None else secrets.token_bytes(32)
        self.regions = regions
        self.mapping: dict[Kind, dict[str, str]] = {kind: {} for kind in KINDS}
        self.replaced: Counter[str] = Counter()  # occurrences replaced, per kind
        self.added: Counter[str] = Counter()  # values first met by this redactor, per kind
        self._taken: dict[Kind, set[str]] = {kind: set() for kind in KINDS}  # pseudonyms in use (names folded)
        self._lock = threading.RLock()
        self._cache: dict[str, tuple[str, Counter[str]]] = {}
        self._learnt: set[str] = set()

    # -- the mapping --------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"format": MAPPING_FORMAT, "secret": self.secret.hex(),
                    "mapping": {kind: dict(values) for kind, values in self.mapping.items()}}

    @classmethod
    def from_json(cls, data: Any, *, where: str = "redaction mapping",
                  regions: tuple[str, ...] = DEFAULT_REGIONS) -> Redactor:
        if not isinstance(data, dict) or data.get("format") != MAPPING_FORMAT:
            raise BadInputError(f"not a redaction mapping (format {MAPPING_FORMAT!r} expected)", where=where)
        try:
            redactor = cls(bytes.fromhex(str(data["secret"])), regions=regions)
        except (KeyError, ValueError):
            raise BadInputError("field 'secret' is missing or not hex", where=where) from None
        mapping = data.get("mapping") or {}
        for kind in KINDS:
            values = mapping.get(kind) or {}
            if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
                raise BadInputError(f"field 'mapping.{kind}' is not an object of strings", where=where)
            redactor.mapping[kind].update(values)
            redactor._taken[kind].update(v.casefold() if kind == "name" else v for v in values.values())
        return redactor

    @classmethod
    def load(cls, path: Path, *, regions: tuple[str, ...] = DEFAULT_REGIONS) -> Redactor:
        try:
            data = orjson.loads(Path(path).read_bytes())
        except orjson.JSONDecodeError as error:
            raise BadInputError(f"the redaction mapping is not JSON: {error}", where=str(path)) from None
        return cls.from_json(data, where=str(path), regions=regions)

    def save(self, path: Path) -> None:
        """Write the mapping atomically, readable by its owner only: it turns pseudonyms back into people."""
        with self._lock:
            payload = orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        atomic_write_bytes(Path(path), payload, private=True)

    def summary(self) -> dict[str, dict[str, int]]:
        """Per kind: occurrences replaced, and values met for the first time, by this redactor."""
        return {kind: {"replaced": self.replaced[kind], "values": self.added[kind]} for kind in KINDS}

    # -- redaction ------------------------------------------------------------------------------------------

    def redact_text(self, text: str | None) -> str | None:
        """`text` with every e-mail, phone, card number and name replaced (JSON text redacted as JSON)."""
        if not text or (text.islower() and "@" not in text and _DIGIT_RUN.search(text) is None):
            return text
        cached = self._cache.get(text)
        if cached is not None:
            self.replaced.update(cached[1])
            return cached[0]
        before = self.replaced.copy()
        value = _json_or_none(text)
        if value is not None:
            self._learn_value(value, None, None)
            result = self._redact_json_text(text, value)
        else:
            self._learn_text(text)
            result = self._redact_plain(text)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[text] = (result, self.replaced - before)
        return result

    def redact_value(self, value: Any) -> Any:
        """A JSON value (parsed) with its strings, card-like integers and name and phone fields redacted."""
        self._learn_value(value, None, None)
        return self._redact_value(value, None, None, {})

    def redact_rows(self, rows: EpisodeRows) -> EpisodeRows:
        """One episode's rows, redacted; names found anywhere in it are learnt first."""
        texts = [rows.episode[c] for c in _EPISODE_TEXT] + [turn[c] for turn in rows.turns for c in _TURN_TEXT]
        for text in texts:
            if isinstance(text, str):
                self.learn(text)
        episode = list(rows.episode)
        for column in _EPISODE_TEXT:
            episode[column] = self.redact_text(episode[column])
        turns = []
        for turn in rows.turns:
            cells = list(turn)
            for column in _TURN_TEXT:
                cells[column] = self.redact_text(cells[column])
            turns.append(tuple(cells))
        return EpisodeRows(tuple(episode), turns)

    def redact_episode(self, episode: Episode) -> Episode:
        return self.redact_rows(episode_to_rows(episode)).to_episode()

    def learn(self, text: str) -> None:
        """Learn the names `text` shows (its structured name fields, greetings, first and last names)."""
        if text in self._learnt:
            return
        value = _json_or_none(text)
        if value is not None:
            self._learn_value(value, None, None)
        else:
            self._learn_text(text)
        if len(self._learnt) >= _CACHE_LIMIT:
            self._learnt.clear()
        self._learnt.add(text)

    # -- learning names ------------------------------------------------------------------------------------

    def _learn_text(self, text: str) -> None:
        if text.islower():
            return
        for word, role in email_name_words(text, email_spans(text)):
            self._name(word, role)
        for _, _, word, role in names_in(text, self.mapping["name"].keys()):
            self._name(word, role)

    def _learn_value(self, value: Any, parent: str | None, kind: FieldKind | None) -> None:
        if isinstance(value, dict):
            person = person_object(value.keys(), parent)
            for key, item in value.items():
                self._learn_value(item, key, field_kind(key, parent, person) if isinstance(key, str) else None)
        elif isinstance(value, list):
            for item in value:
                self._learn_value(item, parent, kind or list_kind(parent))
        elif isinstance(value, str) and value:
            if kind in ("first", "last", "full") and _looks_like_name(value):
                for word, role in _name_words(value, kind):
                    self._name(word, role)
            elif value not in self._learnt:
                self.learn(value)

    # -- assigning pseudonyms --------------------------------------------------------------------------------

    def _assign(self, kind: Kind, key: str, make: Callable[[int], str]) -> str:
        with self._lock:
            known = self.mapping[kind].get(key)
            if known is not None:
                return known
            for attempt in count():
                candidate = make(attempt)
                if candidate not in self._taken[kind] and candidate not in self.mapping[kind]:
                    break
            self.mapping[kind][key] = candidate
            self._taken[kind].add(candidate)
            self.added[kind] += 1
            return candidate

    def _name(self, word: str, role: str) -> str:
        """The pseudonym of name word `word` (title case), assigned on first sight."""
        key = word.casefold()
        with self._lock:
            known = self.mapping["name"].get(key)
            if known is not None:
                return known
            names = self.mapping["name"]
            for attempt in count():
                candidate = pseudonyms.name_word(self.secret, key, role, attempt)
                if attempt >= _NAME_ATTEMPTS:  # the pool is used up: a compound of two pool names
                    candidate += pseudonyms.name_word(self.secret, key, "last", attempt).lower()
                folded = candidate.casefold()
                if folded not in self._taken["name"] and folded not in names and folded != key:
                    break
            names[key] = candidate
            self._taken["name"].add(folded)
            self.added["name"] += 1
            self._cache.clear()  # a text redacted before may show this name
            return candidate

    def _email(self, span: Span) -> str | None:
        if span.key in self._taken["email"]:
            return None
        def make(attempt: int) -> str:
            derived = pseudonyms.email_from_names(self.secret, span.key, self.mapping["name"]) if not attempt else None
            return derived or pseudonyms.email(self.secret, span.key, attempt)

        return self._assign("email", span.key, make)

    def _card(self, key: str) -> str | None:
        if key in self._taken["card"]:
            return None
        return self._assign("card", key, lambda attempt: pseudonyms.card_digits(self.secret, key, attempt))

    def _phone(self, key: str) -> str | None:
        """The pseudonym's national digits for phone `key` (E.164, or the bare digits of an unparsable one)."""
        if key in self._taken["phone"]:
            return None
        prefix = ""
        national = key
        if key.startswith("+"):
            try:
                prefix = f"+{phonenumbers.parse(key).country_code}"
            except phonenumbers.NumberParseException:
                prefix = "+"
            national = key[len(prefix):]

        def make(attempt: int) -> str:
            return prefix + pseudonyms.national_digits(self.secret, national, key, attempt)

        return self._assign("phone", key, make)[len(prefix):]

    # -- replacing ---------------------------------------------------------------------------------------------

    def _redact_plain(self, text: str) -> str:
        spans: list[tuple[int, int, str]] = []
        taken: list[tuple[int, int]] = []

        def free(start: int, end: int) -> bool:
            return all(end <= s or start >= e for s, e in taken)

        for span in email_spans(text):
            pseudonym = self._email(span)
            if pseudonym is not None:
                spans.append((span.start, span.end, pseudonym))
                self.replaced["email"] += 1
            taken.append((span.start, span.end))
        for span in card_spans(text):
            if free(span.start, span.end):
                digits = self._card(span.key)
                if digits is not None:
                    spans.append((span.start, span.end, pseudonyms.fill_digits(text[span.start:span.end], digits)))
                    self.replaced["card"] += 1
                taken.append((span.start, span.end))
        for span in phone_spans(text, self.regions):
            if free(span.start, span.end):
                digits = self._phone(span.key)
                if digits is not None:
                    spans.append((span.start, span.end, pseudonyms.fill_digits(text[span.start:span.end], digits)))
                    self.replaced["phone"] += 1
                taken.append((span.start, span.end))
        if not text.islower():
            for start, end, word, role in names_in(text, self.mapping["name"].keys()):
                if free(start, end):
                    spans.append((start, end, pseudonyms.in_case_of(word, self._name(word, role))))
                    self.replaced["name"] += 1
        if not spans:
            return text
        out, position = [], 0
        for start, end, replacement in sorted(spans):
            out += [text[position:start], replacement]
            position = end
        out.append(text[position:])
        return "".join(out)

    def _redact_value(self, value: Any, parent: str | None, kind: FieldKind | None,
                      changes: dict[Any, Any]) -> Any:
        """`value` redacted; each string or integer it changed is recorded in `changes` (old -> new)."""
        if isinstance(value, dict):
            person = person_object(value.keys(), parent)
            out = {}
            for key, item in value.items():
                new_key = self._redact_string(key, None, changes) if isinstance(key, str) else key
                sub = field_kind(key, parent, person) if isinstance(key, str) else None
                out[new_key] = self._redact_value(item, key, sub, changes)
            return out
        if isinstance(value, list):
            return [self._redact_value(item, parent, kind or list_kind(parent), changes) for item in value]
        if isinstance(value, str):
            return self._redact_string(value, kind, changes)
        if isinstance(value, int) and not isinstance(value, bool) and 13 <= len(str(value)) <= 19:
            digits = str(value)
            if digits[0] in "23456" and luhn_valid(digits):
                pseudonym = self._card(digits)
                if pseudonym is not None:
                    self.replaced["card"] += 1
                    changes[value] = int(pseudonym)
                    return int(pseudonym)
        return value

    def _redact_string(self, text: str, kind: FieldKind | None, changes: dict[Any, Any]) -> str:
        if kind in ("first", "last", "full") and _looks_like_name(text):
            result = self._redact_name_field(text, kind)
        elif kind == "phone" and not phone_spans(text, self.regions) and len(re.sub(r"\D", "", text)) >= 7:
            digits = re.sub(r"\D", "", text)
            national = self._phone(("+" + digits) if text.lstrip().startswith("+") else digits)
            result = text if national is None else pseudonyms.fill_digits(text, national)
            self.replaced["phone"] += national is not None
        else:
            result = self.redact_text(text) or text
        if result != text:
            changes[text] = result
        return result

    def _redact_name_field(self, text: str, kind: FieldKind) -> str:
        out, position = [], 0
        for (word, role), match in zip(_name_words(text, kind), _name_matches(text), strict=True):
            out += [text[position:match.start()], pseudonyms.in_case_of(word, self._name(word, role))]
            position = match.end()
            self.replaced["name"] += 1
        out.append(text[position:])
        return "".join(out)

    def _redact_json_text(self, text: str, value: Any) -> str:
        """JSON `text` redacted in place: each changed string literal (or integer) rewritten where it stands,
        checked by parsing the result; canonical JSON of the redacted value when the check fails."""
        changes: dict[Any, Any] = {}
        redacted = self._redact_value(value, None, None, changes)
        if not changes:
            return text
        out = text
        for old, new in sorted(changes.items(), key=lambda item: -len(str(item[0]))):
            if isinstance(old, str):
                for encode in (_orjson_literal, _ascii_literal):
                    literal = encode(old)
                    if literal in out:
                        out = out.replace(literal, encode(new))
            else:
                out = re.sub(rf"(?<![\w.\-]){old}(?![\w.])", str(new), out)
        try:
            if orjson.loads(out) == redacted:
                return out
        except orjson.JSONDecodeError:
            pass
        return orjson.dumps(redacted, option=orjson.OPT_SORT_KEYS).decode()


def _json_or_none(text: str) -> Any:
    """The parsed value of text that is a JSON object or array, else None."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, (dict, list)) else None


def _orjson_literal(text: str) -> str:
    return orjson.dumps(text).decode()


def _ascii_literal(text: str) -> str:
    return json.dumps(text)


def _looks_like_name(text: str) -> bool:
    """A field value that can be a name: 1 to 6 words, no digits, no '@', not long."""
    return 0 < len(text) <= 80 and "@" not in text and not any(c.isdigit() for c in text) and (
        0 < len(text.split()) <= 6)


def _name_matches(text: str) -> list[re.Match[str]]:
    return [m for m in words(text) if m.group().casefold() not in _NOT_NAME_WORDS and len(m.group()) > 1]


def _name_words(text: str, kind: FieldKind) -> list[tuple[str, str]]:
    """(word, role) of a name field's words: a full name's last word is a surname, the others first names."""
    found = [m.group() for m in _name_matches(text)]
    if kind == "full":
        return [(word, "last" if i == len(found) - 1 and len(found) > 1 else "first") for i, word in enumerate(found)]
    return [(word, kind) for word in found]
