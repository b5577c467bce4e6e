"""Helpers for the EnvACE core tests: bundled data, small configs, freshly collected BFCL episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldsmith.envace.config import EnvACEConfig
from worldsmith.traces import read_traces
from worldsmith.traces.model import Episode

REPO = Path(__file__).resolve().parents[2]
BFCL_SAMPLE = REPO / "data_samples" / "collected" / "bfcl.jsonl"
TINY = REPO / "data_samples" / "models" / "tiny"


def bfcl_episodes() -> list[Episode]:
    """The six bundled BFCL multi-turn expert episodes (recorded on the real backends)."""
    return [item for item in read_traces([BFCL_SAMPLE]) if isinstance(item, Episode)]


def small_config(out: Path, **fields: Any) -> EnvACEConfig:
    """A config that trains in seconds on one thread (overrides are dotted fields)."""
    base: dict[str, Any] = {
        "model": str(TINY),
        "out": str(out),
        "data": {"paths": [str(BFCL_SAMPLE)], "env": "bfcl", "max_seq_len": 512},
        "objective": "joint",
        "lam": 1.0,
        "lr": 0.003,
        "warmup_steps": 1,
        "steps": 4,
        "batch_size": 2,
        "seed": 0,
        "threads": 1,
        # the probe on training episodes: these tests train for seconds and check what is logged, not the split
        # (tests/envace/test_honest_probe.py checks the held-out default)
        "probe": {"n_transitions": 3, "max_new_tokens": 16, "source": "train"},
        "grpo": {"group_size": 2, "max_steps": 2, "max_new_tokens": 12},
    }
    return EnvACEConfig.from_dict(base).with_overrides(fields)


def collect_bfcl(tasks: list[str]) -> list[Episode]:
    """Expert episodes recorded now on BFCL's in-process backends (real responses)."""
    from worldsmith.envs import ExpertPolicy, make, record_episode

    env = make("bfcl")
    try:
        return [record_episode(env, ExpertPolicy(), task, max_steps=60) for task in tasks]
    finally:
        env.close()
