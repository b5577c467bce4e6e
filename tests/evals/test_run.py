"""Complete runs on the samples with the no-model methods: ALFWorld held out by family, TextWorld, BFCL; next-obs,
drift and W2R (replayed in real ALFWorld); the run store's contract; resuming; configuration conflicts."""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd
import pytest

from worldsmith.evals import EvalConfig, RunConflictError, run_eval
from worldsmith.evals.eval_records import RECORD_COLUMNS
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook

METHODS = ["harness", "nearest"]
INTERVAL = {"mean", "low", "high", "n", "trajectories"}


def _config(name: str, protocol: str = "next-obs", **extra) -> EvalConfig:
    return EvalConfig(name=name, book="book", dataset="samples", methods=extra.pop("methods", METHODS),
                      protocol=protocol, resamples=extra.pop("resamples", 1000), **extra)


def _check_intervals(block: dict) -> None:
    for entry in block.values():
        for numbers in entry.values():
            key = "mean_diff" if "mean_diff" in numbers else "mean"
            assert set(numbers) == INTERVAL - {"mean"} | {key}
            assert numbers["low"] - 1e-9 <= numbers[key] <= numbers["high"] + 1e-9 and numbers["n"] > 0


def test_next_obs_on_held_out_alfworld_writes_the_run_store(alfworld_split, alfworld_book: Worldbook,
                                                            tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    seen_progress: list[tuple[int, int]] = []
    run = run_eval(_config("alf-next"), tmp_path / "ws", book=alfworld_book, episodes=held_out,
                   construction=construction, progress=lambda done, total, _: seen_progress.append((done, total)))
    folder = tmp_path / "ws" / "runs" / "eval" / "alf-next"
    assert run.directory == folder and seen_progress[-1] == (2 * len(held_out), 2 * len(held_out))
    records = pd.read_parquet(folder / "records.parquet")
    assert tuple(records.columns) == RECORD_COLUMNS
    turns = sum(len(e.turns) for e in held_out)
    assert records.groupby("method").size().to_dict() == {"harness": turns, "nearest": turns}
    assert set(records["protocol"]) == {"next-obs"} and set(records["run"]) == {"alf-next"}
    assert not records["task_seen"].any() and records["json_f1"].isna().all()  # held out by family; text games
    first = records[(records["method"] == "nearest")].iloc[0]
    assert first["reference"] == held_out[0].turns[0].observation.text if first["episode_id"] == held_out[0].id \
        else True
    assert records["exact_match"].isin([0.0, 1.0]).all() and records["token_f1"].between(0, 1).all()
    assert (records[records["method"] == "harness"]["route"].str.len() > 0).all()

    report = orjson.loads((folder / "report.json").read_bytes())
    for key in ("run", "protocol", "fingerprint", "config", "judge", "methods", "pairs", "per_env", "seen_unseen",
                "cost", "leakage", "seeds", "created"):
        assert key in report, key
    assert report["judge"] is None and report["leakage"]["ok"] and report["fingerprint"] == run.fingerprint
    assert set(report["methods"]) == set(METHODS) and list(report["pairs"]) == ["harness vs nearest"]
    assert set(report["methods"]["harness"]) == {"exact_match", "edit_similarity", "token_f1",
                                                 "exact_match_knowable", "novel_share"}
    assert records["novel"].map(type).eq(bool).all() and records["novel"].any() and not records["novel"].all()
    knowable = records[(records["method"] == "harness") & ~records["novel"].astype(bool)]["exact_match"]
    assert report["methods"]["harness"]["exact_match_knowable"]["mean"] == pytest.approx(knowable.mean(), abs=1e-6)
    assert report["methods"]["harness"]["novel_share"]["mean"] == pytest.approx(records["novel"].mean(), abs=1e-6)
    assert "novel_share" not in report["pairs"]["harness vs nearest"]
    assert "exact_match_knowable" in report["pairs"]["harness vs nearest"]
    novel = records[records["novel"].astype(bool)]
    assert (novel["novel_values"].map(len).between(1, 10)).all()
    _check_intervals(report["methods"])
    _check_intervals(report["pairs"])
    for block in report["per_env"].values():
        _check_intervals(block["methods"])
    assert set(report["seen_unseen"]) == {"seen", "unseen"} and report["seen_unseen"]["seen"]["methods"] == {}
    harness = records[records["method"] == "harness"].set_index(["episode_id", "turn"])["exact_match"]
    nearest = records[records["method"] == "nearest"].set_index(["episode_id", "turn"])["exact_match"]
    assert report["pairs"]["harness vs nearest"]["exact_match"]["mean_diff"] == pytest.approx(
        (harness - nearest).mean(), abs=1e-6)
    assert report["cost"]["nearest"]["model_calls"] == 0 and report["cost"]["nearest"]["cost_usd"] == 0
    assert report["seeds"]["bootstrap"] == 0 and report["config"]["book_version"].startswith("inline-")
    progress = orjson.loads((folder / "progress.json").read_bytes())
    assert progress["status"] == "done" and progress["done"] == progress["total"] == 2 * len(held_out)
    markdown = (folder / "report.md").read_text()
    assert "| harness |" in markdown and "plots/leaderboard.png" in markdown and "## Knowable turns" in markdown
    for plot in ("leaderboard", "pairs"):
        assert (folder / "plots" / f"{plot}.png").read_bytes()[:4] == b"\x89PNG"
        assert "plotly" in (folder / "plots" / f"{plot}.html").read_text()
    assert (folder / "plots" / "plotly.min.js").exists()


def test_resume_skips_finished_units_and_recovers_a_torn_journal(alfworld_split, alfworld_book: Worldbook,
                                                                 tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    held_out = held_out[:3]
    config = _config("alf-resume", max_turns=3)
    first = run_eval(config, tmp_path / "ws", book=alfworld_book, episodes=held_out, construction=construction)
    assert first.computed == 6 and first.reused == 0
    again = run_eval(config.model_copy(update={"resamples": 500}), tmp_path / "ws", book=alfworld_book,
                     episodes=held_out, construction=construction)
    assert again.computed == 0 and again.reused == 6 and again.fingerprint == first.fingerprint
    assert again.report.bootstrap.resamples == 500  # the report is recomputed with the new settings

    journal = first.directory / "records.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # killed mid-append
    resumed = run_eval(config, tmp_path / "ws", book=alfworld_book, episodes=held_out, construction=construction)
    assert resumed.computed == 1 and resumed.reused == 5
    columns = ["method", "episode_id", "turn", "prediction", "exact_match"]
    assert resumed.records[columns].equals(first.records[columns])
    assert len(journal.read_bytes().splitlines()) == 6

    with pytest.raises(RunConflictError, match="another configuration"):
        run_eval(config.model_copy(update={"methods": ["nearest"]}), tmp_path / "ws", book=alfworld_book,
                 episodes=held_out, construction=construction)


def test_drift_on_alfworld_textworld_and_bfcl(alfworld_split, alfworld_book: Worldbook, sample, family_split,
                                              tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    sets: dict[str, tuple[Worldbook, list[Episode], list[Episode]]] = {"alfworld": (alfworld_book, construction,
                                                                                    held_out[:4])}
    for env in ("textworld", "bfcl"):
        built, evaluated = family_split(sample(env), every=3)
        sets[env] = (build_simulator_book(built, name=env).book, built, evaluated)
    for env, (book, built, evaluated) in sets.items():
        run = run_eval(_config(f"{env}-drift", "drift"), tmp_path / "ws", book=book, episodes=evaluated,
                       construction=built)
        records, report = run.records, run.report
        assert set(records["protocol"]) == {"drift"}
        assert len(records) == 2 * sum(len(e.turns) for e in evaluated)
        for (method, episode_id), group in records.groupby(["method", "episode_id"]):
            group = group.sort_values("turn")
            misses = group[group["exact_match"] < 1.0]["turn"]
            first = int(misses.min()) if len(misses) else None
            assert report.first_divergence[method][episode_id] == first
            assert group["diverged"].tolist() == [first is not None and t >= first for t in group["turn"]]
            assert group["done_real"].tolist() == [bool(t.done) for t in
                                                   next(e for e in evaluated if e.id == episode_id).turns]
        for method in METHODS:
            curve = report.fidelity_at_t[method]
            assert [row.t for row in curve] == sorted(records["turn"].unique().tolist())
            assert curve[0].n == len(evaluated)
            assert 0 <= (report.done_agreement[method].mean or 0) <= 1
        assert (run.directory / "plots" / "fidelity_at_t.png").exists()
        if env == "bfcl":  # JSON observations get the field-level F1
            assert records["json_f1"].notna().any() and "json_f1" in report.methods["harness"]


def test_next_obs_on_bfcl_scores_json_fields(sample, family_split, tmp_path: Path) -> None:
    built, evaluated = family_split(sample("bfcl"), every=3)
    run = run_eval(_config("bfcl-next", methods=["harness", "nearest", "harness-no-book"]), tmp_path / "ws",
                   book=build_simulator_book(built, name="bfcl").book, episodes=evaluated, construction=built)
    records = run.records
    json_targets = records[records["reference"].str.lstrip().str[:1].isin(["{", "["])]
    assert len(json_targets) and json_targets["json_f1"].notna().all()
    assert set(run.report.pairs) == {"harness vs nearest", "harness vs harness-no-book",
                                        "nearest vs harness-no-book"}


@pytest.fixture(scope="module")
def real_alfworld() -> set[str]:
    pytest.importorskip("alfworld", reason="alfworld is not installed (pip install 'worldsmith[envs]')")
    pytest.importorskip("textworld.envs.pddl", reason="textworld[pddl] is not installed")
    from worldsmith.envs import make

    env = make("alfworld")
    tasks = set(env.tasks())
    env.close()
    if not tasks:
        pytest.skip("no ALFWorld games (set WORLDSMITH_ALFWORLD_GAMES)")
    return tasks  # the games this machine has: the shared 36, or the 6 bundled ones


@pytest.mark.integration
def test_w2r_replays_simulated_plans_in_real_alfworld(alfworld_split, alfworld_book: Worldbook, real_alfworld,
                                                      tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    held_out = [e for e in held_out if e.task_id in real_alfworld]  # W2R needs the real game
    assert len(held_out) >= 2, "two held-out games should be among the bundled ones"
    run = run_eval(_config("alf-w2r", "w2r", max_episodes=2), tmp_path / "ws", book=alfworld_book,
                   episodes=held_out, construction=construction)
    records = run.records
    assert len(records) == 4 and set(records["turn"]) == {-1} and set(records["policy"]) == {"expert"}
    assert records["real_success"].all()  # the real expert solves its games
    by_episode = {e.id: e for e in held_out}
    for _, row in records.iterrows():  # the expert in simulation plays the recorded actions
        assert row["sim_steps"] == len(by_episode[row["episode_id"]].turns)
        assert row["w2r_success"] and pd.isna(row["action"]) and pd.isna(row["exact_match"])
    entry = run.report.w2r["expert"]
    assert entry.real == 1.0 and entry.n == 2 and entry.method == "harness"
    for method in METHODS:
        numbers = entry.methods[method]
        assert numbers.w2r == 1.0 and numbers.consistency == 1.0 and numbers.n == 2
    assert "w2r_success" in run.report.methods["harness"]

    random_run = run_eval(_config("alf-w2r-random", "w2r", policy="random", max_episodes=1, max_steps=4,
                                  methods=["nearest"]), tmp_path / "ws", book=alfworld_book, episodes=held_out,
                          construction=construction)
    row = random_run.records.iloc[0]
    assert row["sim_steps"] == 4 and not row["w2r_success"] and not row["real_success"]
    assert random_run.report.w2r["random"].methods["nearest"].consistency is None  # Real is 0: undefined


def test_recorded_hand_overs_go_back_only_into_plans_that_followed_the_recording(sample) -> None:
    from worldsmith.evals.protocols import with_handovers

    episode = next(e for e in sample("bfcl") if any(ev.name and ev.name.startswith("handover:")
                                                    for t in e.turns for ev in t.context))
    recorded = [turn.action for turn in episode.turns]
    handovers = sum(1 for t in episode.turns for ev in t.context if (ev.name or "").startswith("handover:")) + sum(
        1 for ev in episode.final_context if (ev.name or "").startswith("handover:"))
    full, inserted = with_handovers(episode, recorded)
    assert inserted and len(full) == len(recorded) + handovers
    kept = [a for a in full if any(a is r for r in recorded)]
    added = [a for a in full if not any(a is r for r in recorded)]
    assert kept == recorded and len(added) == handovers and all(set(a.arguments) == {"text"} for a in added)
    other = [*recorded[:1], recorded[-1]] if len(recorded) > 2 else recorded[::-1]
    assert with_handovers(episode, other) == (other, False)


@pytest.mark.integration
def test_w2r_on_real_bfcl_replays_the_hand_overs(sample, family_split, tmp_path: Path) -> None:
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval mpmath)")
    built, evaluated = family_split(sample("bfcl"), every=3)
    run = run_eval(_config("bfcl-w2r", "w2r", methods=["nearest"], max_episodes=1), tmp_path / "ws",
                   book=build_simulator_book(built, name="bfcl").book, episodes=evaluated, construction=built)
    row = run.records.iloc[0]
    assert row["real_success"] and row["w2r_success"] and row["route"] == "replayed with the recording's hand-overs"
