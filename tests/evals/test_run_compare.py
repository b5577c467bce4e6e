"""Two evaluation runs turn by turn: pairing, differences first, the paired interval, and `eval compare`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd
import pytest

from worldsmith.cli.main import main
from worldsmith.evals import EvalRunStore
from worldsmith.evals.run_compare import compare_runs
from worldsmith.util.errors import BadInputError, NotFoundError


def _records(run: str, wrong: set[tuple[str, int]], episodes: int = 12, turns: int = 3,
             method: str = "harness") -> pd.DataFrame:
    rows = []
    for e in range(episodes):
        for t in range(turns):
            miss = (f"ep-{e}", t) in wrong
            rows.append({"run": run, "protocol": "next-obs", "method": method, "episode_id": f"ep-{e}", "turn": t,
                         "action": f"act {t}", "reference": f'{{"amount": {t}}}',
                         "prediction": f'{{"amount": {t + 1 if miss else t}}}', "exact_match": 0.0 if miss else 1.0})
    return pd.DataFrame(rows)


def test_pairs_by_turn_lists_differences_first_with_a_paired_interval() -> None:
    a = _records("a", {(f"ep-{e}", 1) for e in range(12)})  # A misses turn 1 everywhere
    b = _records("b", {("ep-0", 1)})  # B fixes all but one
    comparison = compare_runs(a, b, run_a="a", run_b="b", resamples=2000)
    assert len(comparison.turns) == 36 and comparison.only_a == 0 and comparison.only_b == 0
    assert comparison.differing == 11
    assert all(turn.differs for turn in comparison.turns[:11]) and not any(t.differs for t in comparison.turns[11:])
    first = comparison.turns[0]
    assert (first.turn, first.score_a, first.score_b, first.change) == (1, 0.0, 1.0, 1.0)
    assert first.prediction_a == '{"amount": 2}' and first.prediction_b == '{"amount": 1}'
    interval = comparison.interval
    assert interval is not None
    assert interval.mean == pytest.approx(11 / 36)
    assert 0 < interval.low <= interval.mean <= interval.high and interval.trajectories == 12


def test_only_turns_both_runs_scored_count() -> None:
    a = _records("a", set(), episodes=4)
    b = _records("b", set(), episodes=6)
    comparison = compare_runs(a, b)
    assert (len(comparison.turns), comparison.only_a, comparison.only_b) == (12, 0, 6)
    assert comparison.differing == 0 and comparison.interval is not None and comparison.interval.mean == 0.0
    other_method = compare_runs(a, _records("b", set(), method="nearest"))
    assert other_method.turns == () and other_method.interval is None


def test_a_run_without_the_metric_is_refused() -> None:
    with pytest.raises(BadInputError, match="judge_total"):
        compare_runs(_records("a", set()), _records("b", set()), metric="judge_total")
    with pytest.raises(BadInputError, match="no records"):
        compare_runs(pd.DataFrame(), _records("b", set()))


def _store_run(root: Path, run: str, records: pd.DataFrame) -> None:
    folder = EvalRunStore(root).run(run).path
    folder.mkdir(parents=True)
    records.to_parquet(folder / "records.parquet", index=False)


def test_eval_compare_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store_run(tmp_path, "a", _records("a", {("ep-3", 2)}))
    _store_run(tmp_path, "b", _records("b", set()))
    root = str(tmp_path)
    assert main(["eval", "compare", "a", "b", "--workspace", root, "--resamples", "500", "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert (out["paired"], out["differing"], out["run_a"], out["run_b"]) == (36, 1, "a", "b")
    assert out["turns"][0]["episode_id"] == "ep-3" and out["turns"][0]["change"] == 1.0
    assert out["difference"]["mean_diff"] == pytest.approx(1 / 36)
    assert main(["eval", "compare", "a", "b", "--workspace", root, "--resamples", "500"]) == 0
    text = capsys.readouterr().out
    assert "36 turns paired, 1 differ" in text and "ep-3 turn 2" in text
    assert main(["eval", "compare", "a", "nope", "--workspace", root]) == NotFoundError.exit_code
    assert "no evaluation run 'nope'" in capsys.readouterr().err
