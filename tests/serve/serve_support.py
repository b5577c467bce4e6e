"""Helpers for the serving tests: the BFCL worldbook workspace, free ports, and server subprocesses."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from helpers import sample_episodes
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode
from worldsmith.worldbook import WorldbookStore

REPO = Path(__file__).resolve().parents[2]
BFCL_SAMPLES = REPO / "data_samples" / "collected" / "bfcl.jsonl"


def bfcl_workspace(root: Path) -> tuple[Path, list[Episode]]:
    """A workspace whose worldbook "bfcl" is built from all the BFCL samples (so each of their tools is
    one of its actions), and those episodes, longest first."""
    episodes = sample_episodes("bfcl")
    WorldbookStore(root / "worldbooks").save(build_simulator_book(episodes, name="bfcl").book)
    return root, sorted(episodes, key=lambda episode: -len(episode.turns))


def server_env(workspace: Path) -> dict[str, str]:
    return {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@contextlib.contextmanager
def serving(workspace: Path, *args: str, ready_url: str, timeout: float = 120.0) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m worldsmith serve ARGS` as a subprocess, until `ready_url` answers; killed afterwards."""
    process = subprocess.Popen([sys.executable, "-m", "worldsmith", "serve", *args], env=server_env(workspace),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                out, err = process.communicate()
                raise AssertionError(f"server exited with {process.returncode}: {err.decode()[-3000:]}")
            try:
                httpx.get(ready_url, timeout=2.0)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"server did not answer {ready_url} in {timeout}s") from None
                time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
