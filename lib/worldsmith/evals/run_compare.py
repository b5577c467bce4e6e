"""Two evaluation runs turn by turn: the same (protocol, method, episode, turn) paired, where they differ first,
and the paired interval of the metric's difference.

    comparison = EvalRunStore(root).compare("before", "after", metric="exact_match")
    comparison.interval        # mean of B − A over the paired turns, 95% bootstrap over episodes
    comparison.turns[0]        # a turn whose prediction or score differs, the largest score change first

Each run's report has its own intervals over its own records; two runs made on different episodes, or with a
different turn limit, cannot be compared by those. Here only the turns both runs scored count, and the episodes
are resampled with both runs' turns together, so the interval is about the change, not about two samples.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from worldsmith.evals.bootstrap import DEFAULT_RESAMPLES, Interval, bootstrap_mean
from worldsmith.util.errors import BadInputError

__all__ = ["KEY", "PairedTurn", "RunComparison", "compare_runs"]

KEY = ("protocol", "method", "episode_id", "turn")  # what pairs a record of run A with one of run B
_SHOWN = ("action", "reference", "prediction")


@dataclass(frozen=True, slots=True)
class PairedTurn:
    """One turn both runs scored: what each predicted and scored, and whether they differ (text or score)."""

    protocol: str
    method: str
    episode_id: str
    turn: int
    action: str
    reference: str
    prediction_a: str
    prediction_b: str
    score_a: float | None
    score_b: float | None
    differs: bool

    @property
    def change(self) -> float | None:
        """score B − score A (None when either is not scored)."""
        return None if self.score_a is None or self.score_b is None else self.score_b - self.score_a

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change}


@dataclass(frozen=True, slots=True)
class RunComparison:
    """Run B against run A on the turns both scored (`turns`: differing ones first, the biggest change first)."""

    run_a: str
    run_b: str
    metric: str
    turns: tuple[PairedTurn, ...]
    only_a: int  # turns run A scored that run B did not
    only_b: int
    interval: Interval | None  # of B − A over the turns both scored; None when none has the metric in both

    @property
    def differing(self) -> int:
        return sum(turn.differs for turn in self.turns)

    def to_json(self) -> dict[str, Any]:
        return {"run_a": self.run_a, "run_b": self.run_b, "metric": self.metric, "paired": len(self.turns),
                "differing": self.differing, "only_a": self.only_a, "only_b": self.only_b,
                "difference": None if self.interval is None else self.interval.to_json("mean_diff"),
                "turns": [turn.to_json() for turn in self.turns]}


def _scored(records: pd.DataFrame, run: str, metric: str) -> pd.DataFrame:
    """The per-turn records of a run, one per pairing key (a W2R record has no turn to pair)."""
    missing = [column for column in (*KEY, *_SHOWN) if column not in records.columns]
    if records.empty:
        raise BadInputError(f"run {run!r} has no records (yet)")
    if missing:
        raise BadInputError(f"run {run!r}'s records lack {', '.join(missing)}")
    if metric not in records.columns:
        raise BadInputError(f"run {run!r} has no metric {metric!r} in its records")
    frame = records[records["turn"] >= 0][[*KEY, *_SHOWN, metric]].copy()
    frame["protocol"] = frame["protocol"].fillna("")
    frame["method"] = frame["method"].fillna("")
    frame["turn"] = frame["turn"].astype(int)
    return frame.drop_duplicates(subset=list(KEY), keep="last")


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _score(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def compare_runs(records_a: pd.DataFrame, records_b: pd.DataFrame, *, run_a: str = "A", run_b: str = "B",
                 metric: str = "exact_match", method: str | None = None, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = 0) -> RunComparison:
    """Pair two runs' records (records.parquet frames) by protocol, method, episode and turn (of `method` only
    when given); BadInputError when a run has no per-turn records or lacks the metric."""
    a, b = _scored(records_a, run_a, metric), _scored(records_b, run_b, metric)
    if method is not None:
        a, b = a[a["method"] == method], b[b["method"] == method]
    paired = a.merge(b, on=list(KEY), suffixes=("_a", "_b"), how="inner")
    turns = []
    for row in paired.itertuples(index=False):
        values = row._asdict()
        score_a, score_b = _score(values[f"{metric}_a"]), _score(values[f"{metric}_b"])
        prediction_a, prediction_b = _text(values["prediction_a"]), _text(values["prediction_b"])
        turns.append(PairedTurn(
            protocol=str(values["protocol"]), method=str(values["method"]), episode_id=str(values["episode_id"]),
            turn=int(values["turn"]), action=_text(values["action_a"]), reference=_text(values["reference_a"]),
            prediction_a=prediction_a, prediction_b=prediction_b, score_a=score_a, score_b=score_b,
            differs=prediction_a != prediction_b or score_a != score_b))
    turns.sort(key=lambda t: (not t.differs, -abs(t.change or 0.0), t.protocol, t.method, t.episode_id, t.turn))
    both = [t for t in turns if t.change is not None]
    interval = None
    if both:
        interval = bootstrap_mean([f"{t.episode_id}" for t in both], [t.change or 0.0 for t in both],
                                  resamples=resamples, seed=seed)
    return RunComparison(run_a=run_a, run_b=run_b, metric=metric, turns=tuple(turns),
                         only_a=len(a) - len(paired), only_b=len(b) - len(paired), interval=interval)
