"""Evaluating checkpoints in real BFCL with and without rehearsal: outcomes, paired intervals, run store, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from envace_scripted import BFCL_SAMPLE, REPO, TINY, ScriptedLLM

from worldsmith.envace.data import transcript_from_episode
from worldsmith.envace.evaluate import EvalSettings, evaluate_checkpoint, training_task_ids
from worldsmith.envace.rehearsal import MEMORY_HEADER, RehearsalConfig
from worldsmith.envs import available
from worldsmith.traces import read_traces
from worldsmith.traces.model import Episode

JOINT = REPO / "data_samples" / "models" / "tiny-envace-joint"

pytestmark = [pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed"),
              pytest.mark.slow]  # evaluates checkpoints in the real BFCL environment
TASKS = ["multi_turn_base_1", "multi_turn_base_102"]


def _gold() -> dict[str, list[str]]:
    """Each sample task's recorded calls and hand-overs, keyed by its task text."""
    episodes = [item for item in read_traces([BFCL_SAMPLE]) if isinstance(item, Episode)]
    return {episode.task: transcript_from_episode(episode).actions for episode in episodes if episode.task_id in TASKS}


def _learns_from_rehearsal() -> ScriptedLLM:
    """A model whose first idea is a misspelt tool; only the rehearsed error in its memory makes it use the right one.

    Its environment role predicts errors for misspelt tools. Without rehearsal it never gets a call right.
    """
    gold = _gold()
    progress = dict.fromkeys(gold, 0)

    def task_of(messages) -> str:
        system = messages[0]["content"]
        return next(task for task in gold if f"Task: {task}\n" in system)

    def act(messages, index: int) -> str:
        task = task_of(messages)
        planned = gold[task][min(progress[task], len(gold[task]) - 1)]
        if MEMORY_HEADER in messages[-1]["content"] and "not defined" in messages[-1]["content"]:
            progress[task] += 1
            return planned
        if MEMORY_HEADER in messages[-1]["content"]:  # a hand-over rehearsed without error
            progress[task] += 1
            return planned
        return planned if planned.startswith("respond") else planned.replace("(", "_v2(", 1)

    def rehearse(messages) -> str:
        name = messages[-2]["content"].split("(", 1)[0]
        return f"Error during execution: name '{name}' is not defined" if name.endswith("_v2") else "{}"

    return ScriptedLLM(act=act, rehearse=rehearse)


