"""The Evaluate page under AppTest: runs listed, leaderboard with intervals, forest plot, win/lose records,
failures grouped and clustered, two runs compared.

The run folders are written per the run-store contract by eval_fixtures (exact, countable contents).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from eval_fixtures import write_run
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, press_launch, shown

PAGE = REPO / "pages" / "evaluate.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page(tab: str | None = None) -> AppTest:
    """The page, on `tab` when given (only the open tab is drawn; the default is Results)."""
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    no_exception(at.switch_page(str(PAGE)).run())
    return show_tab(at, tab) if tab else at


def show_tab(at: AppTest, tab: str) -> AppTest:
    """Switch to `tab`, as a click on it does (a rerun with the tab open)."""
    at.session_state["ev_tab"] = tab
    return no_exception(at.run())


def frame_with(at: AppTest, column: str):
    return next(df.value for df in at.dataframe if column in df.value.columns)


def group_table(at: AppTest, by: str):
    """The 'errors by action/rule' table, indexed by the group."""
    return next(df.value for df in at.dataframe if list(df.value.columns[:2]) == [by, "records"]).set_index(by)


def _decoded(value):
    """Plotly's JSON with its typed arrays ({dtype, bdata}, base64) turned back into lists."""
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            shape = [int(size) for size in str(value.get("shape", len(array))).split(",")]
            return array.reshape(shape).tolist()
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value


def figures(at: AppTest) -> list[dict]:
    return [_decoded(json.loads(chart.proto.spec)) for chart in at.get("plotly_chart")]


@pytest.fixture
def two_runs(empty_root: Path) -> Path:
    write_run(empty_root, "next-a", ["harness", "nearest"], judge=True)
    write_run(empty_root, "drift-b", ["harness", "nearest"], protocol="drift")
    return empty_root


def test_no_runs_says_how_to_make_one(empty_root: Path) -> None:
    at = open_page()
    assert any("No evaluation runs" in str(i.value) for i in at.info)


def test_lists_runs_and_shows_the_leaderboard_with_intervals(two_runs: Path) -> None:
    at = open_page()
    runs = at.selectbox(key="ev_run")
    assert sorted(runs.options) == sorted(
        ["next-a · next-obs · harness, nearest", "drift-b · drift · harness, nearest"]
    )
    no_exception(runs.set_value("next-a").run())
    board = frame_with(at, "exact_match")
    assert list(board["method"]) == ["harness", "nearest"]  # best first
    harness = board.set_index("method").loc["harness"]
    # harness: 18 of 20 exact (two odd episodes miss 'look'); the report's interval is mean ± 0.05
    assert harness["exact_match"] == "0.900 [0.850, 0.950]"
    assert harness["n"] == 20
    assert "judge_total" in board.columns

    forest = [f for f in figures(at) if "Paired difference" in f["layout"]["title"]["text"]]
    assert len(forest) == 1
    point = forest[0]["data"][0]
    assert point["y"] == ["harness vs nearest"] and point["x"] == pytest.approx([0.3])
    judge = [f for f in figures(at) if "Judge score" in f["layout"]["title"]["text"]]
    assert judge and {trace["name"] for trace in judge[0]["data"]} == {"harness", "nearest"}
    config = frame_with(at, "field").set_index("field")["value"]  # a table, not a JSON tree
    assert config["config.book"] == "alfworld" and config["config.dataset"] == "samples"
    # what produced the leaderboard's numbers, per method (an older report's: inferred from its own configuration)
    sources = [str(c.value).replace("\\", "") for c in at.caption if str(c.value).startswith("Produced by")]
    harness_source = next(text for text in sources if "method harness" in text)
    for part in ("model none", "dataset samples", "split all", "n 20 turns", "run next-a", "(inferred"):
        assert part in harness_source, (part, harness_source)

    no_exception(at.radio(key="ev_scope").set_value("unseen tasks").run())
    unseen = frame_with(at, "exact_match").set_index("method")
    assert unseen.loc["harness", "exact_match"] == "0.900 [0.850, 0.950]" and unseen.loc["harness", "n"] == 10
    scoped = [str(c.value) for c in at.caption if str(c.value).startswith("Produced by: method harness")]
    assert "n 10 turns" in scoped[0] and "unseen tasks" in scoped[0]  # the scope's own n, and the scope named


