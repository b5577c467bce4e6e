"""`worldsmith traces list`: paging with --limit/--offset, --search, totals in --json, bad bounds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from worldsmith import Workspace
from worldsmith.traces.model import Action, Episode, Observation, Turn

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def run(*args: str, workspace: Path, check_code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == check_code, result.stderr + result.stdout
    return result


def _episode(number: int) -> Episode:
    turns = [Turn(index=0, action=Action(name="look"), observation=Observation(text="a room"))]
    return Episode(id=f"run-{number:02d}", env_id="even" if number % 2 == 0 else "odd", task=f"task {number}",
                   turns=turns, reward=float(number % 2))


def test_pages_filters_and_bounds(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    Workspace(ws).add_episodes("d", [_episode(n) for n in range(25)])
    first = orjson.loads(run("traces", "list", "--dataset", "d", "--limit", "10", "--json", workspace=ws).stdout)
    last = orjson.loads(run("traces", "list", "--dataset", "d", "--limit", "10", "--offset", "20", "--json",
                            workspace=ws).stdout)
    assert first["total"] == last["total"] == 25 and (first["limit"], last["offset"]) == (10, 20)
    assert [e["episode_id"] for e in first["episodes"]] == [f"run-{n:02d}" for n in range(10)]
    assert [e["episode_id"] for e in last["episodes"]] == [f"run-{n:02d}" for n in range(20, 25)]
    odd = orjson.loads(run("traces", "list", "--dataset", "d", "--env", "odd", "--search", "run-1", "--json",
                           workspace=ws).stdout)
    assert [e["episode_id"] for e in odd["episodes"]] == [f"run-{n}" for n in range(11, 20, 2)] and odd["total"] == 5
    text = run("traces", "list", "--dataset", "d", "--limit", "3", "--offset", "5", workspace=ws).stdout
    assert "run-05" in text and "run-08" not in text and "3 of 25 episodes (offset 5)" in text
    refused = run("traces", "list", "--dataset", "d", "--limit", "0", workspace=ws, check_code=2)
    assert "--limit must be at least 1" in refused.stderr
