"""Fixtures for the evaluation tests: bundled samples, a held-out ALFWorld split by family, books built from them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook, build_worldbook, trajectory_family

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "data_samples" / "collected"
TINY = REPO / "data_samples" / "models" / "tiny"


def read_sample(name: str) -> list[Episode]:
    path = SAMPLES / f"{name}.jsonl"
    if not path.exists():
        pytest.fail(f"sample missing: {path} (data_samples/make_samples.py)")
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in path.read_bytes().splitlines() if line.strip()]


def split_by_family(episodes: list[Episode], every: int = 4) -> tuple[list[Episode], list[Episode]]:
    """(construction, held out): every `every`-th family (sorted) is held out, whole."""
    families = sorted({trajectory_family(e) for e in episodes})
    held = set(families[::every])
    return ([e for e in episodes if trajectory_family(e) not in held],
            [e for e in episodes if trajectory_family(e) in held])


@pytest.fixture(scope="session")
def sample() -> Callable[[str], list[Episode]]:
    return read_sample


@pytest.fixture(scope="session")
def alfworld_split() -> tuple[list[Episode], list[Episode]]:
    return split_by_family(read_sample("alfworld_expert"))


@pytest.fixture(scope="session")
def alfworld_book(alfworld_split: tuple[list[Episode], list[Episode]]) -> Worldbook:
    construction, _ = alfworld_split
    return build_worldbook(construction, name="alfworld").book


@pytest.fixture(scope="session")
def tiny_spec() -> str:
    if not (TINY / "config.json").exists():
        pytest.fail(f"the tiny model is missing at {TINY} (make samples)")
    return f"tiny:{TINY}"


@pytest.fixture(scope="session")
def family_split() -> Callable[..., tuple[list[Episode], list[Episode]]]:
    return split_by_family