def test_drift_run_shows_fidelity_curves_and_first_divergence(two_runs: Path) -> None:
    at = open_page()
    no_exception(at.selectbox(key="ev_run").set_value("drift-b").run())
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert any(t.startswith("fidelity@t") for t in titles)
    show_tab(at, "Failures")
    timeline = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("First divergence"))
    markers = {trace["name"]: trace for trace in timeline["data"] if trace["type"] == "scatter"}
    # nearest diverges at step 1 ('take') in all 4 episodes; harness at step 4 ('look') in the 2 odd ones
    assert markers["nearest: first divergence"]["x"] == [1, 1, 1, 1]
    assert markers["harness: first divergence"]["x"] == [4, 4]


def test_win_lose_filter_lists_records_and_opens_one(two_runs: Path) -> None:
    at = open_page("Records")
    no_exception(at.selectbox(key="ev_run").set_value("next-a").run())
    at.selectbox(key="ev_wl_metric").set_value("exact_match")
    at.selectbox(key="ev_wl_winner").set_value("harness")
    no_exception(at.selectbox(key="ev_wl_loser").set_value("nearest").run())
    table = frame_with(at, "prediction_nearest")
    assert len(table) == 8  # 'take' and 'open' in 4 episodes
    assert set(table["action"]) == {"take mug 1 from desk 1", "open drawer 1"}
    assert table["open"].iloc[0] == "traces?dataset=samples&turn=ep-0%231"

    no_exception(at.selectbox(key="ev_wl_winner").set_value("nearest").run())
    no_exception(at.selectbox(key="ev_wl_loser").set_value("harness").run())
    reverse = frame_with(at, "prediction_harness")
    assert list(zip(reverse["episode_id"], reverse["turn"], strict=True)) == [("ep-1", 4), ("ep-3", 4)]
    assert any(code.value == "You are facing the desk 1. Next to it, you see nothing." for code in at.code)


def test_failures_view_groups_by_action_and_rule_and_clusters(two_runs: Path) -> None:
    at = open_page("Failures")
    no_exception(at.selectbox(key="ev_run").set_value("next-a").run())
    no_exception(at.selectbox(key="ev_fx_method").set_value("nearest").run())
    by_action = group_table(at, "action")
    assert by_action.loc["take", "wrong"] == 4 and by_action.loc["open", "wrong"] == 4
    assert by_action.loc["go", "wrong"] == 0 and by_action.loc["take", "error_rate"] == 1.0

    no_exception(at.selectbox(key="ev_fx_method").set_value("harness").run())
    rules = group_table(at, "rule")
    assert rules.loc["(no rule: fast_path)", "wrong"] == 2 and rules.loc["take.from", "wrong"] == 0
    assert any("grouped by route instead" in str(c.value) for c in at.caption)  # a run made before sources
    headline_source = next(str(c.value) for c in at.caption if str(c.value).startswith("Produced by"))
    assert "method harness" in headline_source and "n 20 scored predictions" in headline_source
    heat = next(f for f in figures(at) if f["layout"]["title"]["text"].endswith("by action × step"))
    assert heat["data"][0]["y"][0] in {"go", "take", "open", "put", "look"}

    no_exception(at.selectbox(key="ev_fx_method").set_value("nearest").run())
    no_exception(at.slider(key="ev_fx_k").set_value(2).run())
    no_exception(at.button(key="ev_fx_cluster").click().run())
    clusters = [e for e in at.expander if e.label.startswith("Cluster ")]
    # nearest's 8 wrong predictions are two distinct texts: "Nothing happens." (take) and the wrong drawer (open)
    assert len(clusters) == 2
    assert {c.label.split(" · ")[1] for c in clusters} == {"4 wrong predictions"}
    assert {c.label.split(" · ")[2] for c in clusters} == {"take ×4", "open ×4"}
    examples = {code.value for code in at.code}
    assert "Nothing happens." in examples
    causes = [str(m.value) for m in at.markdown if "Shared cause" in str(m.value)]
    assert len(causes) == 2 and all("answered by nearest: 4 of 4" in shown(c) for c in causes)
    member = next(df.value for df in at.dataframe if "simulate" in df.value.columns and len(df.value) == 4)
    assert all(
        url.startswith("simulate?dataset=samples&episode=") and url.endswith("&book=alfworld&method=nearest")
        for url in member["simulate"]
    )


