"""Fixtures for the simulator tests: the ALFWorld and BFCL samples, the tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_support import TINY, sample_episodes

from worldsmith.traces import Episode


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
