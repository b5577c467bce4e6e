"""The Evaluate page's building blocks without Streamlit: tables from reports and records, background jobs
(real detached processes), run listing, and the clusters of wrong predictions on the real MiniLM model."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from eval_fixtures import make_records, write_run

from workbench.evaluate import tables
from workbench.evaluate.jobs import EvalLaunch, JobError, JobStatus, eval_command, job_status, launch, list_jobs
from workbench.evaluate.runs import RunFileError, list_runs, read_json_file, run_dataset
from worldsmith.evals.clusters import cluster_errors
from worldsmith.evals.judge import judge_frame
from worldsmith.evals.report_model import EvalReport, MetricCell, PairCell, ScopeBlock
from worldsmith.util import jobs


def test_the_launcher_offers_the_registered_world_models() -> None:
    from workbench.evaluate.launch import available_methods
    from worldsmith.sim import NearestEvidence, registry, world_model, world_model_names

    assert available_methods() == world_model_names() and "worldbook-prompt" in available_methods()
    world_model("launcher-test", description="a test's world model")(lambda book, **_: NearestEvidence(book))
    try:
        assert available_methods()[-1] == "launcher-test"
    finally:
        registry._REGISTRY.unregister("launcher-test")


def _methods(cells: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, MetricCell]]:
    """Report cells as the report model reads them."""
    return ScopeBlock.model_validate({"methods": cells}).methods


def test_format_interval() -> None:
    assert tables.format_interval(MetricCell(mean=0.5, low=0.25, high=0.75)) == "0.500 [0.250, 0.750]"
    assert tables.format_interval(MetricCell(mean=0.5, low=None, high=None)) == "0.500"
    assert tables.format_interval(None) == ""


def test_intervals_over_few_trajectories_are_marked_in_tables_and_charts() -> None:
    from workbench.evaluate import charts

    small = {"mean": 0.5, "low": 0.25, "high": 0.75, "n": 40, "trajectories": 3}
    big = {"mean": 0.4, "low": 0.35, "high": 0.45, "n": 400, "trajectories": 30}
    assert tables.format_interval(MetricCell(**small)) == "0.500 [0.250, 0.750] (only 3 trajectories)"
    assert tables.format_interval(MetricCell(**big)) == "0.400 [0.350, 0.450]"
    methods = _methods({"a": {"exact_match": small}, "b": {"exact_match": big}})
    table = tables.leaderboard_table(methods).set_index("method")
    assert table.loc["a", "exact_match"].endswith("(only 3 trajectories)") and "only" not in table.loc["b", "exact_match"]
    assert table.loc["a", "trajectories"] == 3 and table.loc["b", "trajectories"] == 30
    caption = tables.small_sample_caption(methods) or ""
    assert "fewer than 10 trajectories" in caption and "as few as 3" in caption
    assert tables.small_sample_caption(_methods({"b": {"exact_match": big}})) is None
    bars = charts.metric_bars(tables.leaderboard_frame(methods), "exact_match")
    assert list(bars.data[0].text) == ["only 3 trajectories", ""]  # sorted by mean: a (0.5) first
    pairs = tables.pairs_frame({"a vs b": {"exact_match": PairCell(**small, mean_diff=0.1)}})
    assert list(pairs["sample"]) == ["only 3 trajectories"]
    assert list(charts.forest_plot(pairs, "exact_match").data[0].text) == ["only 3 trajectories"]
    w2r = tables.w2r_frame(EvalReport.model_validate({"w2r": {"expert": {"real": 1.0, "real_low": 1.0, "real_high": 1.0, "trajectories": 3,
                                               "methods": {"harness": {"w2r": 0.5, "w2r_low": 0.0, "w2r_high": 1.0,
                                                                       "trajectories": 3}}}}}))
    assert w2r.loc[0, "w2r"].endswith("(only 3 trajectories)") and w2r.loc[0, "real"].endswith("(only 3 trajectories)")
    drift = tables.fidelity_frame(EvalReport.model_validate(
        {"fidelity_at_t": {"a": [{"t": 0, "mean": 0.5, "low": 0.2, "high": 0.8, "n": 3, "trajectories": 3}]}}))
    curve = charts.fidelity_curves(drift)
    assert "only 3 trajectories" in list(curve.data[-1].text)


def test_leaderboard_table_orders_by_the_first_metric_and_keeps_intervals() -> None:
    methods = _methods({"a": {"exact_match": {"mean": 0.2, "low": 0.1, "high": 0.3, "n": 7}},
                        "b": {"exact_match": {"mean": 0.6, "low": 0.5, "high": 0.7, "n": 7},
                              "token_f1": {"mean": 0.9, "low": 0.8, "high": 1.0, "n": 7}}})
    table = tables.leaderboard_table(methods)
    assert list(table["method"]) == ["b", "a"]
    assert table.loc[0, "exact_match"] == "0.600 [0.500, 0.700]" and table.loc[1, "token_f1"] == ""


def test_pairs_frame_marks_intervals_that_exclude_zero() -> None:
    pairs = ScopeBlock.model_validate({"pairs": {
        "a vs b": {"exact_match": {"mean_diff": 0.2, "low": 0.05, "high": 0.3, "n": 4}},
        "a vs c": {"exact_match": {"mean_diff": 0.1, "low": -0.05, "high": 0.2, "n": 4}}}}).pairs
    frame = tables.pairs_frame(pairs, "exact_match").set_index("pair")
    assert frame.loc["a vs b", "significant"] and not frame.loc["a vs c", "significant"]


@pytest.mark.parametrize(("action", "kind"), [
    ("go to desk 1", "go"), ('{"name": "ls", "arguments": {}}', "ls"), ("cd(folder='x')", "cd"),
    ('ls {"a": true}', "ls"), ("", "(empty)"), ("{broken", "{broken"),
])
def test_action_kind(action: str, kind: str) -> None:
    assert tables.action_kind(action) == kind


def test_win_lose_matches_the_same_record_of_both_methods() -> None:
    records = make_records("r", ["harness", "nearest"])
    wins = tables.win_lose_frame(records, "harness", "nearest", "exact_match")
    assert len(wins) == 8 and set(wins["turn"]) == {1, 2}
    assert (wins["difference"] == 1.0).all()
    assert tables.win_lose_frame(records, "harness", "nearest", "exact_match", margin=1.0).empty
    losses = tables.win_lose_frame(records, "nearest", "harness", "edit_similarity")
    assert list(losses["episode_id"]) == ["ep-1", "ep-3"] and list(losses["difference"]) == pytest.approx([0.6, 0.6])


def test_error_groups_by_action_and_by_rule() -> None:
    records = make_records("r", ["harness"])
    by_action = tables.error_groups(records, "exact_match", 1.0, "action").set_index("action")
    assert by_action.loc["look", "wrong"] == 2 and by_action.loc["look", "records"] == 4
    assert by_action.loc["go", "error_rate"] == 0.0
    by_rule = tables.error_groups(records, "exact_match", 1.0, "rule").set_index("rule")
    assert by_rule.loc["(no rule: fast_path)", "wrong"] == 2 and by_rule.loc["put.in", "records"] == 4
    assert by_rule["records"].sum() == 20 and by_rule["share_of_misses"].sum() == 1.0
    with pytest.raises(ValueError, match="group by"):
        tables.error_groups(records, "exact_match", 1.0, "episode")


def test_errors_by_source_and_flag_say_why_it_missed() -> None:
    records = make_records("r", ["harness"], why=True)
    by_source = tables.error_groups(records, "exact_match", 1.0, "source").set_index("source")
    assert by_source.loc["nearest_evidence", "wrong"] == 2 and by_source.loc["rule", "wrong"] == 0
    assert by_source.loc["nearest_evidence", "share_of_misses"] == 1.0
    by_rule = tables.error_groups(records, "exact_match", 1.0, "rule").set_index("rule")
    assert "(no rule)" not in by_rule.index and by_rule.loc["(no rule: nearest_evidence)", "wrong"] == 2
    by_flag = tables.error_groups(records, "exact_match", 1.0, "flag").set_index("flag")
    assert by_flag.loc["unseen_action", "wrong"] == 2 and by_flag.loc["fallback", "records"] == 4
    assert by_flag.loc["none", "wrong"] == 0


def test_heatmap_by_action_and_step() -> None:
    records = make_records("r", ["harness"])
    table = tables.heatmap_frame(records, "exact_match")
    assert table.loc["look", 4] == 0.5 and table.loc["go", 0] == 1.0
    assert pd.isna(table.loc["go", 4])


def test_divergence_from_the_records_when_the_report_has_none() -> None:
    records = make_records("r", ["nearest"], protocol="drift")
    frame = tables.divergence_frame(None, records)
    assert list(frame["step"]) == [1, 1, 1, 1] and list(frame["length"]) == [5, 5, 5, 5]
    report = EvalReport.model_validate({"first_divergence": {"nearest": {"ep-0": 3, "ep-1": None}}})
    from_report = tables.divergence_frame(report, records).set_index("episode_id")
    assert from_report.loc["ep-0", "step"] == 3 and pd.isna(from_report.loc["ep-1", "step"])


def test_judge_frame_intervals_cover_the_mean() -> None:
    records = make_records("r", ["harness", "nearest"], judge=True)
    frame = judge_frame(records).set_index(["method", "dimension"])
    harness = frame.loc[("harness", "format")]
    assert harness["mean"] == pytest.approx((18 * 5 + 2 * 2) / 20) and harness["n"] == 20
    assert harness["low"] <= harness["mean"] <= harness["high"] <= 5
    assert frame.loc[("nearest", "quality"), "mean"] == pytest.approx((12 * 5 + 8 * 2) / 20)


def test_compare_runs_frame() -> None:
    a = EvalReport.model_validate({"methods": {"h": {"exact_match": {"mean": 0.5, "low": 0.4, "high": 0.6, "n": 10}}}})
    b = EvalReport.model_validate({"methods": {"h": {"exact_match": {"mean": 0.7, "low": 0.6, "high": 0.8, "n": 12}},
                                               "n": {"exact_match": {"mean": 0.1, "low": 0.0, "high": 0.2, "n": 12}}}})
    frame = tables.compare_runs_frame(a, b).set_index("method")
    assert frame.loc["h", "B − A"] == pytest.approx(0.2) and frame.loc["h", "n B"] == 12
    assert frame.loc["n", "run A"] == "" and pd.isna(frame.loc["n", "B − A"])


def test_list_runs_reads_progress_and_skips_job_records(tmp_path: Path) -> None:
    write_run(tmp_path, "done", ["harness", "nearest"])
    running = tmp_path / "runs" / "eval" / "going"
    running.mkdir(parents=True)
    (running / "progress.json").write_text(json.dumps({"done": 3, "total": 10}))
    (tmp_path / "runs" / "eval" / ".jobs").mkdir()
    (tmp_path / "runs" / "eval" / "empty").mkdir()
    runs = {info.name: info for info in list_runs(tmp_path)}
    assert set(runs) == {"done", "going"}
    assert runs["done"].complete and runs["done"].protocol == "next-obs" and runs["done"].methods == ["harness",
                                                                                                        "nearest"]
    assert not runs["going"].complete and (runs["going"].done, runs["going"].total) == (3, 10)
    (running / "config.json").write_text("[1, 2]")
    assert "expected a JSON object" in {i.name: i for i in list_runs(tmp_path)}["going"].error
    with pytest.raises(RunFileError, match="config.json"):
        read_json_file(running / "config.json")
    assert run_dataset({"dataset": {"name": "samples"}}) == "samples" and run_dataset({"dataset": "x"}) == "x"


def test_eval_command_is_the_cli_line(tmp_path: Path) -> None:
    command = eval_command(EvalLaunch(run="r1", book="b", dataset="d", methods=["harness", "nearest"],
                                      max_episodes=2), tmp_path)
    assert command[1:4] == ["-m", "worldsmith", "eval"]
    assert command[command.index("--methods") + 1] == "harness,nearest"
    assert command[command.index("--out") + 1] == "r1"
    assert command[command.index("--workspace") + 1] == str(tmp_path.resolve())
    assert command[command.index("--max-episodes") + 1] == "2"
    assert "--json" in command and "--llm" not in command and "--split" not in command
    with pytest.raises(JobError, match="run name .*use 1-120 letters"):
        eval_command(EvalLaunch(run="../x", book="b", dataset="d", methods=["nearest"]), tmp_path)
    crossed = eval_command(EvalLaunch(run="r2", book=None, dataset="d", methods=["nearest"], folds=5,
                                      drop_leaked=True), tmp_path)
    assert crossed[crossed.index("--folds") + 1] == "5" and "--book" not in crossed and "--drop-leaked" in crossed
    assert "--drop-leaked" not in command
    assert not any(part.startswith(("--ray", "--workers")) for part in command)
    on_ray = eval_command(EvalLaunch(run="r3", book="b", dataset="d", methods=["nearest"], workers=2,
                                     ray="ray://head:10001"), tmp_path)
    assert on_ray[on_ray.index("--workers") + 1] == "2" and "--ray=ray://head:10001" in on_ray


def test_knowable_and_folds_frames_reshape_the_report() -> None:
    cell = {"mean": 0.5, "low": 0.4, "high": 0.6, "n": 10}
    report = EvalReport.model_validate({
        "methods": {"harness": {"exact_match": cell, "exact_match_knowable": cell, "novel_share": cell},
                    "nearest": {"exact_match": cell}},  # a method without novelty cells is left out
        "per_env": {"alfworld": {"methods": {"harness": {"exact_match": cell, "novel_share": cell}}}},
        "folds": [{"fold": 1, "book": "d-fold1", "book_version": "abc", "construction_episodes": 8,
                   "episodes": 4, "families": 2, "leakage_ok": True}]})
    knowable = tables.knowable_frame(report)
    assert list(zip(knowable["scope"], knowable["method"], strict=True)) == [("all environments", "harness"),
                                                                            ("env: alfworld", "harness")]
    assert knowable.loc[0, "exact match (knowable, teacher forced)"] == "0.500 [0.400, 0.600]" and knowable.loc[1, "n"] == 10
    assert knowable.loc[1, "exact match (knowable, teacher forced)"] == ""
    assert tables.knowable_frame(EvalReport.model_validate({"methods": {"a": {"exact_match": cell}}})).empty
    folds = tables.folds_frame(report)
    assert folds.to_dict("records") == [{"fold": 1, "book": "d-fold1", "version": "abc", "built from (episodes)": 8,
                                         "evaluated episodes": 4, "families": 2, "leakage": "ok"}]
    assert tables.folds_frame(EvalReport()).empty
    dropped = tables.dropped_frame(EvalReport.model_validate({"leakage": {"ok": True, "dropped": {"count": 1, "episodes": {
        "ep-9": ["in the book's evidence", "target turns in the book's evidence"]}}}}))
    assert dropped.to_dict("records") == [{"episode_id": "ep-9",
                                           "why": "in the book's evidence; target turns in the book's evidence"}]
    assert tables.dropped_frame(EvalReport.model_validate({"leakage": {"ok": True}})).empty


# A stand-in for `worldsmith eval`: writes progress.json step by step, then report.json and a JSON result.
_FAKE_RUN = textwrap.dedent("""
    import json, os, sys, time
    out, gate = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for done in range(4):
        json.dump({"done": done, "total": 3}, open(os.path.join(out, "progress.json"), "w"))
        while done == 1 and not os.path.exists(gate):
            time.sleep(0.05)
    if os.path.basename(out) == "bad":
        print("boom: no such worldbook", file=sys.stderr); sys.exit(1)
    json.dump({"run": os.path.basename(out)}, open(os.path.join(out, "report.json"), "w"))
    print(json.dumps({"run": os.path.basename(out), "records": 3}))
