"""How close a predicted observation is to the real one, word by word.

Three numbers, each in [0, 1], because each hides what the others show: exact match (the only
one an agent cannot be fooled by), token F1 (right words, any order: partial credit for a
listing with one object missing) and normalised edit similarity (right words in the right
order). Texts with no words at all (`{"`, `(`, `...`) are compared by their punctuation marks instead, so
an empty prediction never matches a reference that has any content; whitespace is never content, so a
whitespace-only text equals the empty text (as `exact_match`, which ignores runs of whitespace, says too).
`word_diff` shows where two observations part, as segments a page can colour (it is
`traces.text_diff`'s, re-exported here).
The side-by-side view and the evaluation code use these same functions, so their numbers agree.
"""

from __future__ import annotations

import re
from collections import Counter

from pydantic import BaseModel, ConfigDict
from rapidfuzz.distance import Levenshtein

from worldsmith.traces.text_diff import DiffSegment, word_diff

__all__ = ["DiffSegment", "Score", "edit_similarity", "exact_match", "observation_score", "token_f1", "word_diff",
           "word_tokens"]

_WORD = re.compile(r"\w+", re.UNICODE)
_MARK = re.compile(r"[^\w\s]", re.UNICODE)  # one punctuation or symbol character


class Score(BaseModel):
    """One prediction against its reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exact: float
    f1: float
    edit: float


def _normalised(text: str) -> str:
    return " ".join(text.split())


def word_tokens(text: str) -> list[str]:
    """Lower-case words (letters, digits, underscore): what F1 and edit similarity compare; punctuation is ignored."""
    return _WORD.findall(text.lower())


def _compared_tokens(predicted: str, reference: str) -> tuple[list[str], list[str]]:
    """What F1 and edit similarity compare: the two texts' words, or, when neither text has a word, their
    punctuation marks one by one (else `{"` and an empty text would agree: neither has a word)."""
    a, b = word_tokens(predicted), word_tokens(reference)
    if a or b:
        return a, b
    return _MARK.findall(predicted), _MARK.findall(reference)


def exact_match(predicted: str, reference: str) -> float:
    """1.0 when the texts are the same up to runs of whitespace, else 0.0."""
    return 1.0 if _normalised(predicted) == _normalised(reference) else 0.0


def token_f1(predicted: str, reference: str) -> float:
    """F1 of the two bags of words (of marks where neither has a word; two blank texts agree: 1.0)."""
    words, other = _compared_tokens(predicted, reference)
    a, b = Counter(words), Counter(other)
    if not a and not b:
        return 1.0
    common = sum((a & b).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(a.values()), common / sum(b.values())
    return 2 * precision * recall / (precision + recall)


def edit_similarity(predicted: str, reference: str) -> float:
    """1 - word-level Levenshtein distance / the longer length (marks where neither has a word; two blank
    texts agree: 1.0)."""
    a, b = _compared_tokens(predicted, reference)
    if not a and not b:
        return 1.0
    return 1.0 - Levenshtein.distance(a, b) / max(len(a), len(b))  # rapidfuzz: C speed on word lists


def observation_score(predicted: str, reference: str) -> Score:
    """All three numbers, rounded to 4 places (what tables show)."""
    return Score(exact=exact_match(predicted, reference), f1=round(token_f1(predicted, reference), 4),
                 edit=round(edit_similarity(predicted, reference), 4))