def test_failures_say_what_answered_and_flag_unseen_actions(empty_root: Path) -> None:
    write_run(empty_root, "why-w", ["harness", "nearest"], why=True)
    at = open_page("Failures")
    no_exception(at.selectbox(key="ev_run").set_value("why-w").run())
    no_exception(at.selectbox(key="ev_fx_method").set_value("harness").run())
    sources = group_table(at, "source")
    assert sources.loc["nearest_evidence", "wrong"] == 2 and sources.loc["rule", "wrong"] == 0
    assert sources.loc["nearest_evidence", "share_of_misses"] == 1.0
    rules = group_table(at, "rule")
    assert "(no rule)" not in rules.index and rules.loc["(no rule: nearest_evidence)", "wrong"] == 2
    flags = group_table(at, "flag")
    assert flags.loc["unseen_action", "wrong"] == 2 and flags.loc["fallback", "wrong"] == 2
    assert any("1 action never appears in the construction data: look" in shown(w.value) for w in at.warning)
    texts = [shown(m.value) for m in at.markdown]
    lead = texts.index("**2 misses: 2 called an action never in the construction data (look).**")
    assert lead < next(i for i, text in enumerate(texts) if "Biggest causes" in text)  # the headline leads
    causes = next(shown(m.value) for m in at.markdown if "Biggest causes" in str(m.value))
    assert "By source**: answered by nearest_evidence: 100% of misses (2 of 4 wrong)" in causes
    assert "1 action never in the construction data: 100% of misses (2)" in causes
    wrong = next(df.value for df in at.dataframe if {"unseen_action", "source"} <= set(df.value.columns))
    assert list(wrong["source"]) == ["nearest_evidence"] * 2 and wrong["unseen_action"].all()

    # every breakdown row carries its bootstrap interval; the paired table compares the methods row by row
    assert (sources["error_rate_low"] <= sources["error_rate"]).all()
    assert (sources["error_rate"] <= sources["error_rate_high"]).all()
    assert sources.loc["rule", "error_rate_high"] == 0.0 and sources.loc["nearest_evidence", "share_low"] == 1.0
    assert any("95% interval" in str(c.value) for c in at.caption)
    assert at.selectbox(key="ev_fx_pair_with").value == "nearest"
    paired = next(df.value for df in at.dataframe if "mean_diff" in df.value.columns and "action" in df.value.columns)
    assert (paired["low"] <= paired["mean_diff"]).all() and (paired["mean_diff"] <= paired["high"]).all()
    assert list(paired["differs"]) == [bool(lo > 0 or hi < 0) for lo, hi in zip(paired["low"], paired["high"],
                                                                                  strict=True)]
    records = pd.read_parquet(empty_root / "runs" / "eval" / "why-w" / "records.parquet")
    harness = records[(records["method"] == "harness") & (records["turn"] >= 0)]
    assert paired["turns"].sum() == len(harness)


def test_compare_two_runs(two_runs: Path) -> None:
    at = open_page("Compare")
    no_exception(at.selectbox(key="ev_run").set_value("next-a").run())
    no_exception(at.selectbox(key="ev_cmp_run").set_value("drift-b").run())
    table = frame_with(at, "B − A")
    row = table[(table["method"] == "harness") & (table["metric"] == "exact_match")].iloc[0]
    assert row["run A"] == "0.900 [0.850, 0.950]" and row["run B"] == "0.900 [0.850, 0.950]"
    assert row["B − A"] == pytest.approx(0.0)
    assert table[table["metric"] == "judge_total"]["run B"].eq("").all()  # only run A was judged
    differences = next(
        df.value for df in at.dataframe if "run A" in df.value.columns and "field" in df.value.columns
    ).set_index("field")
    assert differences.loc["protocol", "run A"] == "next-obs" and differences.loc["protocol", "run B"] == "drift"


def test_unreadable_report_is_named_not_fatal(two_runs: Path) -> None:
    (two_runs / "runs" / "eval" / "drift-b" / "report.json").write_text("{not json", encoding="utf-8")
    at = open_page()
    no_exception(at.selectbox(key="ev_run").set_value("drift-b").run())
    assert any("report.json" in shown(e.value) and "not valid JSON" in shown(e.value) for e in at.error)


