"""How close a predicted observation is to the real one: the text metrics every evaluation reports.

    metric_scores("You see a mug.", "You see a mug 1.")
    # {"exact_match": 0.0, "edit_similarity": 0.8, "token_f1": 0.89, "json_f1": None}

One implementation: exact match, token F1 and edit similarity are `worldsmith.sim.scoring`'s (the
side-by-side view shows the same numbers as a report). All metrics are in [0, 1]: `exact_match`
compares whitespace-normalised text; `token_f1` is the F1 of the two bags of lower-cased words;
`edit_similarity` is 1 - word-level Levenshtein distance / the longer length (rapidfuzz, C speed);
`json_f1` is added here: the F1 of the `path=value` leaves of two JSON observations, None when the
reference is not JSON (so it averages over JSON targets only).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import orjson

from worldsmith.sim.scoring import edit_similarity, exact_match, token_f1, word_tokens
from worldsmith.traces.model import parse_json_text

__all__ = ["METRICS", "edit_similarity", "exact_match", "flatten_json", "json_f1", "metric_scores", "token_f1",
           "word_tokens"]

METRICS = ("exact_match", "edit_similarity", "token_f1", "json_f1")


def _multiset_f1(predicted: Iterable[str], reference: Iterable[str]) -> float:
    p, r = Counter(predicted), Counter(reference)
    p_total, r_total = sum(p.values()), sum(r.values())
    if p_total == 0 and r_total == 0:
        return 1.0
    overlap = sum((p & r).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / p_total, overlap / r_total
    return 2 * precision * recall / (precision + recall)


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


def metric_scores(prediction: str, reference: str) -> dict[str, float | None]:
    """Every text metric of one prediction against its reference (keys: `METRICS`), unrounded."""
    return {
        "exact_match": exact_match(prediction, reference),
        "edit_similarity": edit_similarity(prediction, reference),
        "token_f1": token_f1(prediction, reference),
        "json_f1": json_f1(prediction, reference),
    }
