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
from worldsmith.evals.eval_records import RECORD_COLUMNS, records_frame
from worldsmith.evals.misses import GROUPINGS, action_name, miss_groups, why_missed
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
    row = out["methods"][0]["by"]["action"][0]
    assert row["error_rate_low"] <= row["error_rate"] <= row["error_rate_high"] and row["trajectories"] >= 1
    [pair] = out["pairs"]
    assert pair["pair"] == "harness vs nearest" and set(pair["by"]) == {"action", "source", "flag"}
    for diff in pair["by"]["action"]:
        assert diff["low"] <= diff["mean_diff"] <= diff["high"]
        harness = records[(records["method"] == "harness") & (records["action"].map(action_name) == diff["action"])]
        assert diff["turns"] == len(harness)
    assert main(["eval", "misses", "shop-misses", "--method", "harness", "--workspace", str(root)]) == 0
    text = capsys.readouterr().out
    assert "unseen actions (never in the construction data)" in text and "by source: answered by" in text
    assert "95% intervals" in text and "harness vs nearest: paired difference" in text
    assert main(["eval", "misses", "nope", "--workspace", str(root)]) != 0


def test_shared_cause_names_what_answered_the_flags_and_empty_predictions() -> None:
    from worldsmith.evals.misses import shared_cause

    frame = pd.DataFrame({
        "action": ["get_user {}", "get_user {}", "refund {}"], "prediction": ["", None, "x"],
        "source": ["nearest_evidence", "nearest_evidence", "rule"], "route": ["fallback:nearest_evidence"] * 3,
        "unseen_action": [True, True, False], "novel": [False, False, True], "error": [None, None, None],
    })
    assert shared_cause(frame) == ("novel turns (values no simulator could know): 1 of 3; answered by "
                                   "nearest_evidence: 2 of 3; action never in the construction data: 2 of 3 "
                                   "(get_user); empty prediction: 2 of 3")
    assert shared_cause(frame.iloc[0:0]) == ""


def _constructed() -> pd.DataFrame:
    """20 episodes of 4 turns: 'refund' turns wrong in every other episode for both methods (the same turns), 'lookup'
    turns always right for harness and always wrong for nearest."""
    rows = []
    for episode in range(20):
        for turn in range(4):
            action = "refund {}" if turn % 2 else "lookup {}"
            for method in ("harness", "nearest"):
                wrong = episode % 2 == 0 if action.startswith("refund") else method == "nearest"
                rows.append({"method": method, "episode_id": f"e{episode}", "turn": turn, "action": action,
                             "exact_match": 0.0 if wrong else 1.0, "protocol": "next-obs", "env_id": "shop",
                             "source": "rule" if method == "harness" else "nearest_evidence"})
    return pd.DataFrame(rows)


def test_breakdown_rows_carry_cluster_bootstrap_intervals() -> None:
    records = _constructed()
    harness = records[records["method"] == "harness"]
    rows = miss_groups(harness, "exact_match", 1.0, "action", resamples=2000).set_index("action")
    refund, lookup = rows.loc["refund"], rows.loc["lookup"]
    assert refund["error_rate"] == 0.5 and refund["error_rate_low"] < 0.5 < refund["error_rate_high"]
    assert refund["error_rate_low"] > 0.1 and refund["error_rate_high"] < 0.9 and refund["trajectories"] == 20
    assert lookup["error_rate_low"] == lookup["error_rate_high"] == 0.0  # never wrong in any resample
    assert refund["share_low"] == refund["share_high"] == 1.0  # every miss is a refund miss
    # every miss of a refund sits in half the episodes: resampled by episode the interval is wider than if each
    # turn were its own episode
    alone = harness.assign(episode_id=[f"t{i}" for i in range(len(harness))])
    iid = miss_groups(alone, "exact_match", 1.0, "action", resamples=2000).set_index("action").loc["refund"]
    assert (refund["error_rate_high"] - refund["error_rate_low"]) >= (iid["error_rate_high"] - iid["error_rate_low"])
    assert "error_rate_low" not in miss_groups(harness, "exact_match", 1.0, "action").columns


