"""How close a predicted observation is to the real one: the text metrics every evaluation reports.

    score("You see a mug.", "You see a mug 1.")
    # {"exact_match": 0.0, "edit_similarity": 0.94, "token_f1": 0.89, "json_f1": None}

All metrics are in [0, 1]. `exact_match` compares whitespace-normalised text (a trailing newline is
not a wrong prediction); `edit_similarity` is 1 - Levenshtein distance / longer length (rapidfuzz,
C speed: observations can be long); `token_f1` is the F1 of the two token multisets (lower-cased
words and punctuation); `json_f1` is the F1 of the `path=value` leaves of two JSON observations
and None when the reference is not JSON (so it only averages over JSON targets).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import orjson
from rapidfuzz.distance import Levenshtein

from worldsmith.traces.model import parse_json_text

__all__ = [
    "METRICS",
    "edit_similarity",
    "exact_match",
    "flatten_json",
    "json_f1",
    "normalize_whitespace",
    "score",
    "token_f1",
    "tokenize",
]

METRICS = ("exact_match", "edit_similarity", "token_f1", "json_f1")

_SPACE = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def normalize_whitespace(text: str) -> str:
    """Runs of whitespace as one space, no leading or trailing space."""
    return _SPACE.sub(" ", text).strip()


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the texts are equal up to whitespace, else 0.0."""
    return 1.0 if normalize_whitespace(prediction) == normalize_whitespace(reference) else 0.0


def edit_similarity(prediction: str, reference: str) -> float:
    """1 - (Levenshtein distance / length of the longer text), on whitespace-normalised text; 1.0 for two empty texts."""
    a, b = normalize_whitespace(prediction), normalize_whitespace(reference)
    if not a and not b:
        return 1.0
    return float(Levenshtein.normalized_similarity(a, b))


def tokenize(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks."""
    return _TOKEN.findall(text.lower())


def _multiset_f1(predicted: Iterable[str], reference: Iterable[str]) -> float:
    p, r = Counter(predicted), Counter(reference)
    p_total, r_total = sum(p.values()), sum(r.values())
    if p_total == 0 and r_total == 0:
        return 1.0
    if p_total == 0 or r_total == 0:
        return 0.0
    overlap = sum((p & r).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / p_total, overlap / r_total
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, reference: str) -> float:
    """F1 of the token multisets (1.0 when both are empty, 0.0 when only one is)."""
    return _multiset_f1(tokenize(prediction), tokenize(reference))


def flatten_json(value: Any, prefix: str = "$") -> list[str]:
    """The leaves of a JSON value as `path=value` strings (`$.a.b[0]=1`); an empty container is a leaf too."""
    if isinstance(value, dict):
        if not value:
            return [f"{prefix}={{}}"]
        return [leaf for key in value for leaf in flatten_json(value[key], f"{prefix}.{key}")]
    if isinstance(value, list):
        if not value:
            return [f"{prefix}=[]"]
        return [leaf for index, item in enumerate(value) for leaf in flatten_json(item, f"{prefix}[{index}]")]
    return [f"{prefix}={orjson.dumps(value).decode()}"]


def json_f1(prediction: str, reference: str) -> float | None:
    """F1 of the `path=value` leaves; None when the reference is not a JSON object or array.

    A prediction that is not JSON while the reference is scores 0.0.
    """
    ref = parse_json_text(reference)
    if ref is None:
        return None
    pred = parse_json_text(prediction)
    if pred is None:
        return 0.0
    return _multiset_f1(flatten_json(pred), flatten_json(ref))


def score(prediction: str, reference: str) -> dict[str, float | None]:
    """Every text metric of one prediction against its reference (keys: `METRICS`)."""
    return {
        "exact_match": exact_match(prediction, reference),
        "edit_similarity": edit_similarity(prediction, reference),
        "token_f1": token_f1(prediction, reference),
        "json_f1": json_f1(prediction, reference),
    }