""")


def _wait(root: Path, run: str, state: str) -> JobStatus:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = job_status(root, run)
        if status is not None and status.state == state:
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {run} never reached {state}: {job_status(root, run)}")


def test_background_job_runs_detached_reports_progress_and_how_it_ended(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    folder = tmp_path / "runs" / "eval" / "good"
    job = launch(tmp_path, "good", [sys.executable, "-c", _FAKE_RUN, str(folder), str(gate)])
    assert job.state == "running" and job_status(tmp_path, "good").state == "running"
    with pytest.raises(JobError, match="already running"):
        launch(tmp_path, "good", [sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 120
    while not (folder / "progress.json").exists() or json.loads((folder / "progress.json").read_text())["done"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    jobs._CHILDREN.clear()  # as after a server restart: found again from the job record and the pid alone
    assert job_status(tmp_path, "good").state == "running"
    gate.touch()
    finished = _wait(tmp_path, "good", "finished")
    assert finished.result == {"run": "good", "records": 3}
    assert json.loads((folder / "progress.json").read_text()) == {"done": 3, "total": 3}

    bad = tmp_path / "runs" / "eval" / "bad"
    launch(tmp_path, "bad", [sys.executable, "-c", _FAKE_RUN, str(bad), str(gate)])
    failed = _wait(tmp_path, "bad", "failed")
    assert failed.returncode == 1 and "boom: no such worldbook" in failed.log_tail
    assert {j.run for j in list_jobs(tmp_path)} == {"good", "bad"}


@pytest.mark.integration
def test_clusters_of_wrong_predictions_on_minilm() -> None:
    records = make_records("r", ["nearest"])
    wrong = records[records["exact_match"] < 1]
    clusters = cluster_errors(wrong, k=2)
    assert sorted(c.size for c in clusters) == [4, 4]
    assert {c.example for c in clusters} == {"Nothing happens.",
                                            "You open the drawer 2. The drawer 2 is open. In it, you see a pen 1."}
    assert {c.top_actions[0] for c in clusters} == {("take", 4), ("open", 4)}
    assert {c.cause for c in clusters} == {"answered by nearest: 4 of 4"}  # what they share
    assert len(cluster_errors(wrong, k=8)) == 2  # k never exceeds the distinct texts
    assert cluster_errors(wrong.iloc[0:0]) == []


def test_no_divergence_for_next_observation_records() -> None:
    records = make_records("r", ["nearest"])  # protocol next-obs, diverged False throughout
    assert tables.divergence_frame(None, records).empty
    records["protocol"], records["diverged"] = "drift", None  # drift, but nothing recorded about divergence
    assert tables.divergence_frame(None, records).empty


def test_w2r_frame_one_row_per_policy_and_method() -> None:
    report = EvalReport.model_validate({"w2r": {"expert": {
        "real": 1.0, "real_low": 1.0, "real_high": 1.0, "n": 3, "method": "harness", "w2r": 0.5,
        "methods": {"harness": {"w2r": 0.5, "w2r_low": 0.25, "w2r_high": 0.75, "consistency": 0.5,
                                "consistency_low": 0.25, "consistency_high": 0.75, "n": 3, "sim_steps": 7.0},
                    "nearest": {"w2r": 0.0, "w2r_low": 0.0, "w2r_high": 0.0, "consistency": 0.0,
                                "consistency_low": 0.0, "consistency_high": 0.0, "n": 3, "sim_steps": 50.0}}}}})
    frame = tables.w2r_frame(report).set_index("method")
    assert list(frame.index) == ["harness", "nearest"]
    assert frame.loc["harness", "real"] == "1.000 [1.000, 1.000]"
    assert frame.loc["harness", "w2r"] == "0.500 [0.250, 0.750]" and frame.loc["nearest", "sim_steps"] == 50.0
    flat = tables.w2r_frame(EvalReport.model_validate({"w2r": {"random": {"real": 0.2, "w2r": 0.1, "consistency": 0.5,
                                                                          "n": 5}}}))
    assert flat.loc[0, "w2r"] == "0.100" and flat.loc[0, "n"] == 5


def test_the_launch_form_checks_a_model_spec_as_the_job_will(tmp_path: Path) -> None:
    from workbench.evaluate.launch import spec_problem

    assert spec_problem("", tmp_path) is None
    assert spec_problem("tiny:data_samples/models/tiny", tmp_path) is None  # the checkout's bundled model
    assert "no backend prefix" in (spec_problem("gpt-4o", tmp_path) or "")
    assert f"no model folder at {(tmp_path / 'missing').resolve()}" in (spec_problem("tiny:missing", tmp_path) or "")


def test_the_launch_form_has_harness_llm_chosen_explicitly() -> None:
    """A model spec no chosen method uses is refused (it would be silently ignored): the harness with a model is
    `harness+llm`, chosen by name."""
    from workbench.evaluate.launch import model_use_problem

    assert "harness+llm" in (model_use_problem(["harness", "nearest"], "tiny:m") or "")
    assert model_use_problem(["harness", "nearest"], "tiny:m", policy_uses_it=True) is None  # the llm policy's model
    assert model_use_problem(["harness+llm", "nearest"], "tiny:m") is None
    assert model_use_problem(["harness", "direct"], "tiny:m") is None
    assert "direct need a model" in (model_use_problem(["harness", "direct"], "") or "")
    assert model_use_problem(["harness", "nearest"], None) is None


def test_the_tables_name_each_methods_model() -> None:
    report = EvalReport.model_validate({
        "models": {"harness": {"model": "none", "trained_on": None},
                   "direct": {"model": "tiny:m", "trained_on": "worldsmith llm train-tiny, 100 steps"}},
        "cost": {"harness": {"model_calls": 0.0}, "direct": {"model_calls": 1.0}}})
    cost = tables.cost_frame(report)
    assert list(cost.columns[:2]) == ["method", "model"]
    assert dict(zip(cost["method"], cost["model"], strict=True)) == {
        "harness": "none", "direct": "tiny:m (trained on: worldsmith llm train-tiny, 100 steps)"}
    board = tables.with_models(pd.DataFrame({"method": ["direct", "harness"], "n": [2, 2]}), report)
    assert list(board["model"]) == ["tiny:m (trained on: worldsmith llm train-tiny, 100 steps)", "none"]
    old = EvalReport.model_validate({"config": {"llm_spec": "tiny:m"}, "counts": {"harness": 2, "nearest": 2}})
    assert tables.model_labels(old) == {"harness": "tiny:m (inferred)", "nearest": "none (inferred)"}


def test_a_report_of_both_protocols_reads_side_by_side_and_as_each_alone() -> None:
    cell = {"mean": 0.5, "low": 0.4, "high": 0.6, "n": 10}
    other = {"mean": 0.7, "low": 0.6, "high": 0.8, "n": 10}
    drift = {"metrics": ["exact_match"], "methods": {"harness": {"exact_match": cell, "exact_match_knowable": cell,
                                                                 "exact_match_knowable_tf": other, "novel_share": cell,
                                                                 "novel_share_tf": cell}},
             "fidelity_at_t": {"harness": [{"t": 0, **cell}]}}
    teacher = {"metrics": ["exact_match"], "methods": {"harness": {"exact_match": other, "exact_match_knowable": other,
                                                                   "novel_share": cell}}}
    report = EvalReport.model_validate({"protocol": "drift", "protocols": ["drift", "next-obs"], **drift,
                                        "by_protocol": {"drift": drift, "next-obs": teacher}})
    both = tables.protocols_frame(report)
    assert both["protocol"].tolist() == ["open loop (drift)", "teacher forced (next-obs)"]
    assert both["exact match (knowable, tf)"].tolist() == ["0.700 [0.600, 0.800]", "0.700 [0.600, 0.800]"]
    alone = report.for_protocol("next-obs")
    assert alone.protocol == "next-obs" and alone.methods["harness"]["exact_match"].mean == 0.7
    assert alone.fidelity_at_t == {} and report.for_protocol("drift") is report  # no section of another protocol
    assert "exact match (knowable, open loop)" in tables.knowable_frame(report).columns
    assert tables.protocols_frame(alone.model_copy(update={"protocols": ["next-obs"]})).empty
    launch = eval_command(EvalLaunch(run="r4", book="b", dataset="d", methods=["nearest"]), "/tmp")
    assert "--protocol" not in launch  # the default: both
    live = eval_command(EvalLaunch(run="r5", book="b", dataset="d", methods=["nearest"], protocol="live",
                                   policy="probing"), "/tmp")
    assert live[live.index("--protocol") + 1] == "live" and live[live.index("--policy") + 1] == "probing"
