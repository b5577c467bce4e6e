"""How close a predicted observation is to the real one, word by word.

Three numbers, each in [0, 1], because each hides what the others show: exact match (the only
one an agent cannot be fooled by), token F1 (right words, any order: partial credit for a
listing with one object missing) and normalised edit similarity (right words in the right
order). `word_diff` shows where two observations part, as segments a page can colour.
The side-by-side view and the evaluation code use these same functions, so their numbers agree.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict
from rapidfuzz.distance import Levenshtein

__all__ = ["DiffSegment", "Score", "edit_similarity", "exact_match", "observation_score", "token_f1", "word_diff",
           "word_tokens"]

_WORD = re.compile(r"\w+", re.UNICODE)
_PIECE = re.compile(r"\S+\s*")


class Score(BaseModel):
    """One prediction against its reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exact: float
    f1: float
    edit: float


class DiffSegment(BaseModel):
    """A run of words: in both texts (`equal`), only in the prediction (`insert`), only in the reference (`delete`).

    `text` keeps the whitespace that followed each word, so joining the `equal` and `insert`
    segments gives the prediction back, and `equal` and `delete` the reference (both up to whitespace).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: Literal["equal", "insert", "delete"]
    text: str


def _normalised(text: str) -> str:
    return " ".join(text.split())


def word_tokens(text: str) -> list[str]:
    """Lower-case words (letters, digits, underscore): what F1 and edit similarity compare; punctuation is ignored."""
    return _WORD.findall(text.lower())


def exact_match(predicted: str, reference: str) -> float:
    """1.0 when the texts are the same up to runs of whitespace, else 0.0."""
    return 1.0 if _normalised(predicted) == _normalised(reference) else 0.0


def token_f1(predicted: str, reference: str) -> float:
    """F1 of the two bags of words (two empty texts agree: 1.0)."""
    a, b = Counter(word_tokens(predicted)), Counter(word_tokens(reference))
    if not a and not b:
        return 1.0
    common = sum((a & b).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(a.values()), common / sum(b.values())
    return 2 * precision * recall / (precision + recall)


def edit_similarity(predicted: str, reference: str) -> float:
    """1 - word-level Levenshtein distance / the longer length (two empty texts agree: 1.0)."""
    a, b = word_tokens(predicted), word_tokens(reference)
    if not a and not b:
        return 1.0
    return 1.0 - Levenshtein.distance(a, b) / max(len(a), len(b))  # rapidfuzz: C speed on word lists


def observation_score(predicted: str, reference: str) -> Score:
    """All three numbers, rounded to 4 places (what tables show)."""
    return Score(exact=exact_match(predicted, reference), f1=round(token_f1(predicted, reference), 4),
                 edit=round(edit_similarity(predicted, reference), 4))


def word_diff(predicted: str, reference: str) -> list[DiffSegment]:
    """The prediction against the reference as equal/insert/delete runs of words (difflib over words).

    Words are compared exactly (case and punctuation count: that is what a reader sees); a changed
    run is reported as the reference's words (`delete`) followed by the prediction's (`insert`).
    """
    mine, theirs = _PIECE.findall(predicted), _PIECE.findall(reference)
    matcher = difflib.SequenceMatcher(a=[p.strip() for p in theirs], b=[p.strip() for p in mine], autojunk=False)
    segments: list[DiffSegment] = []
    for op, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if op == "equal":
            pieces = mine[b_start:b_end]
            if pieces[-1] == pieces[-1].rstrip() and theirs[a_end - 1] != theirs[a_end - 1].rstrip():
                pieces = [*pieces[:-1], theirs[a_end - 1]]  # keep the words apart when the reference goes on
            segments.append(DiffSegment(op="equal", text="".join(pieces)))
            continue
        if a_end > a_start:
            segments.append(DiffSegment(op="delete", text="".join(theirs[a_start:a_end])))
        if b_end > b_start:
            segments.append(DiffSegment(op="insert", text="".join(mine[b_start:b_end])))
    return segments
