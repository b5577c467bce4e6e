"""The paired bootstrap against closed-form cases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from worldsmith.evals.bootstrap import bootstrap_mean, bootstrap_ratio, summarize


def _records(method: str, values: dict[str, list[float | None]], metric: str = "exact_match") -> list[dict]:
    return [{"method": method, "episode_id": episode, "turn": turn, metric: value}
            for episode, series in values.items() for turn, value in enumerate(series)]


def test_constant_paired_difference_has_a_zero_width_interval() -> None:
    rng = np.random.default_rng(1)
    base = {f"e{i}": list(rng.uniform(0, 0.7, size=int(rng.integers(1, 6)))) for i in range(30)}
    shifted = {episode: [v + 0.25 for v in series] for episode, series in base.items()}
    frame = pd.DataFrame(_records("a", shifted) + _records("b", base))
    pair = summarize(frame, metrics=["exact_match"], methods=["a", "b"], resamples=2000, seed=0)["pairs"]["a vs b"]
    entry = pair["exact_match"]
    assert entry["mean_diff"] == pytest.approx(0.25)
    assert entry["low"] == entry["high"] == entry["mean_diff"]
    assert entry["n"] == sum(len(s) for s in base.values())


def test_bernoulli_mean_standard_error_matches_the_closed_form() -> None:
    n, p = 400, 0.3
    values = [1.0] * int(n * p) + [0.0] * int(n * (1 - p))
    interval = bootstrap_mean([f"e{i}" for i in range(n)], values, resamples=10_000, seed=0)
    assert interval.mean == pytest.approx(p)
    expected_se = math.sqrt(p * (1 - p) / n)  # 0.0229
    assert (interval.high - interval.low) / (2 * 1.959964) == pytest.approx(expected_se, rel=0.1)
    assert interval.low < p < interval.high and interval.n == n


def test_resampling_is_by_episode_not_by_turn() -> None:
    """Ten identical turns per episode: the interval is that of 100 episodes, not of 1000 independent turns."""
    episodes, turns, p = 100, 10, 0.3
    clusters = [f"e{i}" for i in range(episodes) for _ in range(turns)]
    values = [1.0 if i < episodes * p else 0.0 for i in range(episodes) for _ in range(turns)]
    interval = bootstrap_mean(clusters, values, resamples=10_000, seed=3)
    per_episode_se = math.sqrt(p * (1 - p) / episodes)  # 0.0458; iid turns would give 0.0145
    assert (interval.high - interval.low) / (2 * 1.959964) == pytest.approx(per_episode_se, rel=0.15)


def test_seeded_and_reproducible() -> None:
    rng = np.random.default_rng(7)
    values = list(rng.uniform(size=50))
    clusters = [f"e{i % 12}" for i in range(50)]
    first = bootstrap_mean(clusters, values, resamples=3000, seed=11)
    assert bootstrap_mean(clusters, values, resamples=3000, seed=11) == first
    assert bootstrap_mean(clusters, values, resamples=3000, seed=12) != first


def test_pairs_use_only_the_records_both_methods_have_and_skip_nulls() -> None:
    a = _records("a", {"e1": [1.0, 1.0, None], "e2": [0.0, 1.0], "e3": [1.0]})
    b = _records("b", {"e1": [0.0, 1.0, 0.0], "e2": [0.0]})  # no e2#1, no e3
    frame = pd.DataFrame(a + b)
    out = summarize(frame, metrics=["exact_match"], methods=["a", "b"], resamples=500, seed=0)
    assert out["methods"]["a"]["exact_match"]["n"] == 5 and out["methods"]["b"]["exact_match"]["n"] == 4
    pair = out["pairs"]["a vs b"]["exact_match"]
    assert pair["n"] == 3  # e1#0, e1#1, e2#0 (e1#2 is null for a)
    assert pair["mean_diff"] == pytest.approx((1 + 0 + 0) / 3)
    assert out["methods"]["a"]["exact_match"]["mean"] == pytest.approx(4 / 5)


def test_ratio_of_equal_series_is_one_with_zero_width() -> None:
    clusters = [f"e{i}" for i in range(20)]
    values = [float(i % 3 == 0) for i in range(20)]
    interval = bootstrap_ratio(clusters, values, values, resamples=2000, seed=0)
    assert interval.mean == interval.low == interval.high == 1.0
    assert math.isnan(bootstrap_ratio(clusters, values, [0.0] * 20, resamples=200, seed=0).mean)


def test_entries_count_their_trajectories_and_small_samples_are_marked() -> None:
    from worldsmith.evals.bootstrap import SMALL_SAMPLE, small_sample_note

    a = _records("a", {"e1": [1.0, 1.0, None], "e2": [0.0, 1.0], "e3": [1.0]})
    b = _records("b", {"e1": [0.0, 1.0, 0.0], "e2": [0.0]})
    out = summarize(pd.DataFrame(a + b), metrics=["exact_match"], methods=["a", "b"], resamples=200, seed=0)
    entry = out["methods"]["a"]["exact_match"]
    assert entry["trajectories"] == 3 and out["methods"]["b"]["exact_match"]["trajectories"] == 2
    assert out["pairs"]["a vs b"]["exact_match"]["trajectories"] == 2  # e1 and e2 are the paired ones
    assert small_sample_note(entry) == "only 3 trajectories" and small_sample_note(1) == "only 1 trajectory"
    many = bootstrap_mean([f"e{i}" for i in range(SMALL_SAMPLE)], [1.0] * SMALL_SAMPLE, resamples=50)
    assert many.trajectories == SMALL_SAMPLE and small_sample_note(many.to_json()) == ""
    assert small_sample_note(None) == small_sample_note({"n": 4}) == ""  # old reports say nothing: no mark


def test_many_ratios_on_one_set_of_draws_match_each_ratio_alone() -> None:
    from worldsmith.evals.bootstrap import bootstrap_ratios

    rng = np.random.default_rng(3)
    clusters = [f"e{i // 4}" for i in range(80)]
    member = (rng.random(80) < 0.5).astype(float)
    wrong = (rng.random(80) < 0.3).astype(float)
    columns = [(wrong * member, member), (wrong * member, wrong), (wrong, np.ones(80))]
    together = bootstrap_ratios(clusters, columns, resamples=500, seed=7)
    for interval, (top, bottom) in zip(together, columns, strict=True):
        alone = bootstrap_ratio(clusters, top, bottom, resamples=500, seed=7)
        assert (interval.mean, interval.low, interval.high) == (alone.mean, alone.low, alone.high)
    assert together[0].trajectories == len({c for c, m in zip(clusters, member, strict=True) if m})
    assert together[2].trajectories == 20 and together[0].n == int(member.sum())
    with pytest.raises(ValueError, match="as long as the clusters"):
        bootstrap_ratios(clusters, [(wrong[:10], member)])
    assert bootstrap_ratios(clusters, []) == []
