"""Find personal data in one piece of text: e-mail addresses, payment card numbers, phone numbers, person names.

Each finder returns `Span`s (where, what kind, the normalised key that identifies the value). E-mails: an
RFC 5322-style pattern (Presidio's), with no check of the domain against a public-suffix list, so addresses at
internal domains (`corp.local`) are found too. Cards: 13 to 19 digits (single spaces or dashes between them), an
issuer's first digit (2 to 6) and a valid Luhn check digit. Phones: Google's libphonenumber (`phonenumbers`),
every number it finds as possible in the first region and valid in the others, kept when it is written in
international form or grouped by separators; a bare digit run only when it is a valid number of the first
region (ids and timestamps are bare digit runs too). Names: `names_in` finds words that look like a person's name (a known name, a
first name followed by a surname, a name after a greeting or a title); structured fields are `structured`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Literal

import phonenumbers

from worldsmith.traces.redaction.names import name_lists

__all__ = ["DEFAULT_REGIONS", "Kind", "Span", "card_spans", "email_name_words", "email_spans", "luhn_valid", "names_in",
           "phone_key",
           "phone_spans", "words"]

Kind = Literal["email", "phone", "card", "name"]
DEFAULT_REGIONS = ("US", "GB", "DE", "FR", "IN", "BR")

_EMAIL = re.compile(
    r"(?<![\w.+\-])([!#$%&'*+\-/=?^`{|}~\w](?:[!#$%&'*+\-/=?^`{|}~.\w]*[!#$%&'*+\-/=?^`{|}~\w])?"
    r"@\w+(?:-+\w+)*(?:\.\w+(?:-+\w+)*)+)\b"
)
_CARD = re.compile(r"(?<![\w.\-])[2-6](?:[ \-]?\d){12,18}(?![\w]|[.\-]\d)")
_DIGIT_RUN = re.compile(r"\d(?:[\s().\-/]{0,3}\d){6,}")
# A number written in groups: "(555) 374-6708", "555.374.6708", "1-800-555-0199", "020 7946 0958".
_GROUPED = re.compile(r"(?:\(\d{2,5}\) ?|\d{1,5}[ .\-])(?:\d{2,5}[ .\-])*\d{3,5}$")
_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*")
_TITLES = frozenset({"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "madam"})
# A first name after these is part of a place ("San Francisco", "Fort Wayne").
_PLACE_PREFIXES = frozenset({"san", "santa", "santo", "st", "saint", "los", "las", "new", "fort", "port", "mount",
                             "lake", "el", "la", "le", "de", "del"})
_GREETINGS = frozenset({"hi", "hello", "dear", "hey", "thanks", "regards", "sincerely", "cheers", "best"})
_PHRASES = (("this", "is"), ("i", "am"), ("i'm",), ("i’m",), ("name", "is"), ("call", "me"))
# Capitalised words that end a name rather than continue it (a place, an organisation, a month).
_NOT_SURNAMES = frozenset(
    "street st avenue ave road rd lane drive dr boulevard blvd park way court place square plaza bridge inc ltd llc "
    "corp co company group bank university college school hospital hotel airport station city county center centre "
    "mall hall house tower building international airlines museum library church restaurant cafe bar shop store "
    "market bay valley beach island lake mountain hills heights the and or of for to in on at by with from as is are was were be this that "
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday i".split()
)


@dataclass(frozen=True, slots=True)
class Span:
    """`text[start:end]` is a value of `kind`; `key` identifies it (the same value written two ways, one key)."""

    start: int
    end: int
    kind: Kind
    key: str


def email_spans(text: str) -> list[Span]:
    if "@" not in text:
        return []
    return [Span(m.start(1), m.end(1), "email", m.group(1).lower()) for m in _EMAIL.finditer(text)]


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def card_spans(text: str) -> list[Span]:
    spans = []
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            spans.append(Span(match.start(), match.end(), "card", digits))
    return spans


def phone_key(number: phonenumbers.PhoneNumber) -> str:
    """E.164: one key whatever the number's written format."""
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def phone_spans(text: str, regions: tuple[str, ...] = DEFAULT_REGIONS) -> list[Span]:
    runs = [match.group() for match in _DIGIT_RUN.finditer(text)]
    if not runs:
        return []
    if "+" not in text and all(run.isdigit() for run in runs):
        regions = regions[:1]  # bare digit runs: only a valid number of the first region is kept
    spans: dict[int, Span] = {}
    for index, region in enumerate(regions):
        leniency = phonenumbers.Leniency.POSSIBLE if index == 0 else phonenumbers.Leniency.VALID
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=leniency):
            if match.start in spans:
                continue
            raw = match.raw_string
            grouped = _GROUPED.match(raw) is not None
            if raw.startswith("+") or grouped or (index == 0 and phonenumbers.is_valid_number(match.number)):
                spans[match.start] = Span(match.start, match.end, "phone", phone_key(match.number))
    return sorted(spans.values(), key=lambda span: span.start)


