"""Data-parallel EnvACE training on two real processes (torchrun, gloo on CPU): both objectives run, the main
process alone writes the run store, the metrics add up over processes, every process's RNG is checkpointed,
and the trainer's own checksum at each checkpoint confirms the processes kept the same weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from envace_support import BFCL_SAMPLE, TINY

from worldsmith.envace.distributed import DataParallel
from worldsmith.envs import available

pytestmark = pytest.mark.integration


def _launch(tmp_path: Path, name: str, **fields: object) -> dict:
    config = {"model": str(TINY), "data": {"paths": [str(BFCL_SAMPLE)], "env": "bfcl", "max_seq_len": 1024},
              "objective": "joint", "lr": 0.002, "warmup_steps": 1, "steps": 16, "batch_size": 2, "seed": 0,
              "threads": 1, "checkpoint_every": 8, "probe": {"holdout": 1, "n_transitions": 3, "max_new_tokens": 16},
              "grpo": {"group_size": 2, "max_steps": 2, "max_new_tokens": 12}, **fields}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "worldsmith", "envace",
               "train", "--config", str(path), "--out", str(tmp_path / name), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # one summary: only the main process reports


def test_a_single_process_is_not_distributed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    parallel = DataParallel.from_environment("cpu")
    assert not parallel.active and parallel.is_main and parallel.device is None
    assert parallel.shard([3, 1, 2]) == [3, 1, 2]
    assert parallel.merge_rows({"tokens": 5}) == {"tokens": 5}


def test_joint_training_on_two_processes(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    summary = _launch(tmp_path, "joint")
    assert summary["steps"] == 16
    assert summary["act_loss_last"] < summary["act_loss_first"] - 0.5
    assert summary["rehearse_loss_last"] < summary["rehearse_loss_first"] - 0.5
    rows = [json.loads(line) for line in (tmp_path / "joint" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(1, 17))  # written once, by the main process
    assert all(row["processes"] == 2 for row in rows)
    rng = load_file(str(tmp_path / "joint" / "checkpoints" / "step-16" / "rng.safetensors"))
    assert {"sampler", "sampler_rank1", "torch_cpu", "torch_cpu_rank1"} <= set(rng)
    state = json.loads((tmp_path / "joint" / "checkpoints" / "step-16" / "trainer_state.json").read_text())
    assert state["processes"] == 2


@pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")
def test_grpo_on_two_processes_splits_the_tasks(tmp_path: Path) -> None:
    summary = _launch(tmp_path, "grpo", objective="grpo", steps=1, checkpoint_every=1,
                      **{"grpo": {"group_size": 2, "max_steps": 2, "max_new_tokens": 12, "reward": "shaped"}})
    assert summary["steps"] == 1 and summary["reward_first"] is not None
    [row] = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert row["processes"] == 2 and row["source"] == "real"
    assert row["rollouts"] == 2 * 2  # batch 2 tasks, one a process, G = 2 rollouts each, summed over processes


@pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")
def test_a_two_process_grpo_run_resumes_to_the_same_metrics(tmp_path: Path) -> None:
    """Each process restores its own sampler from the checkpoint: resumed step 2 samples what an unbroken run does."""
    fields = {"objective": "grpo", "lr_schedule": "constant", "warmup_steps": 0, "checkpoint_every": 1,
              "grpo": {"group_size": 2, "max_steps": 2, "max_new_tokens": 12, "reward": "shaped"}}
    _launch(tmp_path, "straight", steps=2, **fields)
    _launch(tmp_path, "broken", steps=1, **fields)
    resumed = _launch(tmp_path, "broken", steps=2, **fields)
    assert resumed["resumed_from"] == 1
    keys = ("loss", "reward_act", "reward_rehearse", "generated_tokens", "grad_norm", "act_loss_eval")

    def last_row(name: str) -> dict:
        rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [1, 2]
        return {key: rows[-1].get(key) for key in keys}

    assert last_row("broken") == last_row("straight")
