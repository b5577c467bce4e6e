"""The edge cases every metric must get right, checked on fixed texts: what a registered metric (a plug-in's
included) promises before its numbers reach a report.

    metric_edge_problems("token_f1")   # [] when it holds; else one sentence per broken promise

The promises (the tests check the same ones on generated texts, with hypothesis):
- every score is a number in [0, 1], or None (the metric does not apply to the pair), and no input raises:
  empty, whitespace-only, punctuation-only and truncated texts included;
- identical texts score 1 (or None);
- an empty prediction against a reference with any content (punctuation included) scores 0 (or None);
  whitespace is not content, so a whitespace-only reference may count as empty;
- a metric that declares itself symmetric (`@metric(symmetric=True)`) scores (a, b) as (b, a).
Checked when asked (`worldsmith plugins`), never at import: a broken plug-in is reported, not fatal.
"""

from __future__ import annotations

import math
from itertools import product

from worldsmith.evals.metrics import METRIC_REGISTRY, MetricFunction, is_symmetric

__all__ = ["EDGE_TEXTS", "edge_problems", "metric_edge_problems", "registered_metric_problems"]

EDGE_TEXTS: tuple[str, ...] = (
    "", " ", "\n\t ", '{"', "(", "[", "...", "You see a mug 1.", "You see a m", "you see a mug 1",
    '{"a": 1, "b": [1, 2]}', '{"a": 1, "b": [1', "café ☕ 42", "a a a",
)  # blank, punctuation-only, ordinary, truncated, JSON and truncated JSON, non-ASCII, repeated words
_TOLERANCE = 1e-9


def _score(function: MetricFunction, prediction: str, reference: str) -> tuple[float | None, str | None]:
    """The score, or the problem with it: an exception, a non-number, a number outside [0, 1]."""
    where = f"({prediction!r}, {reference!r})"
    try:
        value = function(prediction, reference)
    except Exception as error:  # noqa: BLE001  (a plug-in's failure is reported, not raised)
        return None, f"raised {type(error).__name__}: {error} on {where}"
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None, f"returned {value!r}, not a number or None, on {where}"
    if not -_TOLERANCE <= value <= 1 + _TOLERANCE:
        return None, f"returned {value!r}, outside [0, 1], on {where}"
    return float(value), None


def edge_problems(function: MetricFunction, *, symmetric: bool, texts: tuple[str, ...] = EDGE_TEXTS) -> list[str]:
    """Each promise `function` breaks on `texts` (all pairs), one sentence each (the first instance of each kind)."""
    problems: dict[str, str] = {}
    scores: dict[tuple[str, str], float | None] = {}
    for prediction, reference in product(texts, repeat=2):
        value, problem = _score(function, prediction, reference)
        scores[prediction, reference] = value
        if problem is not None:
            problems.setdefault("range", problem)
    for text in texts:
        value = scores[text, text]
        if value is not None and abs(value - 1.0) > _TOLERANCE:
            problems.setdefault("identity", f"scores identical texts {value:g}, not 1, on {text!r}")
    for reference in texts:
        value = scores.get(("", reference))
        if reference.strip() and value is not None and value > _TOLERANCE:
            problems.setdefault("empty", f"scores an empty prediction {value:g}, not 0, against {reference!r}")
    if symmetric:
        for (a, b), value in scores.items():
            other = scores[b, a]
            if (value is None) != (other is None) or (value is not None and other is not None
                                                      and abs(value - other) > _TOLERANCE):
                problems.setdefault("symmetry", f"declares itself symmetric but scores ({a!r}, {b!r}) {value} "
                                                f"and ({b!r}, {a!r}) {other}")
    return list(problems.values())


def metric_edge_problems(name: str) -> list[str]:
    """The edge-case promises registered metric `name` breaks (empty: none)."""
    return edge_problems(METRIC_REGISTRY.get(name), symmetric=is_symmetric(name))


def registered_metric_problems() -> dict[str, list[str]]:
    """Every registered metric that breaks a promise, with what it breaks (what `worldsmith plugins` reports)."""
    found = {name: metric_edge_problems(name) for name in METRIC_REGISTRY.names()}
    return {name: problems for name, problems in found.items() if problems}