def test_knowable_turns_beside_all_turns_and_the_novel_share(empty_root: Path) -> None:
    write_run(empty_root, "novel-c", ["harness", "nearest"], novelty=True)
    write_run(empty_root, "old-d", ["harness", "nearest"])  # made before the novelty flag
    at = open_page()
    no_exception(at.selectbox(key="ev_run").set_value("novel-c").run())
    table = frame_with(at, "exact match (knowable, teacher forced)").set_index(["scope", "method"])
    pooled = table.loc["all environments"]
    # the 'open' turn is novel in all 4 episodes: harness misses 2 'look' turns of 16 knowable, nearest 4 'take' turns
    assert pooled.loc["harness", "exact match (all)"] == "0.900 [0.850, 0.950]"
    assert pooled.loc["harness", "exact match (knowable, teacher forced)"] == "0.875 [0.825, 0.925]"
    assert pooled.loc["nearest", "exact match (knowable, teacher forced)"] == "0.750 [0.700, 0.800]"
    assert pooled.loc["nearest", "novel share"] == "0.200 [0.150, 0.250]"
    assert ("env: alfworld/pick", "harness") in table.index
    board = frame_with(at, "exact_match")
    assert list(board.columns[:6]) == ["method", "model", "n", "exact_match", "exact_match_knowable", "novel_share"]
    assert set(board["model"]) == {"none (inferred)"}  # a run that did not record its models, with no model given

    no_exception(at.selectbox(key="ev_run").set_value("old-d").run())
    assert not any("exact match (knowable, teacher forced)" in df.value.columns for df in at.dataframe)
    assert any("knowable is unknown" in str(c.value) for c in at.caption)


def test_a_cross_fitted_run_lists_its_folds_and_the_episodes_it_dropped(empty_root: Path) -> None:
    folder = write_run(empty_root, "folds-e", ["harness", "nearest"])
    report = json.loads((folder / "report.json").read_text())
    report["folds"] = [
        {
            "fold": k,
            "book": f"samples-fold{k}",
            "book_version": f"v{k}",
            "construction_episodes": 2,
            "episodes": 2,
            "families": 1,
            "leakage_ok": True,
        }
        for k in (1, 2)
    ]
    report["leakage"]["dropped"] = {"count": 1, "episodes": {"ep-9": ["a copy of ep-1 in the book's evidence"]}}
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    at = open_page()
    folds = frame_with(at, "built from (episodes)")
    assert list(folds["book"]) == ["samples-fold1", "samples-fold2"] and set(folds["leakage"]) == {"ok"}
    assert any("Cross-fitted: 2 folds" in str(c.value) for c in at.caption)
    assert any("1 leaked episodes were left out" in str(w.value) for w in at.warning)
    assert frame_with(at, "why").to_dict("records") == [
        {"episode_id": "ep-9", "why": "a copy of ep-1 in the book's evidence"}
    ]


