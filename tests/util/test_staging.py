"""Staging folders of killed writers: never listed, swept once their writer is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from worldsmith.util.staging import MIN_AGE_S, make_staging, sweep_stale
from worldsmith.workspace import Workspace
from worldsmith.worldbook import Worldbook, WorldbookStore

_SLOW_SAVE = """
import os, sys, time
from worldsmith.worldbook import Worldbook, WorldbookStore
os.fsync = lambda fd: time.sleep(120)  # stall once the files are written, before the rename
store = WorldbookStore(sys.argv[1])
store.save(Worldbook(name="kitchen"), parent=store.head("kitchen"), message="never finished")
"""


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_save_killed_mid_write_is_never_listed_and_is_swept_once_stale(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    first = store.save(Worldbook(name="kitchen"), message="first")
    versions = tmp_path / "kitchen" / "versions"
    child = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, str(tmp_path)])
    try:
        deadline = time.time() + 60
        while not [p for p in versions.glob(".staging-*") if (p / "manifest.json").is_file()]:
            assert time.time() < deadline and child.poll() is None, "the writer never got to its staging folder"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    [left] = versions.glob(".staging-*")
    assert [info.version for info in store.versions("kitchen")] == [first.version]  # the half-write is not listed
    assert store.head("kitchen") == first.version and store.load("kitchen").name == "kitchen"
    assert left.exists()  # too fresh to judge yet: its pid could be recycled within the minute
    _age(left, MIN_AGE_S + 5)
    assert [info.version for info in store.versions("kitchen")] == [first.version]
    assert not left.exists()  # its writer is gone: swept


def test_a_killed_ingests_staging_is_swept_when_the_workspace_opens(tmp_path: Path) -> None:
    staging = tmp_path / ".staging"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed = staging / f".staging-{dead.pid}-abc"
    killed.mkdir(parents=True)
    (killed / "episodes.parquet").write_bytes(b"half")
    _age(killed, MIN_AGE_S + 5)
    mine = make_staging(staging)  # a live writer's (this process)
    Workspace(tmp_path)
    assert not killed.exists() and mine.exists()
    assert sweep_stale(staging, now=time.time() + MIN_AGE_S + 5) == []  # its writer lives: kept
    assert sweep_stale(staging, now=time.time() + 2 * 24 * 3600) == [mine]  # past the maximum age, gone anyway
