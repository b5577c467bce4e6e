"""Fixtures for the simulator tests: the ALFWorld and BFCL samples, the tiny model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # sim_support: helpers and the spawned workers
    sys.path.insert(0, _HERE)

from sim_support import TINY, sample_episodes  # noqa: E402

from worldsmith.traces import Episode  # noqa: E402


@pytest.fixture(scope="session")
def alfworld() -> list[Episode]:
    return sample_episodes("alfworld")


@pytest.fixture(scope="session")
def bfcl() -> list[Episode]:
    return sample_episodes("bfcl")


@pytest.fixture
def tiny_llm(tmp_path: Path):
    from worldsmith.llm import open_llm

    if not (TINY / "config.json").exists():
        pytest.fail(f"the tiny model is missing at {TINY} (make samples)")
    llm = open_llm(f"tiny:{TINY}", tmp_path / "ws", component="sim-test")
    yield llm
    llm.close()