def test_the_launch_form_cross_fits_without_a_worldbook(empty_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.evaluate import launch as eval_launch
    from workbench.evaluate.jobs import JobStatus
    from worldsmith import Workspace

    collected = REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"
    assert Workspace(empty_root).ingest([collected], "alfworld").committed
    launched: list[list[str]] = []

    def launch(root: Path, run: str, command: list[str]) -> JobStatus:
        launched.append(command)
        return JobStatus(run=run, state="running", pid=1, started=0.0, command=command)

    monkeypatch.setattr(eval_launch, "launch", launch)
    at = open_page("Launch")
    at.text_input(key="ev_new_run").input("crossed")
    no_exception(press_launch(at))
    assert any("Choose a worldbook, or cross-fit" in str(e.value) for e in at.error) and not launched
    at.number_input(key="ev_new_folds").set_value(3)
    at.checkbox(key="ev_new_drop_leaked").check()
    no_exception(press_launch(at))
    assert len(launched) == 1 and launched[0][launched[0].index("--folds") + 1] == "3"
    assert "--book" not in launched[0] and "--drop-leaked" in launched[0]
    assert any("Started run" in str(s.value) for s in at.success)


def test_the_launch_form_runs_on_ray(empty_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.evaluate import launch as eval_launch
    from workbench.evaluate.jobs import JobStatus
    from worldsmith import Workspace
    from worldsmith.cli.main import build_parser

    collected = REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"
    assert Workspace(empty_root).ingest([collected], "alfworld").committed
    launched: list[list[str]] = []

    def launch(root: Path, run: str, command: list[str]) -> JobStatus:
        launched.append(command)
        return JobStatus(run=run, state="running", pid=1, started=0.0, command=command)

    monkeypatch.setattr(eval_launch, "launch", launch)
    at = open_page("Launch")
    at.text_input(key="ev_new_run").input("on-ray")
    at.number_input(key="ev_new_folds").set_value(2)
    at.number_input(key="ev_new_workers").set_value(2)
    at.checkbox(key="ev_new_ray_on").check()
    at.text_input(key="ev_new_ray_address").input("ray://head:10001")
    no_exception(press_launch(at))
    assert len(launched) == 1 and "--ray=ray://head:10001" in launched[0]
    args = build_parser().parse_args(launched[0][3:])  # what the CLI makes of it
    assert (args.ray, args.workers) == ("ray://head:10001", 2)


def test_a_wrong_prediction_says_why_and_opens_simulate_at_its_turn(empty_root: Path) -> None:
    write_run(empty_root, "why-w", ["harness", "nearest"], why=True)
    at = open_page("Failures")
    no_exception(at.selectbox(key="ev_run").set_value("why-w").run())
    no_exception(at.selectbox(key="ev_fx_method").set_value("harness").run())
    wrong = next(df.value for df in at.dataframe if "simulate" in df.value.columns)
    assert list(wrong["simulate"]) == [
        f"simulate?dataset=samples&episode={e}&turn=4&book=alfworld&method=harness" for e in ("ep-1", "ep-3")
    ]
    no_exception(at.selectbox(key="ev_fx_open_").set_value(1).run())
    assert any(
        "Why: answered by nearest_evidence: 1 of 1; action never in the construction data: 1 of 1 (look)"
        in shown(c.value)
        for c in at.caption
    ), [c.value for c in at.caption if "Why" in str(c.value)]
    links = [link.proto for link in at.get("page_link")]
    simulate = next(link for link in links if "audit open" in link.label)
    assert "turn 4" in simulate.label and "audit" in simulate.label
    assert "episode=ep-3" in simulate.query_string and "method=harness" in simulate.query_string


def test_a_run_of_both_protocols_shows_them_side_by_side_open_loop_first(empty_root: Path) -> None:
    """A default run (drift and next-obs, made by `run_eval` on the toolshop sample): both in one table, the rest of
    the tab on open loop until teacher forced is chosen."""
    import orjson

    from worldsmith.evals import EvalConfig, run_eval
    from worldsmith.traces import Episode
    from worldsmith.worldbook import build_worldbook

    sample = REPO / "data_samples" / "toolshop" / "expert.jsonl"
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in sample.read_bytes().splitlines() if line.strip()]
    book = build_worldbook(episodes[:20], name="shop").book
    run = run_eval(EvalConfig(name="both-e", book="shop", dataset="shop", methods=["harness", "nearest"],
                              resamples=200), empty_root, book=book, episodes=episodes[20:24],
                   construction=episodes[:20])
    at = open_page()
    no_exception(at.selectbox(key="ev_run").set_value("both-e").run())
    both = frame_with(at, "exact match (knowable, tf)")
    assert both["protocol"].tolist() == ["open loop (drift)"] * 2 + ["teacher forced (next-obs)"] * 2
    assert at.radio(key="ev_protocol").value == "drift"
    knowable = frame_with(at, "exact match (knowable, open loop)").set_index(["scope", "method"])
    drift = run.report.methods["harness"]["exact_match"]
    assert knowable.loc[("all environments", "harness"), "exact match (all)"].startswith(f"{drift.mean:.3f}")
    assert "exact match (knowable, teacher forced)" in knowable.columns  # the other definition beside it
    no_exception(at.radio(key="ev_protocol").set_value("next-obs").run())
    teacher = run.report.block("next-obs").methods["harness"]["exact_match"]
    knowable = frame_with(at, "exact match (knowable, teacher forced)").set_index(["scope", "method"])
    assert knowable.loc[("all environments", "harness"), "exact match (all)"].startswith(f"{teacher.mean:.3f}")
    assert not any("exact match (knowable, open loop)" in df.value.columns for df in at.dataframe)
