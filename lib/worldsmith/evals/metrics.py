"""How close a predicted observation is to the real one: the text metrics every evaluation reports.

    metric_scores("You see a mug.", "You see a mug 1.")
    # {"exact_match": 0.0, "edit_similarity": 0.8, "token_f1": 0.89, "json_f1": None}

One implementation: exact match, token F1 and edit similarity are `worldsmith.sim.scoring`'s (the
side-by-side view shows the same numbers as a report). All metrics are in [0, 1]: `exact_match`
compares whitespace-normalised text; `token_f1` is the F1 of the two bags of lower-cased words;
`edit_similarity` is 1 - word-level Levenshtein distance / the longer length (rapidfuzz, C speed);
`json_f1` is added here: the F1 of the `path=value` leaves of two JSON observations, None when the
reference is not JSON (so it averages over JSON targets only).

A new metric is one function in one file: `@metric` registers `fn(prediction, reference) -> float | None` (None:
not applicable to this pair), and every evaluation then scores it into its records (`EvalRecord.metrics`),
records.parquet and the report (and so the workbench's leaderboard). An installed package adds one through a `worldsmith.metrics` entry
point (the function, or a module that uses `@metric`). `@metric(symmetric=True)` declares that swapping the two
texts never changes the score (a plain function may say so with a `symmetric = True` attribute); every registered
metric is held to the edge cases in `evals.metric_checks` (`worldsmith plugins` reports one that fails them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, overload

import orjson

from worldsmith.sim.scoring import edit_similarity, exact_match, token_f1, word_tokens
from worldsmith.traces.model import parse_json_text
from worldsmith.util.registry import Registry

__all__ = ["ENTRY_POINT_GROUP", "METRICS", "METRIC_REGISTRY", "MetricFunction", "edit_similarity", "exact_match",
           "flatten_json", "is_symmetric", "json_f1", "metric", "metric_names", "metric_scores", "token_f1",
           "word_tokens"]

METRICS = ("exact_match", "edit_similarity", "token_f1", "json_f1")  # the built-ins: the run store's contract columns

MetricFunction = Callable[[str, str], "float | None"]  # (prediction, reference) -> a score in [0, 1], None: n/a
ENTRY_POINT_GROUP = "worldsmith.metrics"


def _check(name: str, function: MetricFunction) -> None:
    """Every registration, an entry point's included: a function named as a records column can be."""
    if not callable(function):
        raise ValueError(f"metric {name!r} must be a function (prediction, reference) -> float | None")
    if not name.isidentifier():
        raise ValueError(f"metric name {name!r} must be an identifier (it names a records column)")
    if name not in METRICS:
        from worldsmith.evals.eval_records import RECORD_COLUMNS  # lazy: records lists the registered metrics

        if name in RECORD_COLUMNS or name == "metrics":  # `EvalRecord.metrics` holds the plug-ins' scores
            raise ValueError(f"metric name {name!r} is a run-store column already: choose another name")


METRIC_REGISTRY: Registry[MetricFunction] = Registry("metric", entry_point_group=ENTRY_POINT_GROUP, check=_check)
_SYMMETRIC: set[str] = set()  # the names registered with `symmetric=True`


@overload
def metric(function: MetricFunction, /) -> MetricFunction: ...


@overload
def metric(name: str | None = None, /, *, replace: bool = False,
           symmetric: bool = False) -> Callable[[MetricFunction], MetricFunction]: ...


def metric(target: MetricFunction | str | None = None, /, *, replace: bool = False,
           symmetric: bool = False) -> MetricFunction | Callable[[MetricFunction], MetricFunction]:
    """Register a per-record metric under `name` (default: the function's name): `@metric`, `@metric("name")` or
    `@metric(symmetric=True)` (score(a, b) == score(b, a), which the edge checks then hold it to).

    The name becomes a records column, so it must be an identifier and not one of the run store's other columns.
    """
    def register(name: str, function: MetricFunction) -> MetricFunction:
        registered = METRIC_REGISTRY.register(name, function, replace=replace)
        (_SYMMETRIC.add if symmetric else _SYMMETRIC.discard)(name)
        return registered

    if callable(target):
        return register(target.__name__, target)
    return lambda function: register(target or function.__name__, function)


def is_symmetric(name: str) -> bool:
    """Whether metric `name` declares that swapping prediction and reference never changes its score."""
    return name in _SYMMETRIC or getattr(METRIC_REGISTRY.get(name), "symmetric", False) is True


def metric_names() -> list[str]:
    """Every registered metric: the built-ins (`METRICS`) first, then plug-ins in registration order."""
    return METRIC_REGISTRY.names()


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


for _name, _function in (("exact_match", exact_match), ("edit_similarity", edit_similarity),
                         ("token_f1", token_f1), ("json_f1", json_f1)):
    metric(_name, symmetric=_name != "json_f1")(_function)  # json_f1 is None on a non-JSON reference, not prediction


def metric_scores(prediction: str, reference: str) -> dict[str, float | None]:
    """Every registered metric of one prediction against its reference (keys: `metric_names()`, the built-in
    `METRICS` first), unrounded."""
    return {name: function(prediction, reference) for name, function in METRIC_REGISTRY.items()}
