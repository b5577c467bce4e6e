"""Paired bootstrap over trajectories: intervals that respect that turns of one episode are not independent.

Records (one per method, episode, turn) are resampled by *episode*: each resample draws episode ids
with replacement and takes every record of the drawn episodes, so a method's mean is a ratio of sums
(records per episode differ) and its interval is the 2.5th-97.5th percentile of the resampled means.
A pair of methods is compared on the records both have (same episode and turn, metric not null):
the statistic is the mean paired difference A - B. The same seed draws the same episode resamples
for every method and pair of one episode set, and the seed goes into the report.

    summarize(records, metrics=["exact_match"], methods=["harness", "nearest"], resamples=10_000, seed=0)
    # {"methods": {"harness": {"exact_match": {"mean", "low", "high", "n", "trajectories"}}}, "pairs": ...}

Every entry says over how many trajectories (episodes) it was resampled: an interval over fewer
than `SMALL_SAMPLE` of them is shaky, and `small_sample_note` is what screens print beside it.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "SMALL_SAMPLE",
    "Interval",
    "bootstrap_mean",
    "bootstrap_ratio",
    "bootstrap_ratios",
    "cluster_sums",
    "pair_name",
    "small_sample_note",
    "summarize",
]

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
SMALL_SAMPLE = 10  # intervals resampled over fewer trajectories than this are marked
_CHUNK_CELLS = 4_000_000  # resamples x episodes drawn per chunk (bounded memory for large sets)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile interval; `n` counts records, `trajectories` the clusters resampled."""

    mean: float
    low: float
    high: float
    n: int
    trajectories: int = 0

    def to_json(self, key: str = "mean") -> dict[str, Any]:
        return {key: self.mean, "low": self.low, "high": self.high, "n": self.n, "trajectories": self.trajectories}


def small_sample_note(trajectories: Any) -> str:
    """`"only N trajectories"` when an interval was resampled over fewer than `SMALL_SAMPLE` of them, else ""."""
    if isinstance(trajectories, dict):
        trajectories = trajectories.get("trajectories")
    if not isinstance(trajectories, numbers.Real) or isinstance(trajectories, bool) or trajectories != trajectories:
        return ""
    count = int(float(trajectories))
    if count <= 0 or count >= SMALL_SAMPLE:
        return ""
    return f"only {count} trajector{'y' if count == 1 else 'ies'}"


def pair_name(a: str, b: str) -> str:
    """The report's key of a pair: the difference is `a - b`."""
    return f"{a} vs {b}"


