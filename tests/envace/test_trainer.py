"""The trainer: joint supervised lowers both roles' losses, role-wise GRPO logs rewards and advantages per role,
either objective starts from the other's checkpoint, the probe switches sources, LoRA, and exact resume
after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from envace_support import REPO, small_config

from worldsmith.envace.modeling import load_policy
from worldsmith.envace.trainer import Trainer
from worldsmith.envace.training_runs import TrainingRunStore
from worldsmith.envs import available

pytestmark = pytest.mark.slow  # trains the tiny model, in process and in subprocesses

needs_bfcl = pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")


def test_joint_training_lowers_both_losses_and_lambda_zero_is_the_plain_agent(tmp_path: Path) -> None:
    fields = {"steps": 16, "lr": 0.002, "data.max_seq_len": 1024, "probe.holdout": 1}
    config = small_config(tmp_path / "joint", checkpoint_every=8, **fields)
    summary = Trainer(config).train()
    assert summary.steps == 16 and summary.objective == "joint"
    assert summary.act_loss_last < summary.act_loss_first - 0.5
    assert summary.rehearse_loss_last < summary.rehearse_loss_first - 0.5
    assert summary.rehearsal_fidelity is not None and 0.0 <= summary.rehearsal_fidelity <= 1.0
    assert summary.probe_source == "holdout"
    store = TrainingRunStore(tmp_path / "joint")
    rows = store.metrics()
    assert [row["step"] for row in rows] == list(range(1, 17))
    assert all({"act_loss", "rehearse_loss", "lr", "tokens_per_s", "time_s"} <= set(row) for row in rows)
    assert "rehearsal_fidelity" in rows[-1]
    assert [step for step, _ in store.checkpoints()] == [8, 16]
    assert json.loads((tmp_path / "joint" / "config.json").read_text())["lam"] == 1.0
    assert json.loads((tmp_path / "joint" / "status.json").read_text())["state"] == "done"
    probes = store.probes()
    assert probes and probes[-1]["examples"] and {"real", "rehearsed", "action"} <= set(probes[-1]["examples"][0])
    # λ = 0: the rehearse role is not trained
    plain = Trainer(small_config(tmp_path / "plain", lam=0.0, **fields)).train()
    assert plain.act_loss_last < plain.act_loss_first - 0.5
    assert plain.rehearse_loss_last > summary.rehearse_loss_last + 0.3


@needs_bfcl
def test_grpo_from_a_joint_checkpoint_logs_rewards_and_advantages_per_role(tmp_path: Path) -> None:
    joint = Trainer(small_config(tmp_path / "joint", steps=2)).train()
    assert joint.checkpoint
    config = small_config(tmp_path / "grpo", objective="grpo", model=joint.checkpoint, steps=2, batch_size=1,
                          **{"grpo.reward": "shaped", "grpo.sft_coef": 0.5, "probe.every": 1})
    summary = Trainer(config).train()
    rows = TrainingRunStore(tmp_path / "grpo").metrics()
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert row["source"] == "real" and row["rollouts"] == 2
        for key in ("reward_act", "reward_rehearse", "adv_act_mean", "adv_act_std", "adv_rehearse_mean",
                    "adv_rehearse_std", "adv_mean", "adv_std", "pg_loss_act", "pg_loss_rehearse", "act_loss",
                    "act_loss_eval", "rehearse_loss_eval", "rehearsal_fidelity"):
            assert key in row, key
        assert 0.0 <= row["reward_act"] <= 1.0 and 0.0 <= row["reward_rehearse"] <= 1.0
        assert abs(row["adv_act_mean"]) < 1e-6 and abs(row["adv_rehearse_mean"]) < 1e-6  # a baseline per role
    assert summary.reward_first is not None and summary.act_loss_first is not None
    # and back: joint supervised from the GRPO checkpoint
    again = Trainer(small_config(tmp_path / "joint2", model=summary.checkpoint, steps=1)).train()
    assert again.steps == 1


@needs_bfcl
def test_grpo_credits_each_rehearsal_per_transition(tmp_path: Path) -> None:
    config = small_config(tmp_path / "transition", objective="grpo", steps=1, batch_size=1,
                          **{"grpo.group_size": 4, "grpo.rehearse_credit": "transition",
                             "grpo.rehearse_calls_only": True, "grpo.dr_grpo": True})
    summary = Trainer(config).train()
    row = TrainingRunStore(tmp_path / "transition").metrics()[0]
    assert row["rollouts"] == 4 and summary.steps == 1
    if row.get("adv_rehearse_mean") is not None:  # every transition's advantages sum to zero
        assert abs(row["adv_rehearse_mean"]) < 1e-6


@needs_bfcl
def test_grpo_switches_to_imagined_rollouts_once_the_probe_passes(tmp_path: Path) -> None:
    config = small_config(tmp_path / "switch", objective="grpo", steps=2, batch_size=1,
                          **{"grpo.train_roles": "rehearse", "grpo.dr_grpo": True, "grpo.kl_coef": 0.05,
                             "probe.every": 1, "probe.threshold": 0.0, "probe.switch_to_imagined": True})
    summary = Trainer(config).train()
    rows = TrainingRunStore(tmp_path / "switch").metrics()
    assert rows[0]["source"] == "real" and rows[0]["switched_to"] == "imagined"
    assert rows[1]["source"] == "imagined"
    assert summary.switched_at == 1
    assert "pg_loss_act" not in rows[0]  # only the rehearse role is trained
    assert "kl" in rows[1]


def test_lora_adapters_checkpoint_and_resume(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    config = small_config(tmp_path / "lora", steps=2, checkpoint_every=1, lora={"r": 4, "alpha": 8})
    first = Trainer(config).train()
    folder = Path(first.checkpoint)
    assert (folder / "adapter").is_dir() and (folder / "model.safetensors").is_file()
    model, _ = load_policy(folder, device="cpu")  # merged: a plain model folder
    assert not hasattr(model, "peft_config")
    resumed = Trainer(config.with_overrides({"steps": 3})).train()
    assert resumed.resumed_from == 2 and resumed.steps == 3


def _train_process(config_path: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-m", "worldsmith", "envace", "train", "--config", str(config_path),
                             "--json"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _losses(run: Path) -> list[tuple]:
    return [(row["step"], row.get("act_loss"), row.get("rehearse_loss"), row["loss"], row["lr"])
            for row in TrainingRunStore(run).metrics()]


def _kill_once(process: subprocess.Popen, ready: Callable[[], bool], timeout: float = 300.0) -> None:
    """SIGKILL `process` as soon as `ready()` holds. Each check runs while the process is stopped (SIGSTOP), so
    it cannot finish between the check and the kill."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(process.pid, signal.SIGSTOP)
        except ProcessLookupError:
            break
        if process.poll() is not None:  # it exited before the stop took hold
            break
        if ready():
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            return
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.02)
    process.kill()
    process.wait(timeout=30)
    pytest.fail(f"the run ended (exit {process.returncode}) or timed out before it could be killed")


