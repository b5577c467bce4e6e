"""`worldsmith traces search` and `traces index`: ranked hits with turn links in --json, rebuild, scan fallback."""

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


def run(*args: str, workspace: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    return result


def test_search_and_index(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    episodes = [Episode(id=f"run-{n}", env_id="shop", task=f"buy {n}", turns=[
        Turn(index=0, action=Action(name="look"), observation=Observation(text="a kitchen")),
        Turn(index=1, action=Action(name="take", arguments={"item": f"mug {n}" if n == 3 else "apple"}),
             observation=Observation(text="you take it"))]) for n in range(6)]
    Workspace(ws).add_episodes("d", episodes)
    found = orjson.loads(run("traces", "search", "mug", "--dataset", "d", "--json", workspace=ws).stdout)
    assert found["used_index"] and [h["turn_id"] for h in found["hits"]] == ["run-3#1"]
    assert found["hits"][0]["dataset"] == "d" and "[mug]" in found["hits"][0]["snippet"]
    inside = orjson.loads(run("traces", "search", '"UG 3"', "--dataset", "d", "--json", workspace=ws).stdout)
    assert [h["turn_id"] for h in inside["hits"]] == ["run-3#1"]  # a case-insensitive substring, space and all
    stats = orjson.loads(run("traces", "index", "--dataset", "d", "--rebuild", "--json", workspace=ws).stdout)
    assert stats["rows"] == 12 and stats["parts"] == 1
    (ws / "datasets" / "d" / "search.sqlite").unlink()
    scanned = orjson.loads(run("traces", "search", "mug", "--dataset", "d", "--json", workspace=ws).stdout)
    assert not scanned["used_index"] and [h["turn_id"] for h in scanned["hits"]] == ["run-3#1"]
    text = run("traces", "search", "kitchen", "--dataset", "d", "--limit", "2", workspace=ws).stdout
    assert "run-0#0" in text and "2 turns (scan" in text
