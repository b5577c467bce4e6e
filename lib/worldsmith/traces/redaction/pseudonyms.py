"""Keyed, shape-keeping pseudonyms: the same secret and value always give the same pseudonym.

Each is drawn from HMAC-SHA256(secret, kind, value, attempt); the caller moves to the next attempt when a
pseudonym is taken, which keeps the mapping one-to-one. Shapes kept: an e-mail stays an address (public
mail providers' and reserved example domains kept, any other domain mapped to a pseudonymous one under the
reserved `.example` top-level domain, the same for every address there; a local part made of known name words
takes their pseudonyms); a card keeps its length, first
digit, separators and a valid Luhn digit; a phone keeps its country code, first national digit, length and
separators; a name word becomes a name from the English first-name or surname pool, in the word's case.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator

from worldsmith.traces.redaction.detect import luhn_valid
from worldsmith.traces.redaction.names import name_lists

__all__ = ["card_digits", "email", "email_domain", "email_from_names", "fill_digits", "in_case_of", "name_word",
           "national_digits"]

# Domains that identify no one: the big public mail providers and the reserved example domains (RFC 2606).
_PUBLIC_DOMAINS = frozenset(
    "gmail.com googlemail.com yahoo.com ymail.com outlook.com hotmail.com live.com msn.com icloud.com me.com "
    "aol.com proton.me protonmail.com gmx.com gmx.de gmx.net web.de mail.com yandex.ru yandex.com mail.ru qq.com "
    "163.com 126.com zoho.com fastmail.com example.com example.org example.net".split()
)


def _stream(secret: bytes, *parts: str) -> Iterator[int]:
    """An endless stream of keyed bytes."""
    block = 0
    message = "\x1f".join(parts).encode()
    while True:
        yield from hmac.new(secret, message + b"\x1f" + str(block).encode(), hashlib.sha256).digest()
        block += 1


def _digits(stream: Iterator[int], count: int) -> str:
    return "".join(str(next(stream) % 10) for _ in range(count))


def email_domain(secret: bytes, domain: str) -> str:
    """`domain` if it identifies no one, else its pseudonym under `.example` (the same for every address there)."""
    if domain in _PUBLIC_DOMAINS:
        return domain
    return "d" + hmac.new(secret, b"email-domain\x1f" + domain.encode(), hashlib.sha256).hexdigest()[:8] + ".example"


def email_from_names(secret: bytes, key: str, names: dict[str, str]) -> str | None:
    """The address `key` with each word of its local part replaced by that name word's pseudonym (`names`: case-
    folded name word -> pseudonym), digits and separators kept: `kofi.chen43@` -> `ruth.wallace43@`, so a record's
    e-mail still matches its name. None unless every word of two letters or more is a known name word."""
    local, _, domain = key.rpartition("@")
    parts = re.split(r"([^a-z]+)", local)
    words = [part for part in parts if len(part) > 1 and part.isalpha()]
    if not words or any(word not in names for word in words):
        return None
    mapped = [names[part].lower() if part in names and len(part) > 1 else part for part in parts]
    return "".join(mapped) + "@" + email_domain(secret, domain)


def email(secret: bytes, key: str, attempt: int) -> str:
    """`first.last<nn>@domain` for the address `key` (lower case)."""
    pools = name_lists()
    stream = _stream(secret, "email", key, str(attempt))
    first = pools.first_pool[int.from_bytes(bytes(next(stream) for _ in range(4))) % len(pools.first_pool)]
    last = pools.last_pool[int.from_bytes(bytes(next(stream) for _ in range(4))) % len(pools.last_pool)]
    local = f"{first}.{last}{_digits(stream, 2)}".lower()
    return f"{local}@{email_domain(secret, key.rpartition('@')[2])}"


def card_digits(secret: bytes, digits: str, attempt: int) -> str:
    """Digits as long as `digits`, starting with its first digit, ending with a valid Luhn check digit."""
    stream = _stream(secret, "card", digits, str(attempt))
    body = digits[0] + _digits(stream, len(digits) - 2)
    return next(body + check for check in "0123456789" if luhn_valid(body + check))


def national_digits(secret: bytes, national: str, key: str, attempt: int) -> str:
    """A national number as long as `national`, starting with its first digit."""
    stream = _stream(secret, "phone", key, str(attempt))
    return national[:1] + _digits(stream, len(national) - 1)


def fill_digits(template: str, digits: str) -> str:
    """`template` with its last `len(digits)` digits replaced by `digits` (separators and leading digits kept)."""
    positions = [m.start() for m in re.finditer(r"\d", template)][-len(digits):]
    if not positions:
        return template
    chars = list(template)
    for position, digit in zip(positions, digits[-len(positions):], strict=True):
        chars[position] = digit
    return "".join(chars)


def name_word(secret: bytes, key: str, role: str, attempt: int) -> str:
    """A first name (role "first") or surname for the case-folded name word `key`, in title case."""
    pools = name_lists()
    pool = pools.first_pool if role == "first" else pools.last_pool
    stream = _stream(secret, "name", key, str(attempt))
    return pool[int.from_bytes(bytes(next(stream) for _ in range(4))) % len(pool)]


def in_case_of(word: str, pseudonym: str) -> str:
    """`pseudonym` in the case `word` is written in (all capitals, all lower case, or title case)."""
    if word.isupper() and len(word) > 1:
        return pseudonym.upper()
    if word.islower():
        return pseudonym.lower()
    return pseudonym