def cluster_sums(clusters: Sequence[Any], values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster (episode): the sum of its values and how many there are, in first-seen cluster order."""
    frame = pd.DataFrame({"cluster": list(clusters), "value": np.asarray(values, dtype=float)})
    grouped = frame.groupby("cluster", sort=False)["value"]
    return grouped.sum().to_numpy(dtype=float), grouped.count().to_numpy(dtype=float)


def _resampled_sums(columns: Sequence[np.ndarray], resamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """For each per-cluster column, its total over `resamples` draws of the clusters with replacement."""
    clusters = len(columns[0])
    out = [np.empty(resamples, dtype=float) for _ in columns]
    step = max(1, _CHUNK_CELLS // max(clusters, 1))
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        draws = rng.integers(0, clusters, size=(stop - start, clusters))
        for column, target in zip(columns, out, strict=True):
            target[start:stop] = column[draws].sum(axis=1)
    return out


def _interval(point: float, stats: np.ndarray, n: int, confidence: float, trajectories: int) -> Interval:
    finite = stats[np.isfinite(stats)]
    if finite.size == 0:
        return Interval(point, float("nan"), float("nan"), n, trajectories)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    # Floating-point noise around the point is no width: a constant statistic gets a zero-width interval.
    low = point if abs(low - point) < 1e-12 else float(low)
    high = point if abs(high - point) < 1e-12 else float(high)
    return Interval(float(point), float(low), float(high), n, trajectories)


def bootstrap_mean(clusters: Sequence[Any], values: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                   seed: int = 0, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """The mean of `values` with a cluster-bootstrap percentile interval (clusters = episode ids)."""
    if len(values) == 0:
        raise ValueError("bootstrap_mean needs at least one value")
    sums, counts = cluster_sums(clusters, values)
    point = float(sums.sum() / counts.sum())
    total, number = _resampled_sums([sums, counts], resamples, np.random.default_rng(seed))
    return _interval(point, total / number, len(values), confidence, len(sums))


def bootstrap_ratio(clusters: Sequence[Any], numerator: Sequence[float], denominator: Sequence[float], *,
                    resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                    confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """mean(numerator) / mean(denominator) over the same records (e.g. W2R / Real success), resampled by cluster.

    Resamples whose denominator is 0 are left out of the interval; the point is NaN when it is 0 overall.
    """
    if len(numerator) == 0 or len(numerator) != len(denominator):
        raise ValueError("bootstrap_ratio needs two equally long, non-empty value lists")
    top, _ = cluster_sums(clusters, numerator)
    bottom, _ = cluster_sums(clusters, denominator)
    point = float(top.sum() / bottom.sum()) if bottom.sum() else float("nan")
    a, b = _resampled_sums([top, bottom], resamples, np.random.default_rng(seed))
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = np.where(b > 0, a / np.where(b > 0, b, 1.0), np.nan)
    return _interval(point, stats, len(numerator), confidence, len(top))


Column = Sequence[float] | np.ndarray  # one value per record


def bootstrap_ratios(clusters: Sequence[Any], ratios: Sequence[tuple[Column, Column]], *,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                     confidence: float = DEFAULT_CONFIDENCE) -> list[Interval]:
    """`bootstrap_ratio` for many (numerator, denominator) columns over the same records, on one set of cluster
    draws: the breakdown rows of one table (a row's share = its indicator times the value, over its indicator)
    cost one resampling, not one each. `trajectories` counts the clusters where the denominator is not 0."""
    if not ratios:
        return []
    if any(len(top) != len(clusters) or len(bottom) != len(clusters) for top, bottom in ratios):
        raise ValueError("bootstrap_ratios needs every column as long as the clusters")
    codes, uniques = pd.factorize(pd.Series(list(clusters), dtype=object), sort=False)  # cluster_sums' order
    columns = [np.bincount(codes, weights=np.asarray(values, dtype=float), minlength=len(uniques))
               for top, bottom in ratios for values in (top, bottom)]
    totals = _resampled_sums(columns, resamples, np.random.default_rng(seed))
    out = []
    for index in range(len(ratios)):
        top, bottom = columns[2 * index], columns[2 * index + 1]
        a, b = totals[2 * index], totals[2 * index + 1]
        point = float(top.sum() / bottom.sum()) if bottom.sum() else float("nan")
        with np.errstate(divide="ignore", invalid="ignore"):
            stats = np.where(b > 0, a / np.where(b > 0, b, 1.0), np.nan)
        out.append(_interval(point, stats, int(np.count_nonzero(np.asarray(ratios[index][1], dtype=float))),
                             confidence, int(np.count_nonzero(bottom))))
    return out


def _clean(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), 6)


def _entry(interval: Interval, key: str = "mean") -> dict[str, Any]:
    return {key: _clean(interval.mean), "low": _clean(interval.low), "high": _clean(interval.high), "n": interval.n,
            "trajectories": interval.trajectories}


def summarize(records: pd.DataFrame, *, metrics: Sequence[str], methods: Sequence[str] | None = None,
              resamples: int = DEFAULT_RESAMPLES, seed: int = 0, confidence: float = DEFAULT_CONFIDENCE,
              cluster: str = "episode_id", unit: Sequence[str] = ("episode_id", "turn")) -> dict[str, Any]:
    """Every method's mean and every pair's mean paired difference, with bootstrap intervals.

    `records` has columns `method`, `cluster`, the `unit` columns (what identifies the same record
    across methods) and the metrics; null metric values are left out (a metric nobody has is left
    out of that method's entry). Pairs follow the order of `methods`: "A vs B" is A - B.
    """
    methods = list(methods) if methods is not None else list(dict.fromkeys(records["method"]))
    out: dict[str, Any] = {"methods": {}, "pairs": {}}
    by_method = {m: records[records["method"] == m] for m in methods}
    for method in methods:
        entry: dict[str, Any] = {}
        frame = by_method[method]
        for metric in metrics:
            if metric not in frame:
                continue
            valid = frame[frame[metric].notna()]
            if len(valid):
                entry[metric] = _entry(bootstrap_mean(valid[cluster].tolist(), valid[metric].astype(float).tolist(),
                                                      resamples=resamples, seed=seed, confidence=confidence))
        out["methods"][method] = entry
    keys = list(unit)
    for i, a in enumerate(methods):
        for b in methods[i + 1:]:
            entry = {}
            for metric in metrics:
                if metric not in by_method[a] or metric not in by_method[b]:
                    continue
                left = by_method[a][[*dict.fromkeys([cluster, *keys]), metric]].dropna(subset=[metric])
                right = by_method[b][[*keys, metric]].dropna(subset=[metric])
                joined = left.merge(right, on=keys, suffixes=("_a", "_b"))
                if joined.empty:
                    continue
                diff = joined[f"{metric}_a"].astype(float) - joined[f"{metric}_b"].astype(float)
                interval = bootstrap_mean(joined[cluster].tolist(), diff.tolist(), resamples=resamples, seed=seed,
                                          confidence=confidence)
                entry[metric] = _entry(interval, "mean_diff")
            out["pairs"][pair_name(a, b)] = entry
    return out
