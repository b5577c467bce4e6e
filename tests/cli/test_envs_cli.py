"""`worldsmith envs|collect|replay` as real subprocesses, on the unit-test counter environment.

The environment reaches the CLI the way a researcher's own would: through $WORLDSMITH_ENV_PLUGINS.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test

TESTS = Path(__file__).resolve().parents[1]


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "WORLDSMITH_ENV_PLUGINS": "fake_envs",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == code, result.stderr + result.stdout
    return result


def test_envs_list_and_check(tmp_path: Path) -> None:
    listed = orjson.loads(run("envs", "list", "--json", workspace=tmp_path).stdout)
    names = {row["name"] for row in listed["environments"]}
    assert {"alfworld", "textworld", "scienceworld", "bfcl", "shell", "counter"} <= names
    assert orjson.loads(run("envs", "check", "counter", "--json", workspace=tmp_path).stdout)["ok"] is True
    tasks = orjson.loads(run("envs", "tasks", "counter", "--json", workspace=tmp_path).stdout)
    assert tasks["tasks"] == ["reach-2", "reach-3", "talk-2"]


def test_collect_json_resume_and_replay(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first = orjson.loads(run("collect", "counter", "--tasks", "reach-2", "broken", "reach-3", "--dataset", "c",
                             "--json", workspace=ws).stdout)
    assert first["wins"] == 2 and first["ingested"] == 2 and first["status"] == {"ok": 2, "load_error": 1}
    assert first["failures"][0]["error"] == "task 'broken' cannot load: the game file is corrupt"
    again = orjson.loads(run("collect", "counter", "--tasks", "reach-2", "broken", "reach-3", "--dataset", "c",
                             "--json", workspace=ws).stdout)
    assert again["skipped_already_done"] == 3 and again["ingested"] == 0
    listed = orjson.loads(run("traces", "list", "--dataset", "c", "--json", workspace=ws).stdout)
    assert len(listed["episodes"]) == 2
    replayed = orjson.loads(run("replay", "counter", "--episode", "counter-reach-3-expert-s0", "--dataset", "c",
                                "--json", workspace=ws).stdout)
    assert replayed["reproduced"] is True and replayed["n_steps"] == 3
    actions = tmp_path / "actions.txt"
    actions.write_text("inc\nfly\n")
    out = orjson.loads(run("replay", "counter", "--task", "reach-3", "--actions", str(actions), "--json",
                           workspace=ws).stdout)
    assert [s["observation"] for s in out["steps"]] == ["count 1", "I don't know how to 'fly'."]
    assert out["success"] is False


def test_collect_errors_are_clear(tmp_path: Path) -> None:
    unknown = run("collect", "nope", "--dataset", "x", workspace=tmp_path, code=4)
    assert "unknown environment 'nope'" in unknown.stderr
    nothing = orjson.loads(run("collect", "counter", "--tasks", "broken", "--dataset", "x", "--json",
                               workspace=tmp_path, code=1).stdout)
    assert nothing["status"] == {"load_error": 1}
    usage = run("replay", "counter", workspace=tmp_path, code=1)
    assert "give --task and --actions" in usage.stderr