def test_paired_differences_per_row_on_the_same_turns() -> None:
    from worldsmith.evals.misses import differs, paired_miss_differences

    result = paired_miss_differences(_constructed(), "harness", "nearest", resamples=2000)
    assert result["pair"] == "harness vs nearest" and result["turns"] == 80
    by_action = {row["action"]: row for row in result["by"]["action"]}
    lookup, refund = by_action["lookup"], by_action["refund"]
    assert lookup["mean_diff"] == lookup["low"] == lookup["high"] == -1.0 and differs(lookup)
    # the same refund turns are wrong for both: paired, every resample's difference is 0 (unpaired it would not be)
    assert refund["mean_diff"] == refund["low"] == refund["high"] == 0.0 and not differs(refund)
    assert refund["error_rate_a"] == refund["error_rate_b"] == 0.5
    by_source = {row["source"]: row for row in result["by"]["source"]}
    assert set(by_source) == {"rule"} and by_source["rule"]["turns"] == 80  # the rows are harness's sources
    assert -0.75 < by_source["rule"]["low"] <= by_source["rule"]["mean_diff"] == -0.5 <= by_source["rule"]["high"]
    assert set(result["by"]) == {"action", "source", "flag"}


def test_the_headline_counts_novel_turns_before_what_answered() -> None:
    """The report that said "answered by nearest_evidence: 99%" while 118 of 142 misses were novel turns."""
    calls = ("get_order {}", "get_user {}", "list_orders {}")
    rows = [{"method": "nearest", "episode_id": f"e{i % 20}", "turn": i, "action": calls[i % 3],
             "source": "nearest_evidence" if i < 140 else "rule", "novel": i < 118, "unseen_action": False,
             "exact_match": 0.0 if i < 142 else 1.0} for i in range(160)]
    records = pd.DataFrame(rows)
    by_source = miss_groups(records, "exact_match", 1.0, "source")
    from worldsmith.evals.misses import biggest_cause, miss_headline

    assert biggest_cause(by_source, "source") == "answered by nearest_evidence: 99% of misses (140 of 140 wrong)"
    assert miss_headline(records) == ("118 of 142 misses are novel turns (values no simulator could know); of the "
                                      "other 24, 22 were answered by nearest_evidence")
    # a flag that explains as many misses as a source wins the tie: it is a cause, the source only answered
    records.loc[records["turn"].between(118, 139), "unseen_action"] = True
    assert miss_headline(records).endswith("of the other 24, 22 called an action never in the construction data "
                                           "(get_order, get_user, list_orders)")
    assert miss_headline(records.assign(novel=True)) == "all 142 misses are novel turns (values no simulator could know)"
    assert miss_headline(records.assign(novel=False)).startswith("none of the 142 misses is a novel turn; 140 ")
    assert miss_headline(records.drop(columns="novel")).startswith("142 misses: 140 ")
    assert miss_headline(records.assign(exact_match=1.0)) is None
    one = records.assign(exact_match=[0.0] + [1.0] * (len(records) - 1))
    assert miss_headline(one) == "the 1 miss is a novel turn (values no simulator could know)"


def test_the_headline_leads_why_missed_the_cli_and_report_md(run_records, capsys: pytest.CaptureFixture[str]) -> None:
    root, records, _ = run_records
    folder = root / "runs" / "eval" / "shop-misses"
    report_md = (folder / "report.md").read_text(encoding="utf-8")
    report = orjson.loads((folder / "report.json").read_bytes())
    mixed = 0
    for protocol in ("drift", "next-obs"):
        for method in ("harness", "nearest"):
            mine = records[(records["protocol"] == protocol) & (records["method"] == method)]
            wrong = mine[mine["exact_match"] < 1]
            novel = int(wrong["novel"].fillna(False).astype(bool).sum())
            headline = why_missed(mine, method=method, resamples=None)["headline"]
            assert headline is not None and f"- `{method}`: {headline}" in report_md
            assert report["by_protocol"][protocol]["failures"][method] == headline
            if 0 < novel < len(wrong):  # both kinds of miss: the novel ones counted first, then the rest's cause
                mixed += 1
                assert headline.startswith(f"{novel} of {len(wrong)} misses are novel turns (values no simulator "
                                           f"could know); of the other {len(wrong) - novel}, ")
    assert mixed
    assert main(["eval", "misses", "shop-misses", "--method", "harness", "--resamples", "0",
                 "--workspace", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"  {why_missed(records, method='harness', resamples=None)['headline']}"
