"""Builds as background jobs: launched detached, their progress read back across folds, listed by `worldsmith jobs`."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from helpers import SAMPLES
from worldsmith.cli.main import main
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore
from worldsmith.worldbook.build_jobs import (
    BuildJobError,
    BuildLaunch,
    build_command,
    build_status,
    launch_build,
    list_builds,
    progress_path,
)
from worldsmith.worldbook.build_jobs import _fraction as fraction


def _wait(root: Path, book: str):
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = build_status(root, book)
        if status is not None and status.state != "running":
            return status
        time.sleep(0.2)
    raise AssertionError(f"the build of {book} still runs after 300 s")


def test_progress_counts_each_fold_and_the_final_build_as_one_phase() -> None:
    assert fraction({"stage": "fold 1/2: extract", "index": 0, "total": 4, "state": "started"}, 2) == 0.0
    assert fraction({"stage": "fold 1/2: extract", "index": 0, "total": 4, "state": "finished"}, 2) == pytest.approx(
        1 / 12)
    assert fraction({"stage": "fold 2/2: compile", "index": 3, "total": 4, "state": "finished"}, 2) == pytest.approx(
        2 / 3)
    assert fraction({"stage": "routes", "index": 1, "total": 4, "state": "started"}, 2) == pytest.approx(
        (2 + 1 / 4) / 3)
    assert fraction({"stage": "done", "index": 4, "total": 4, "state": "done"}, 0) == 1.0


def test_the_command_is_the_cli_one_and_a_bad_name_is_refused(tmp_path: Path) -> None:
    command = build_command(BuildLaunch(out="shop", dataset="d", folds=3, split="train", llm="tiny:m"), tmp_path)
    assert command[1:4] == ["-m", "worldsmith", "build"]
    assert command[command.index("--out") + 1] == "shop" and command[command.index("--folds") + 1] == "3"
    assert command[command.index("--progress") + 1] == str(progress_path(tmp_path, "shop"))
    assert "--json" in command and command[command.index("--llm") + 1] == "tiny:m"
    assert "--workers" not in command  # the CLI's default
    workers = build_command(BuildLaunch(out="shop", dataset="d", workers=1), tmp_path)
    assert workers[workers.index("--workers") + 1] == "1"
    with pytest.raises(BuildJobError, match="worldbook name"):
        launch_build(tmp_path, BuildLaunch(out="bad name!", dataset="d"))


@pytest.mark.slow
def test_a_background_build_reports_its_folds_and_ends_with_its_outcome(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ws"
    Workspace(root).ingest([SAMPLES / "alfworld_expert.jsonl"], "alf")
    launch_build(root, BuildLaunch(out="kitchen", dataset="alf", folds=2, route_folds=0))
    with pytest.raises(BuildJobError, match="already running"):
        launch_build(root, BuildLaunch(out="kitchen", dataset="alf"))
    assert [s.book for s in list_builds(root)] == ["kitchen"]
    status = _wait(root, "kitchen")
    assert status.state == "finished" and status.fraction == 1.0 and status.error is None
    assert status.result is not None and status.result["book"] == "kitchen"
    stages = [e["stage"] for e in status.events if e["state"] == "finished"]
    assert stages[0].startswith("fold 1/2: ") and any(s.startswith("fold 2/2: ") for s in stages)
    assert not stages[-1].startswith("fold")  # then the final build
    store = WorldbookStore(root / "worldbooks")
    assert store.info("kitchen", store.head("kitchen")).author == "workbench"
    assert status.to_json()["state"] == "finished"

    assert main(["jobs", "list", "--workspace", str(root), "--json"]) == 0
    jobs = orjson.loads(capsys.readouterr().out)["jobs"]
    assert [(j["kind"], j["run"], j["state"]) for j in jobs] == [("build", "kitchen", "finished")]

    launch_build(root, BuildLaunch(out="nothing", dataset="no-such-dataset"))
    failed = _wait(root, "nothing")
    assert failed.state == "failed" and "no-such-dataset" in (failed.error or "")
