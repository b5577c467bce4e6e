"""The EnvACE run store's status: a run killed mid-way reads as stopped in the library, the CLI and the page."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from worldsmith.envace.training_runs import TrainingRunStore, run_states, runs_dir
from worldsmith.util.atomic import atomic_write_json


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _run(root: Path, name: str, status: dict) -> Path:
    folder = root / "runs" / "envace" / name
    folder.mkdir(parents=True)
    atomic_write_json(folder / "config.json", {"name": name, "objective": "joint", "steps": 10})
    atomic_write_json(folder / "status.json", status)
    return folder


def test_a_running_status_whose_process_is_gone_reads_as_stopped(tmp_path: Path) -> None:
    now = time.time()
    killed = _run(tmp_path, "killed", {"state": "running", "pid": _dead_pid(), "host": socket.gethostname(),
                                       "updated": now, "step": 3, "steps": 10})
    status = TrainingRunStore(killed).read_status()
    assert status["state"] == "stopped" and "resume" in status["note"]
    alive = _run(tmp_path, "alive", {"state": "running", "pid": os.getpid(), "host": socket.gethostname(),
                                     "updated": now})
    assert TrainingRunStore(alive).read_status()["state"] == "running"
    elsewhere = _run(tmp_path, "elsewhere", {"state": "running", "pid": _dead_pid(), "host": "another-machine",
                                             "updated": now})
    assert TrainingRunStore(elsewhere).read_status()["state"] == "running"  # another host's process: not ours to judge
    assert {row["name"]: row["state"] for row in run_states(tmp_path / "runs" / "envace")} == {
        "alive": "running", "elsewhere": "running", "killed": "stopped"}


def test_the_cli_and_the_train_page_show_a_killed_run_as_stopped(tmp_path: Path) -> None:
    from workbench.train.runs import load_run

    folder = _run(tmp_path, "killed", {"state": "running", "pid": _dead_pid(), "updated": time.time(),
                                       "step": 3, "steps": 10})
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "worldsmith", "envace", "runs", "--json"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)["runs"]
    assert (row["name"], row["state"], row["step"], row["steps"]) == ("killed", "stopped", 3, 10)
    text = subprocess.run([sys.executable, "-m", "worldsmith", "envace", "runs"], capture_output=True, text=True,
                          env=env, timeout=120).stdout
    assert "killed" in text and "stopped" in text and "3/10" in text
    assert load_run(folder).state == "stopped"


def test_checkpoint_evaluations_are_read_newest_first_and_broken_ones_skipped(tmp_path: Path) -> None:
    store = TrainingRunStore(runs_dir(tmp_path) / "r")
    assert store.root == tmp_path / "runs" / "envace" / "r"
    assert not store.is_run() and store.evaluations() == []
    store.write_config({"objective": "grpo"})
    assert store.is_run()
    for name, text in (("bfcl-k1-step-2", '{"methods": {"k1": {}}}'), ("bfcl-k1-step-4", '{"methods": {}}'),
                       ("torn", '{"methods": '), ("a-list", "[1]")):
        (store.evals_dir / name).mkdir(parents=True)
        (store.evals_dir / name / "report.json").write_text(text, encoding="utf-8")
    assert store.evaluations() == [("bfcl-k1-step-4", {"methods": {}}), ("bfcl-k1-step-2", {"methods": {"k1": {}}})]
