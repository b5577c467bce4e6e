"""Fixtures for the evaluation tests: bundled samples, a held-out ALFWorld split by family, books built from them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import sample_episodes, split_by_family
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "data_samples" / "collected"
TINY = REPO / "data_samples" / "models" / "tiny"


read_sample = sample_episodes  # the names these tests use


@pytest.fixture(scope="session")
def sample() -> Callable[[str], list[Episode]]:
    return read_sample


@pytest.fixture(scope="session")
def alfworld_split() -> tuple[list[Episode], list[Episode]]:
    return split_by_family(read_sample("alfworld_expert"))


@pytest.fixture(scope="session")
def alfworld_book(alfworld_split: tuple[list[Episode], list[Episode]]) -> Worldbook:
    construction, _ = alfworld_split
    return build_simulator_book(construction, name="alfworld").book


@pytest.fixture(scope="session")
def tiny_spec() -> str:
    if not (TINY / "config.json").exists():
        pytest.fail(f"the tiny model is missing at {TINY} (make samples)")
    return f"tiny:{TINY}"


@pytest.fixture(scope="session")
def family_split() -> Callable[..., tuple[list[Episode], list[Episode]]]:
    return split_by_family
