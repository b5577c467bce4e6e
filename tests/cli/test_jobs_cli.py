"""`worldsmith jobs list|stop` over job records the pages write, with real detached processes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from worldsmith.cli.main import main
from worldsmith.envace.training_runs import launch_jobs
from worldsmith.evals.eval_runs import EvalRunStore
from worldsmith.util.jobs import child_returncode

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> dict:
    assert main([*argv, "--json"]) == code
    return json.loads(capsys.readouterr().out)


def test_list_and_stop_the_workspace_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(tmp_path)
    assert _json(capsys, "jobs", "list", "--workspace", ws) == {"jobs": []}
    done = EvalRunStore(tmp_path).jobs.start("ev", [sys.executable, "-c", "pass"], workspace=tmp_path)
    deadline = time.monotonic() + 60
    while child_returncode(done.pid) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    running = launch_jobs(tmp_path).start("tr", SLEEPER, workspace=tmp_path)
    try:
        listed = _json(capsys, "jobs", "list", "--workspace", ws)["jobs"]
        assert [(j["run"], j["kind"], j["state"]) for j in listed] == [("tr", "train", "running"),
                                                                      ("ev", "eval", "finished")]
        assert listed[0]["pid"] == running.pid and listed[0]["stderr"].endswith("tr.log")
        assert main(["jobs", "list", "--workspace", ws]) == 0
        text = capsys.readouterr().out
        assert "tr" in text and "running" in text and "finished (exit 0)" in text

        assert _json(capsys, "jobs", "stop", "nope", "--workspace", ws, code=1)["error"] == "no job named 'nope'"
        stopped = _json(capsys, "jobs", "stop", "tr", "--workspace", ws, "--grace", "5")
        assert stopped["stopped"] is True and stopped["run"] == "tr" and stopped["state"] != "running"
    finally:
        if running.alive:
            main(["jobs", "stop", "tr", "--workspace", ws])
    assert not running.alive
    assert main(["jobs", "stop", "ev", "--workspace", ws]) == 0
    assert "was not running (finished)" in capsys.readouterr().out


def test_stop_asks_which_kind_when_two_share_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for folder in (EvalRunStore(tmp_path).jobs, launch_jobs(tmp_path)):
        folder.start("same", [sys.executable, "-c", "pass"], workspace=tmp_path)
    error = _json(capsys, "jobs", "stop", "same", "--workspace", str(tmp_path), code=1)["error"]
    assert "several kinds" in error and "eval, train" in error
    assert _json(capsys, "jobs", "stop", "same", "--kind", "eval", "--workspace", str(tmp_path))["kind"] == "eval"
