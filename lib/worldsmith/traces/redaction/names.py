"""Person-name vocabularies: which capitalised words are first names, and the pools pseudonyms are drawn from.

Both come from Faker's person providers (first and last names of several Latin-script locales), which ship
inside the package, so nothing is fetched at run time. Loaded once, on the first redaction.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

__all__ = ["NameLists", "name_lists"]

# Latin-script locales: their names are what a first-name look-up can recognise in English-language traces.
_LOCALES = ("en_US", "en_GB", "en_IN", "de_DE", "fr_FR", "es_ES", "es_MX", "it_IT", "pt_BR", "nl_NL",
            "sv_SE", "da_DK", "fi_FI", "no_NO", "cs_CZ", "pl_PL")
# Pseudonyms come from the English lists only: short, plain ASCII, and readable to any model trained on English.
_POOL_LOCALES = ("en_US", "en_GB")
# First names that are also ordinary capitalised words (a sentence may start with them): never recognised by
# the look-up alone; a structured field ("first_name": "Will") still names them.
_COMMON_WORDS = frozenset(
    "may will mark grace hope faith joy rose june april august summer autumn dawn page art bill guy pat sunny "
    "rich chase hunter lane sky star crystal amber ruby penny ivy lily iris jade pearl holly daisy violet river "
    "rock stone harmony destiny trinity justice king major christian angel baby honey cash price brand case "
    "carter parker miles norman frank grant gene dean drew earl ray royal sage storm sterling tad van vince "
    "west win young bob don jack joe lee long max ned nick sol sue ted tom wade ward neil ben jean".split()
)

# Words of shared mailboxes' addresses (info@, no-reply@, ...): not a person's name.
_MAILBOX_WORDS = frozenset(
    "info support admin noreply reply sales contact team hello mail office billing service services help desk "
    "news newsletter marketing jobs careers hr press media account accounts security notifications notification "
    "alerts alert orders order booking bookings reservations events event webmaster postmaster root user users "
    "customer customers care feedback inquiries enquiries invoice invoices payments payment finance legal privacy "
    "abuse test demo example participants networking".split()
)


@dataclass(frozen=True, slots=True)
class NameLists:
    """`first`: first names a look-up recognises anywhere; `cued`: those it recognises after a greeting (with the
    ones that are also ordinary words, "Dear Grace"); `common`: ordinary English words (lower case), never a
    surname or a name read from an e-mail address; `first_pool` / `last_pool`: pseudonyms, sorted (stable)."""

    first: frozenset[str]
    cued: frozenset[str]
    common: frozenset[str]
    first_pool: tuple[str, ...]
    last_pool: tuple[str, ...]


def _provider_names(locale: str, *fields: str) -> set[str]:
    provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
    names: set[str] = set()
    for field in fields:
        names.update(getattr(provider, field, None) or ())
    return {name for name in names if " " not in name}


@cache
def name_lists() -> NameLists:
    """The lists (loaded on first use)."""
    first_fields = ("first_names", "first_names_male", "first_names_female")
    first: set[str] = set()
    for locale in _LOCALES:
        first |= _provider_names(locale, *first_fields)
    recognised = frozenset(name for name in first if len(name) > 2 and name.lower() not in _COMMON_WORDS)

    def pool(*fields: str) -> tuple[str, ...]:
        names: set[str] = set()
        for locale in _POOL_LOCALES:
            names |= _provider_names(locale, *fields)
        return tuple(sorted(n for n in names if n.isascii() and n.isalpha() and n.lower() not in _COMMON_WORDS))

    cued = frozenset(name for name in first if len(name) > 1)
    lorem = importlib.import_module("faker.providers.lorem.en_US").Provider.word_list
    common = frozenset(word.lower() for word in lorem) | _COMMON_WORDS | _MAILBOX_WORDS
    return NameLists(first=recognised, cued=cued, common=common, first_pool=pool(*first_fields), last_pool=pool("last_names"))
