"""The rehearsal probe on freshly recorded BFCL transitions, a Ray Tune sweep with a failing trial, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from envace_support import BFCL_SAMPLE, REPO, TINY, collect_bfcl

from worldsmith.envace.data import ChatFormat
from worldsmith.envace.modeling import load_policy
from worldsmith.envace.probe import METRICS, metric_functions, probe_transitions, rehearsal_fidelity
from worldsmith.envs import available, make

pytestmark = pytest.mark.slow  # trains and sweeps through the CLI

needs_bfcl = pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@needs_bfcl
def test_probe_scores_rehearsals_against_real_backend_responses() -> None:
    episodes = collect_bfcl(["multi_turn_base_2", "multi_turn_base_3"])  # not in the bundled training sample
    model, tokenizer = load_policy(TINY, device="cpu")
    transitions = probe_transitions(episodes, tokenizer, n=4).samples  # whole references only
    assert len(transitions) == 4 and all(t.role == "rehearse" and t.turn is not None for t in transitions)
    fmt = ChatFormat(tokenizer)
    env = make("bfcl")
    by_id = {episode.id: episode for episode in episodes}
    for transition in transitions:  # each reference is what the real backend answers to that call after that history
        episode = by_id[transition.episode_id]
        env.reset(episode.task_id)
        for turn in episode.turns[: transition.turn + 1]:
            for event in turn.context:  # the user turns handed over before this call
                if event.name == "handover:respond":
                    env.step("respond()")
            if turn.index < transition.turn:
                env.step(turn.action.raw)
        assert env.step(transition.action).observation.text == fmt.decode(transition.target_ids)
    env.close()
    result = rehearsal_fidelity(model, tokenizer, transitions, max_new_tokens=24, batch_size=3)
    assert result["n"] == 4 and len(result["examples"]) == 4
    for name in METRICS:
        assert 0.0 <= result[name] <= 1.0
    example = result["examples"][0]
    assert example["real"] == fmt.decode(transitions[0].target_ids) and isinstance(example["rehearsed"], str)
    metrics = metric_functions()
    assert metrics["exact_match"](example["real"], example["real"]) == 1.0
    assert example["token_f1"] == metrics["token_f1"](example["rehearsed"], example["real"])


def test_sweep_runs_two_trials_through_ray_and_survives_a_failed_one(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from worldsmith.envace.sweep import SweepConfig, run_sweep

    config = SweepConfig.model_validate({
        "name": "lam",
        "base": {
            "model": str(TINY), "data": {"paths": [str(BFCL_SAMPLE)], "env": "bfcl", "max_episodes": 2,
                                         "max_seq_len": 512},
            "steps": 2, "batch_size": 1, "probe": {"n_transitions": 2, "max_new_tokens": 12},
        },
        "grid": {"lam": [0.0, 0.5], "model": [str(TINY)]},
        "metric": "rehearse_loss_last", "mode": "min",
    })
    config.grid["model"].append(str(tmp_path / "no-such-model"))  # this trial fails at load
    result = run_sweep(config, num_cpus=2, out=tmp_path / "sweep")
    rows = {(row["overrides"]["lam"], row["overrides"]["model"]): row for row in result.trials}
    assert len(rows) == 4
    ok = [row for row in result.trials if row["status"] == "ok"]
    failed = [row for row in result.trials if row["status"] == "failed"]
    assert len(ok) == 2 and len(failed) == 2
    assert all("no-such-model" in row["overrides"]["model"] and "config.json" in row["error"] for row in failed)
    for row in ok:
        assert row["rehearse_loss_last"] is not None and row["steps"] == 2
        assert (Path(row["run_dir"]) / "summary.json").is_file()
    assert result.best is not None and result.best["status"] == "ok"
    saved = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert len(saved["trials"]) == 4 and saved["best"]["trial"] == result.best["trial"]


def test_cli_train_prints_the_summary_and_names_bad_fields(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "worldsmith", "envace", "train", "--config", str(REPO / "configs" / "envace_tiny.yaml"),
               "--out", str(out), "--set", "steps=2", "--set", "data.max_episodes=2", "--set", "probe.n_transitions=2",
               "--set", "probe.holdout=0", "--set", "data.max_seq_len=512", "--json"]
    done = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    summary = json.loads(done.stdout)
    for key in ("act_loss_first", "act_loss_last", "rehearse_loss_first", "rehearse_loss_last", "rehearsal_fidelity"):
        assert isinstance(summary[key], float), key
    assert summary["steps"] == 2 and Path(summary["checkpoint"]).is_dir()
    assert b"step 2/2" in done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: {paths: [x.jsonl]}\nobjective: sft\n")
    done = subprocess.run([sys.executable, "-m", "worldsmith", "envace", "train", "--config", str(bad), "--json"],
                          cwd=tmp_path, env=_env(), capture_output=True, timeout=120)
    assert done.returncode == 3  # bad input: the config names no objective it knows
    assert "objective" in json.loads(done.stdout)["error"]


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("envace_*.yaml")), ids=lambda path: path.name)
def test_the_example_configs_are_valid(path: Path) -> None:
    from worldsmith.envace.config import EnvACEConfig

    config = EnvACEConfig.from_file(path)
    assert config.data.paths and config.steps > 0
