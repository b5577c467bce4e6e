"""Background jobs as real detached processes: started, found again from their record, reaped, stopped."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from worldsmith.util import jobs
from worldsmith.util.jobs import Job, JobFolder, alive, child_returncode, plain_run_name, start_detached, stop, tail
from worldsmith.util.processes import process_alive, process_start_time

SLEEPER = [sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(60)"]


def _wait_until(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_started_job_is_recorded_found_again_and_stopped(tmp_path: Path) -> None:
    folder = JobFolder(tmp_path / ".jobs", kind="eval")
    job = folder.start("r1", SLEEPER, workspace=tmp_path, cwd=tmp_path)
    try:
        assert job.alive and job.state == "running"
        record = json.loads(folder.record_path("r1").read_text())
        assert record == job.to_json() and record["kind"] == "eval" and record["returncode"] is None
        _wait_until(lambda: "up" in Path(job.stdout).read_text(), "the sleeper's output")
        jobs._CHILDREN.pop(job.pid)  # as after a server restart: found again from the record and the pid alone
        again = folder.load("r1")
        assert again == job and again.alive
        assert folder.runs() == ["r1"] and folder.jobs() == [job]
    finally:
        assert stop(job, grace_s=5.0)
    _wait_until(lambda: not job.alive, "the stopped job to go")
    assert job.state == "ended"  # not our child any more: its exit code is unknown here
    assert not stop(job)  # nothing left to stop


def test_an_exit_code_is_kept_in_the_record(tmp_path: Path) -> None:
    folder = JobFolder(tmp_path, kind="train", suffix=".job.json")
    job = folder.start("bad", [sys.executable, "-c", "import sys; sys.stderr.write('boom'); raise SystemExit(3)"],
                       workspace=tmp_path, kind="sweep")
    _wait_until(lambda: child_returncode(job.pid) is not None, "the job to end")
    ended = folder.load("bad")
    assert ended is not None and ended.returncode == 3 and ended.state == "failed" and ended.kind == "sweep"
    assert ended.log_tail() == "boom" and tail(ended.stderr, 2) == "om"
    jobs._CHILDREN.pop(job.pid)
    assert json.loads(folder.record_path("bad").read_text())["returncode"] == 3  # saved: survives a restart
    assert folder.load("bad") == ended


def test_a_finished_job_is_reaped_without_anyone_polling_it(tmp_path: Path) -> None:
    pid, _ = start_detached([sys.executable, "-c", "raise SystemExit(0)"], workspace=tmp_path,
                            stdout=tmp_path / "out", stderr=tmp_path / "err")
    _wait_until(lambda: process_start_time(pid) is None, f"pid {pid} to be reaped (not left a zombie)")
    assert child_returncode(pid) == 0


def test_a_recycled_pid_is_not_the_job(tmp_path: Path) -> None:
    import os

    me = process_start_time(os.getpid())
    assert me is not None and alive(os.getpid(), me)
    assert not alive(os.getpid(), me + 5.0)  # the pid now belongs to a process started at another time
    assert not alive(os.getpid(), me - 5.0)
    assert process_alive(os.getpid(), me) and not process_alive(os.getpid(), me - 5.0)
    assert process_start_time(None) is None and not process_alive(None)


def test_records_that_are_not_jobs_are_skipped(tmp_path: Path) -> None:
    folder = JobFolder(tmp_path, kind="eval")
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "r.out.json").write_text('{"run": "r", "records": 3}')  # a job's stdout, not a record
    (tmp_path / "other.json").write_text('{"run": "other", "pid": "x", "started": 0, "command": []}')
    old = {"run": "old", "pid": 2**22 + 7, "started": 1.0, "command": ["python"], "stdout": "o", "stderr": "e"}
    (tmp_path / "old.json").write_text(json.dumps(old))  # an older record: no kind, no returncode
    assert folder.runs() == ["broken", "old", "other"]
    assert folder.load("broken") is None and folder.load("other") is None and folder.load("missing") is None
    [job] = folder.jobs()
    assert job == Job(run="old", kind="eval", pid=2**22 + 7, started=1.0, command=["python"], stdout="o",
                      stderr="e") and job.state == "ended"
    assert replace(job, returncode=0).state == "finished"
    with pytest.raises(ValueError, match="not a job record"):
        Job.from_json({"run": "x"}, kind="eval")
    with pytest.raises(ValueError, match="JSON object"):
        Job.from_json([], kind="eval")


def test_plain_run_name_trims_and_raises_the_callers_error() -> None:
    assert plain_run_name("  run-1 ") == "run-1"
    with pytest.raises(KeyError, match="run name"):
        plain_run_name("../x", KeyError)


class _ReapedElsewhere:
    """A child whose reaper thread has waited on it but not yet stored the code: `poll` still says None."""

    def __init__(self, code: int) -> None:
        self.code, self.waited = code, False

    def poll(self) -> None:
        return None

    def wait(self, timeout: float | None = None) -> int:
        self.waited = True
        return self.code


def test_an_exit_code_is_not_lost_while_the_reaper_stores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = 2**22 + 12345  # above the default pid_max: no such process
    assert process_start_time(gone) is None
    child = _ReapedElsewhere(3)
    monkeypatch.setitem(jobs._CHILDREN, gone, child)
    assert child_returncode(gone) == 3 and child.waited
    assert not alive(gone, time.time())
