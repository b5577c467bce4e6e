"""The tiny model as predictor (direct prompting) and as judge on short episodes: costs are counted, unusable
judge replies become null scores and are counted, and a repeated run is served by the response cache."""

from __future__ import annotations

from pathlib import Path

from worldsmith.evals import EvalConfig, run_eval
from worldsmith.llm import ResponseCache
from worldsmith.sim.route_learning import build_simulator_book


def test_tiny_model_predicts_and_judges(sample, tiny_spec: str, tmp_path: Path) -> None:
    episodes = sample("textworld")
    evaluated = [e for e in episodes if "treasure_hunter" in e.id]  # 2 turns
    built = [e for e in episodes if e not in evaluated]
    book = build_simulator_book(built, name="textworld").book
    config = EvalConfig(name="tiny", book="textworld", dataset="samples", methods=["direct", "nearest"],
                        protocol="next-obs", llm=tiny_spec, judge=tiny_spec, resamples=500)
    run = run_eval(config, tmp_path / "ws", book=book, episodes=evaluated, construction=built)
    records = run.records
    direct = records[records["method"] == "direct"]
    assert len(direct) == len(evaluated[0].turns)
    assert (direct["model_calls"] == 1).all() and (direct["prompt_tokens"] > 0).all()
    assert (direct["completion_tokens"] > 0).all() and (direct["cost_usd"] == 0).all()  # no price configured
    assert (records[records["method"] == "nearest"]["model_calls"] == 0).all()
    judged = records["judge_total"]
    assert judged.dropna().between(0, 100).all()
    for dimension in ("format", "factuality", "consistency", "realism", "quality"):
        assert records[f"judge_{dimension}"].dropna().isin([1.0, 2.0, 3.0, 4.0, 5.0]).all()
    report = run.report
    assert report.judge == tiny_spec
    assert report.judge_stats is not None and report.judge_stats.model_dump() == {
        "records": len(records), "valid": int(judged.notna().sum()), "invalid": int(judged.isna().sum())}
    assert report.judge_usage is not None
    assert report.judge_usage["calls"] >= len(records)  # every record judged (with retries when invalid)
    assert (report.cost["direct"].prompt_tokens or 0) > 0
    assert ResponseCache(tmp_path / "ws" / "llm" / "cache.sqlite").stats()["entries"] > 0

    again = run_eval(config.model_copy(update={"name": "tiny-again"}), tmp_path / "ws", book=book,
                     episodes=evaluated, construction=built)
    columns = ["method", "turn", "prediction", "judge_total"]
    assert again.records[columns].equals(records[columns])  # greedy and cached: the same answers
    assert again.report.fingerprint == report.fingerprint
