"""Why a method missed, on a real run: a toolshop worldbook built without the conversations that cancel or place
orders, evaluated on those that do. Records name their answer source and flag the unseen tools; the breakdowns
(library and `worldsmith eval misses --json`) count misses by action, source, rule and flag, and no miss that
no rule answered is lumped under a bare "(no rule)"."""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd
import pytest

from worldsmith.cli.main import main
from worldsmith.evals.config import EvalConfig
from worldsmith.evals.misses import GROUPINGS, action_name, miss_groups, why_missed
from worldsmith.evals.records import RECORD_COLUMNS, records_frame
from worldsmith.evals.run import run_eval
from worldsmith.traces import Episode
from worldsmith.worldbook import build_worldbook

REPO = Path(__file__).resolve().parents[2]
EXPERT = REPO / "data_samples" / "toolshop" / "expert.jsonl"
HELD_TOOLS = {"cancel_order", "place_order"}


def _episodes() -> list[Episode]:
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in EXPERT.read_bytes().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def run_records(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, set[str]]:
    episodes = _episodes()
    held = [e for e in episodes if {t.action.name for t in e.turns} & HELD_TOOLS][:4]
    construction = [e for e in episodes if not {t.action.name for t in e.turns} & HELD_TOOLS]
    assert held and construction
    book = build_worldbook(construction, name="shop").book
    seen = {t.action.name for e in construction for t in e.turns}
    root = tmp_path_factory.mktemp("ws")
    config = EvalConfig(name="shop-misses", book="shop", dataset="shop", methods=["harness", "nearest"],
                        resamples=200)
    run_eval(config, root, book=book, episodes=held, construction=construction)
    records = pd.read_parquet(root / "runs" / "eval" / "shop-misses" / "records.parquet")
    return root, records, seen


def test_records_name_their_source_and_flag_unseen_actions(run_records) -> None:
    _, records, seen = run_records
    assert tuple(records.columns) == RECORD_COLUMNS
    assert records["source"].notna().all() and (records["source"].str.len() > 0).all()
    names = records["action"].map(action_name)
    assert (records["unseen_action"] == ~names.isin(seen)).all()
    assert set(names[records["unseen_action"]]) >= HELD_TOOLS & set(names)
    old = records_frame([{"run": "r", "turn": 0, "route": "fast_path"}])  # a run recorded before the columns
    assert old["source"].isna().all() and old["unseen_action"].isna().all()


def test_breakdowns_by_source_rule_and_flag(run_records) -> None:
    _, records, _ = run_records
    harness = records[records["method"] == "harness"]
    by_rule = miss_groups(harness, "exact_match", 1.0, "rule")
    assert "(no rule)" not in set(by_rule["rule"])
    sources = set(harness["source"])
    assert {r.removeprefix("(no rule: ").removesuffix(")") for r in by_rule["rule"] if r.startswith("(no rule")} \
        <= sources
    result = why_missed(records, method="harness")
    assert result["misses"] == int((harness["exact_match"] < 1).sum()) > 0
    assert set(result["by"]) == set(GROUPINGS) and sum(r["wrong"] for r in result["by"]["source"]) == result["misses"]
    assert result["unseen_actions"] == sorted(set(harness["action"][harness["unseen_action"]].map(action_name)))
    flags = {row["flag"]: row for row in result["by"]["flag"]}
    assert flags["unseen_action"]["records"] == int(harness["unseen_action"].sum())
    for by in GROUPINGS:
        assert result["causes"][by] and "% of misses" in result["causes"][by]


def test_eval_misses_on_the_command_line(run_records, capsys: pytest.CaptureFixture[str]) -> None:
    root, records, _ = run_records
    assert main(["eval", "misses", "shop-misses", "--workspace", str(root), "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert [m["method"] for m in out["methods"]] == ["harness", "nearest"]
    assert out["methods"][0]["by"]["source"] and out["methods"][0]["unseen_actions"]
    assert main(["eval", "misses", "shop-misses", "--method", "harness", "--workspace", str(root)]) == 0
    text = capsys.readouterr().out
    assert "unseen actions (never in the construction data)" in text and "by source: answered by" in text
    assert main(["eval", "misses", "nope", "--workspace", str(root)]) != 0


def test_shared_cause_names_what_answered_the_flags_and_empty_predictions() -> None:
    from worldsmith.evals.misses import shared_cause

    frame = pd.DataFrame({
        "action": ["get_user {}", "get_user {}", "refund {}"], "prediction": ["", None, "x"],
        "source": ["nearest_evidence", "nearest_evidence", "rule"], "route": ["fallback:nearest_evidence"] * 3,
        "unseen_action": [True, True, False], "novel": [False, False, True], "error": [None, None, None],
    })
    assert shared_cause(frame) == ("answered by nearest_evidence: 2 of 3; action never in the construction data: "
                                   "2 of 3 (get_user); observation shows values nothing before it showed: 1 of 3; "
                                   "empty prediction: 2 of 3")
    assert shared_cause(frame.iloc[0:0]) == ""
