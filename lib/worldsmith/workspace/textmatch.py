"""What a text query of turns matches: case-insensitive substrings, the same rule for the index and the scans.

A query is whitespace-separated terms; `"a phrase"` is one term with its spaces. A turn matches when every term
occurs, case-insensitively, as a substring of one of its text columns (observation, action name, raw action,
arguments): `mug` finds "mugs" and "Smug", `user` finds "getUserId", `user_4242` and `"status":"ok"` match
their punctuation as typed. A trailing `*` is accepted out of habit and changes nothing (every term already matches
inside longer words). Case-insensitive means: folded code point by code point the way SQLite's FTS5 `trigram`
tokenizer folds (`fold_map`, read from the installed SQLite itself, so the scan cannot drift from the index); no
Unicode normalisation, no accent stripping. Terms of any length match; the index finds those of >= 3 characters
(one trigram or more), shorter ones filter what it finds or, alone, a scan of the indexed text does.

The scans express a term as a pattern over the raw text: each character becomes the class of every character that
folds like it (`regex` for DuckDB's `regexp_matches`, `glob` for SQLite's `GLOB`), so "contains the folded term
in the folded text" holds exactly, in the engines' own C code.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import sys
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["MIN_INDEXED", "TEXT_COLUMNS", "Term", "fold", "fold_map", "glob", "parse_query", "regex", "scan_clause",
           "snippet"]

TEXT_COLUMNS = ("observation", "action_name", "action_raw", "action_arguments")
MIN_INDEXED = 3  # the trigram index cannot look up shorter terms
_TERM = re.compile(r'"([^"]*)"|(\S+)')


@dataclass(frozen=True, slots=True)
class Term:
    """One query term: the text to find (a phrase keeps its spaces; a bare word loses a trailing `*`)."""

    text: str

    @property
    def indexed(self) -> bool:
        return len(self.text) >= MIN_INDEXED


def parse_query(text: str) -> list[Term]:
    """The terms of `text`: `"quoted phrases"` and bare words; empty ones (`""`, `*`) dropped."""
    terms = []
    for phrase, bare in _TERM.findall(text):
        term = phrase if phrase else bare.rstrip("*")
        if term:
            terms.append(Term(term))
    return terms


@functools.cache
def fold_map() -> dict[str, str]:
    """Every character FTS5's trigram tokenizer folds to another, and what to: asked of the installed SQLite.

    Candidates: the characters Python lowers or case-folds (FTS5's table is an older Unicode's, so a subset), and the
    two SQLite reads as others.
    """
    candidates = [c for c in map(chr, range(sys.maxunicode + 1))
                  if not 0xD800 <= ord(c) <= 0xDFFF and (c.lower() != c or c.casefold() != c)]
    candidates += ["\ufffe", "\uffff"]  # SQLite's UTF-8 reader takes these non-characters for U+FFFD
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'trigram')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", [(ord(c), f"0{c}0") for c in candidates])
        folded = {chr(doc): term[1] for term, doc in conn.execute("SELECT term, doc FROM v") if len(term) == 3}
    return {c: f for c, f in folded.items() if c != f}


@functools.cache
def _variants() -> dict[str, tuple[str, ...]]:
    """For each folded character with other characters folding to it: all of them, itself first."""
    groups: dict[str, set[str]] = defaultdict(set)
    for char, folded in fold_map().items():
        groups[folded].update((char, folded))
    return {folded: (folded, *sorted(group - {folded})) for folded, group in groups.items()}


def fold(text: str) -> str:
    """`text` folded as the index folds it (one character for one: positions stay)."""
    table = fold_map()
    return "".join(table.get(c, c) for c in text)


def _chars(term: Term) -> list[tuple[str, ...]]:
    variants = _variants()
    return [variants.get(c, (c,)) for c in fold(term.text)]


def regex(term: Term) -> str:
    """An RE2 pattern (DuckDB `regexp_matches`, case-sensitive) matching text that contains `term`."""
    out = []
    for chars in _chars(term):
        codes = "".join(f"\\x{{{ord(c):x}}}" for c in chars)
        out.append(codes if len(chars) == 1 else f"[{codes}]")
    return "".join(out)


def glob(term: Term) -> str:
    """An SQLite `GLOB` pattern matching text that contains `term` (GLOB has no escape: specials go in a class)."""
    out = []
    for chars in _chars(term):
        if len(chars) == 1:
            c = chars[0]
            out.append(f"[{c}]" if c in "*?[" else c)
        else:  # `]` first, `^` never first: both then literal
            ordered = sorted(chars, key=lambda c: (c != "]", c == "^"))
            out.append("[" + "".join(ordered) + "]")
    return "*" + "".join(out) + "*"


def scan_clause(terms: list[Term]) -> tuple[str, list[str]]:
    """A DuckDB condition on a turns row (and its parameters): every term in one of the `TEXT_COLUMNS`."""
    clauses, params = [], []
    for term in terms:
        clauses.append("(" + " OR ".join(f"regexp_matches({c}, ?)" for c in TEXT_COLUMNS) + ")")
        params.extend([regex(term)] * len(TEXT_COLUMNS))
    return " AND ".join(clauses) or "true", params


def snippet(texts: tuple[str | None, ...], term: Term, marks: tuple[str, str], width: int = 60) -> str:
    """A window of the first text holding `term`, the match between `marks`."""
    needle = fold(term.text)
    for text in texts:
        if not text:
            continue
        at = fold(text).find(needle)
        if at < 0:
            continue
        end_match = at + len(needle)
        start, end = max(0, at - width), min(len(text), end_match + width)
        return ("…" if start else "") + text[start:at] + marks[0] + text[at:end_match] + marks[1] + \
            text[end_match:end] + ("…" if end < len(text) else "")
    return ""
