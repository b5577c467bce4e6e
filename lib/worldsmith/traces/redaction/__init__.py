"""Redaction: e-mail addresses, phone and card numbers and person names replaced by consistent pseudonyms.

    from worldsmith.traces.redaction import Redactor
    redactor = Redactor()                       # or Redactor.load(path): a dataset's kept mapping
    redactor.redact_text("mail ada@corp.com")   # 'mail <pseudonym>@d1f3a9c2e.example'
    redactor.redact_episode(episode)            # every recorded text of an episode
    redactor.save(path)                         # the mapping and its secret (owner-only file); or keep nothing

Detection needs no model and no network: patterns for e-mails and cards (Luhn-checked), Google's libphonenumber
for phones, rules and Faker's name lists for names (`detect`, `structured`). Pseudonyms are keyed by the
redactor's secret and keep each value's shape (`pseudonyms`).
"""

from __future__ import annotations

from worldsmith.traces.redaction.detect import DEFAULT_REGIONS, Kind, Span
from worldsmith.traces.redaction.redactor import KINDS, MAPPING_FORMAT, Redactor

__all__ = ["DEFAULT_REGIONS", "KINDS", "MAPPING_FORMAT", "Kind", "Redactor", "Span"]