def test_rehearsal_is_compared_with_the_plain_policy_on_real_bfcl(tmp_path: Path) -> None:
    settings = EvalSettings(checkpoint=str(TINY), tasks=TASKS, budgets=[RehearsalConfig(k=1, max_seq_len=100_000)],
                            max_steps=30, resamples=200, env_kwargs={"categories": ["multi_turn_base"]})
    out = tmp_path / "eval"
    seen: list[tuple[int, int, str]] = []
    result = evaluate_checkpoint(settings, out=out, llm=_learns_from_rehearsal(),
                                 progress=lambda done, total, message: seen.append((done, total, message)))
    by_method = {(record.method, record.task): record for record in result.records}
    for task in TASKS:
        plain, rehearsed = by_method[("plain", task)], by_method[("k1", task)]
        assert (plain.success, plain.score, plain.finished) == (0.0, 0.0, False)  # misspelt calls until max_steps
        assert (rehearsed.success, rehearsed.score, rehearsed.finished) == (1.0, 1.0, True)
        assert rehearsed.rehearsed_steps == rehearsed.steps and rehearsed.changed_steps > 0
        assert rehearsed.model_calls == 3 * rehearsed.steps and plain.model_calls == plain.steps
    report = result.report
    assert report["tasks"] == TASKS
    assert report["methods"]["k1"]["success"]["mean"] == 1.0
    assert report["methods"]["plain"]["success"]["mean"] == 0.0
    assert report["pairs"]["k1 vs plain"]["success"] == {"mean_diff": 1.0, "low": 1.0, "high": 1.0, "n": 2,
                                                             "trajectories": 2}
    assert report["cost"]["k1"]["model_calls_per_step"] == 3.0
    assert seen[-1] == (4, 4, "done")
    # the run store
    assert json.loads((out / "report.json").read_text())["pairs"] == report["pairs"]
    assert len((out / "records.jsonl").read_text().splitlines()) == 4
    episodes = [Episode.model_validate({k: v for k, v in json.loads(line).items() if k != "format"})
                for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [episode.metadata["method"] for episode in episodes] == ["envace-plain", "envace-k1"] * 2
    assert all(episode.success for episode in episodes if episode.metadata["method"] == "envace-k1")
    rehearsals = [json.loads(line) for line in (out / "rehearsals.jsonl").read_text().splitlines()]
    assert any(row["method"] == "k1" and row["changed"] and "not defined" in row["memory"] for row in rehearsals)
    assert EvalSettings.model_validate(json.loads((out / "config.json").read_text())) == settings


def test_training_tasks_are_left_out_and_results_go_into_the_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "step-3"
    checkpoint.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"objective": "joint", "data": {"paths": [str(BFCL_SAMPLE)]}}))
    assert "multi_turn_base_1" in training_task_ids(json.loads((run / "config.json").read_text()))
    settings = EvalSettings.build(checkpoint, rehearse=2, n_tasks=2, max_steps=2, resamples=100,
                                  env_kwargs={"categories": ["multi_turn_base"]})
    result = evaluate_checkpoint(settings, llm=ScriptedLLM(act=lambda messages, index: ""))
    assert result.report["tasks"] == ["multi_turn_base_0", "multi_turn_base_2"]  # base_1 was trained on
    assert result.report["excluded_training_tasks"] == 6
    assert result.out is not None and result.out.parent == run / "evals" and (result.out / "report.json").is_file()
    assert all(record.steps == 0 for record in result.records)  # an empty first action ends the episode


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        EvalSettings.build(TINY, max_steps=0)
    with pytest.raises(ValueError, match="not a checkpoint folder"):
        evaluate_checkpoint(EvalSettings(checkpoint=str(REPO / "data_samples")))


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real two-step joint run on the BFCL sample (the trainer of worldsmith.envace), from the EnvACE-trained
    tiny checkpoint: it proposes calls, so rehearsal has something to rehearse (the bundled tiny model, two
    steps in, may answer a blank line: "no action", one call a step)."""
    from worldsmith.envace.config import EnvACEConfig
    from worldsmith.envace.trainer import Trainer

    out = tmp_path_factory.mktemp("envace") / "run"
    config = EnvACEConfig.from_dict({
        "model": str(JOINT), "data": {"paths": [str(BFCL_SAMPLE)], "max_seq_len": 512}, "steps": 2,
        "batch_size": 1, "threads": 1, "probe": {"n_transitions": 2, "max_new_tokens": 8}, "out": str(out),
    })
    Trainer(config).train(resume=False)
    return out


def test_cli_evaluates_a_trained_checkpoint_with_and_without_rehearsal(trained_run: Path, tmp_path: Path) -> None:
    checkpoint = trained_run / "checkpoints" / "step-2"
    out = tmp_path / "cli-eval"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "worldsmith", "envace", "eval", "--checkpoint", str(checkpoint), "--env", "bfcl",
         "--rehearse", "1", "--parallel", "2", "--tasks", "multi_turn_base_0", "--max-steps", "2",
         "--resamples", "100", "--threads", "1", "--out", str(out), "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    summary = json.loads(completed.stdout)
    assert summary["out"] == str(out)
    assert set(summary["methods"]) == {"k1-n2", "plain"}
    assert set(summary["pairs"]["k1-n2 vs plain"]) == {"success", "score"}
    cost = summary["cost"]
    assert cost["plain"]["model_calls_per_step"] == 1.0
    assert cost["k1-n2"]["model_calls_per_step"] > 3  # propose, rehearse, 2 sampled + 2 rehearsed, final
    assert cost["k1-n2"]["cached_share"] > 0.5  # rehearse prompts extend the act prompt: served from the cache
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {record["method"] for record in records} == {"plain", "k1-n2"}
    assert all(0.0 <= record["score"] <= 1.0 for record in records)


def test_budgets_follow_the_runs_chunk_length() -> None:
    from worldsmith.envace.evaluate import _as_trained

    run = {"data": {"max_seq_len": 512, "max_observation_chars": 300}}
    budget = _as_trained(RehearsalConfig(k=1), run)
    assert (budget.max_seq_len, budget.max_observation_chars, budget.k) == (512, 300, 1)
    assert _as_trained(RehearsalConfig(max_seq_len=2048), run).max_seq_len == 2048  # set explicitly: kept
    assert _as_trained(RehearsalConfig(), None) == RehearsalConfig()