def test_a_killed_run_resumes_to_the_same_metrics(tmp_path: Path) -> None:
    def write(name: str) -> Path:
        config = small_config(tmp_path / name, steps=10, checkpoint_every=4, batch_size=1,
                              **{"data.max_episodes": 3, "probe.n_transitions": 2})
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(config.to_json()))
        return path

    whole = _train_process(write("whole"))
    out, err = whole.communicate(timeout=300)
    assert whole.returncode == 0, err.decode()[-2000:]
    reference = json.loads(out)

    killed = _train_process(write("killed"))
    store = TrainingRunStore(tmp_path / "killed")
    _kill_once(killed, lambda: store.latest_checkpoint() is not None and any(row["step"] >= 5 for row in store.metrics()))
    assert killed.returncode == -signal.SIGKILL
    assert json.loads((tmp_path / "killed" / "status.json").read_text())["state"] == "running"
    assert max(row["step"] for row in store.metrics()) >= 5  # logged past the checkpoint it resumes from

    resumed = _train_process(tmp_path / "killed.json")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()[-2000:]
    summary = json.loads(out)
    assert summary["resumed_from"] == 4
    assert _losses(tmp_path / "killed") == _losses(tmp_path / "whole")  # exactly, step by step
    for key in ("act_loss_first", "act_loss_last", "rehearse_loss_first", "rehearse_loss_last", "rehearsal_fidelity"):
        assert summary[key] == reference[key], key


@needs_bfcl
def test_the_example_grpo_run_lowers_both_roles_losses_from_the_bundled_joint_checkpoint(tmp_path: Path) -> None:
    """configs/envace_grpo_tiny.yaml (role-wise GRPO on real BFCL rollouts plus the supervised term), two steps
    from data_samples/models/tiny-envace-joint; the per-role gradient alignment of GRPO alone is logged."""
    from worldsmith.envace.config import EnvACEConfig

    config = EnvACEConfig.from_file(REPO / "configs" / "envace_grpo_tiny.yaml").with_overrides(
        {"steps": 2, "threads": 1, "out": str(tmp_path / "grpo"), "grpo.log_alignment": True,
         "probe.n_transitions": 3, "probe.max_new_tokens": 16})
    assert config.objective == "grpo" and config.grpo.train_roles == "both"
    summary = Trainer(config).train()
    assert summary.act_loss_first < 0.5 and summary.rehearse_loss_first < 1.0  # it started from the joint run
    assert summary.act_loss_last < summary.act_loss_first
    assert summary.rehearse_loss_last < summary.rehearse_loss_first
    rows = TrainingRunStore(tmp_path / "grpo").metrics()
    assert len(rows) == 2
    for row in rows:
        assert row["source"] == "real" and row["rollouts"] == config.batch_size * config.grpo.group_size
        assert row["reward_act"] > 0.0 and row["reward_rehearse"] > 0.0  # the groups carry signal
        assert -1.0 <= row["pg_align_act"] <= 1.0 and -1.0 <= row["pg_align_rehearse"] <= 1.0