def words(text: str) -> Iterator[re.Match[str]]:
    return _WORD.finditer(text)


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and not word.isupper()


def names_in(text: str, known: Collection[str]) -> list[tuple[int, int, str, str]]:
    """Name words in `text`: (start, end, word, role), role "first" or "last". A word is a name when its
    case-folded form is in `known` (title case or all capitals; not an ordinary word: "No" read from a probe's
    `first_name` is not replaced in "No such order"), when it is a first name followed by a capitalised
    surname, or when it follows a greeting ("Hi", "Dear", "this is", "my name is") or a title ("Dr.", "Mrs")."""
    tokens = list(words(text))
    if not tokens:
        return []
    lists = name_lists()
    found: dict[int, tuple[int, int, str, str]] = {}
    for index, match in enumerate(tokens):
        word = match.group()
        if index in found:
            continue
        folded = word.casefold()
        if folded in known and folded not in lists.common and (_capitalised(word) or (word.isupper() and len(word) > 1)):
            found[index] = (match.start(), match.end(), word, "first")
            surname = _surname(tokens, index, text) if _capitalised(word) else None
            if surname is not None:
                found[index + 1] = (tokens[index + 1].start(), tokens[index + 1].end(), surname, "last")
            continue
        if not _capitalised(word) or (index > 0 and tokens[index - 1].group().casefold() in _PLACE_PREFIXES):
            continue
        after_cue = _after_cue(tokens, index, text)
        title = index > 0 and tokens[index - 1].group().casefold() in _TITLES and _adjacent(tokens, index - 1, text)
        if not (word in lists.first or title or after_cue == "any" or (after_cue and word in lists.cued)):
            continue
        surname = _surname(tokens, index, text)
        if surname is None and not (title or after_cue):
            continue
        found[index] = (match.start(), match.end(), word, "last" if title and surname is None else "first")
        if surname is not None:
            found[index + 1] = (tokens[index + 1].start(), tokens[index + 1].end(), tokens[index + 1].group(), "last")
    return [found[index] for index in sorted(found)]


def email_name_words(text: str, spans: list[Span]) -> list[tuple[str, str]]:
    """Name words read from e-mail addresses (`ada.lovelace@...`): each word of an address's local part that `text`
    also shows capitalised ("Ada"), as (word, role); not ordinary words nor shared mailboxes' (info, support)."""
    common = name_lists().common
    found = []
    for span in spans:
        parts = [p for p in re.split(r"[^a-z]+", span.key.partition("@")[0]) if len(p) > 2 and p not in common]
        for position, part in enumerate(parts):
            title = part.title()
            if re.search(rf"(?<![\w]){re.escape(title)}(?![\w])", text):
                found.append((title, "last" if position and position == len(parts) - 1 else "first"))
    return found


def _adjacent(tokens: list[re.Match[str]], index: int, text: str) -> bool:
    """Token `index` and the next are separated by spaces (and at most one '.' or ','), nothing else."""
    gap = text[tokens[index].end():tokens[index + 1].start()]
    return 0 < len(gap) <= 3 and gap.strip(" .,") == "" and "\n" not in gap


def _surname(tokens: list[re.Match[str]], index: int, text: str) -> str | None:
    if index + 1 >= len(tokens):
        return None
    gap = text[tokens[index].end():tokens[index + 1].start()]
    word = tokens[index + 1].group()
    folded = word.casefold()
    if gap != " " or not _capitalised(word) or folded in _NOT_SURNAMES or folded in name_lists().common or (
            len(word) < 2):
        return None
    return word


def _after_cue(tokens: list[re.Match[str]], index: int, text: str) -> str | None:
    """"any" after "my name is" / "call me" (any capitalised word is a name), "first" after a greeting or
    "this is" (only a first name is), None elsewhere."""
    if index == 0 or not _adjacent(tokens, index - 1, text):
        return None
    before = [t.group().casefold() for t in tokens[max(0, index - 2):index]]
    if before[-1] in _GREETINGS:
        return "first"
    for phrase in _PHRASES:
        if tuple(before[-len(phrase):]) == phrase:
            return "any" if phrase in (("name", "is"), ("call", "me")) else "first"
    return None
