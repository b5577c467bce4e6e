"""The live protocol on the real toolshop environment (in-process): a policy acts for real, the world model runs
open loop on the same actions, and each step is scored against the real observation; and the bundled toolshop
sample evaluated with the default protocols (open loop and teacher forced together, reported apart)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from worldsmith.envs.replay import replay
from worldsmith.evals import EvalConfig, run_eval
from worldsmith.traces import Action, Episode
from worldsmith.worldbook import build_worldbook

SAMPLE = Path(__file__).resolve().parents[2] / "data_samples" / "toolshop" / "expert.jsonl"


def _call(line: str) -> Action:
    """A tool call back from its records line (`name {json arguments}`)."""
    name, _, arguments = line.partition(" ")
    return Action(name=name, arguments=orjson.loads(arguments) if arguments else {})


@pytest.fixture(scope="module")
def toolshop() -> tuple[list[Episode], list[Episode], object]:
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    built, held_out = episodes[:24], episodes[24:28]  # every toolshop task is its own family
    return built, held_out, build_worldbook(built, name="shop").book


@pytest.mark.integration
@pytest.mark.parametrize("policy", ["expert", "probing"])
def test_live_scores_the_open_loop_model_against_the_real_environment(toolshop, policy: str, tmp_path: Path) -> None:
    built, held_out, book = toolshop
    config = EvalConfig(name=f"live-{policy}", book="shop", dataset="shop", methods=["harness", "nearest"],
                        protocol="live", policy=policy, max_steps=12, resamples=200, seed=3)
    run = run_eval(config, tmp_path / "ws", book=book, episodes=held_out, construction=built)
    records = run.records
    assert set(records["protocol"]) == {"live"} and set(records["policy"]) == {policy}
    assert set(records["episode_id"]) == {e.id for e in held_out}  # every task played, per step records
    for episode in held_out:
        mine = records[(records["episode_id"] == episode.id) & (records["method"] == "harness")].sort_values("turn")
        assert len(mine) >= 1 and mine["turn"].tolist() == list(range(len(mine)))
        # the reference is what the real environment answered to the policy's actions (replayed afresh)
        real = replay("toolshop", episode.task_id or "", [_call(line) for line in mine["action"]],
                      seed=episode.metadata.get("seed"))
        assert [step.observation for step in real.steps] == mine["reference"].tolist()
        theirs = records[(records["episode_id"] == episode.id) & (records["method"] == "nearest")].sort_values("turn")
        assert theirs["action"].tolist() == mine["action"].tolist()  # every method on the same actions
        if policy == "expert":  # the deterministic expert plays the recorded episode again
            assert mine["reference"].tolist() == [t.observation.text for t in episode.turns]
    assert records["novel"].notna().all() and records["novel_tf"].notna().all()
    assert (records["novel"] | ~records["novel_tf"]).all()  # knowable open loop implies knowable teacher forced
    report = run.report
    assert report.protocol == "live" and set(report.fidelity_at_t) == {"harness", "nearest"}
    assert {"exact_match_knowable", "exact_match_knowable_tf"} <= set(report.methods["harness"])
    assert "## Live open loop" in (run.directory / "report.md").read_text()
    again = run_eval(config, tmp_path / "ws", book=book, episodes=held_out, construction=built)
    assert again.computed == 0 and again.records[["action", "reference"]].equals(records[["action", "reference"]])


def test_the_toolshop_sample_is_evaluated_open_loop_and_teacher_forced_by_default(toolshop, tmp_path: Path) -> None:
    built, held_out, book = toolshop
    config = EvalConfig(name="shop-both", book="shop", dataset="shop", methods=["harness", "nearest"],
                        resamples=200)
    assert config.protocols == ["drift", "next-obs"] and config.protocol == "drift"
    run = run_eval(config, tmp_path / "ws", book=book, episodes=held_out, construction=built)
    turns = sum(len(e.turns) for e in held_out)
    assert run.records.groupby(["protocol", "method"]).size().to_dict() == {
        (p, m): turns for p in ("drift", "next-obs") for m in ("harness", "nearest")}
    report = run.report
    assert report.protocol_names() == ["drift", "next-obs"] and report.block() is report
    drift, teacher = report.block("drift"), report.block("next-obs")
    for block, protocol in ((drift, "drift"), (teacher, "next-obs")):
        mine = run.records[(run.records["protocol"] == protocol) & (run.records["method"] == "harness")]
        assert block.methods["harness"]["exact_match"].mean == pytest.approx(mine["exact_match"].mean(), abs=1e-6)
        knowable = mine[~mine["novel"].astype(bool)]["exact_match"]
        assert block.methods["harness"]["exact_match_knowable"].n == len(knowable)
    # open loop more is novel than teacher forced, on the same turns
    assert drift.methods["harness"]["novel_share"].mean >= drift.methods["harness"]["novel_share_tf"].mean
    assert drift.methods["harness"]["novel_share_tf"].mean == pytest.approx(teacher.methods["harness"]["novel_share"].mean)
    assert drift.fidelity_at_t and not teacher.fidelity_at_t
    markdown = (run.directory / "report.md").read_text()
    assert markdown.index("# open loop (drift)") < markdown.index("# teacher forced (next-obs)")
    assert "## Open loop and teacher forced" in markdown and "protocols: **drift**" in markdown
    assert (run.directory / "plots" / "leaderboard.png").exists()
    assert (run.directory / "plots" / "next-obs-leaderboard.png").exists()
    assert report.plots["next-obs:leaderboard"] == ["plots/next-obs-leaderboard.png", "plots/next-obs-leaderboard.html"]
