"""Two ingests of the same file released together store every episode once."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from worldsmith.workspace import Workspace

SAMPLE = Path(__file__).resolve().parents[2] / "data_samples" / "collected" / "alfworld_expert.jsonl"


def _count(root: Path) -> tuple[int, int]:
    dataset = Workspace(root).dataset("d")
    return len(dataset.episode_ids()), dataset.connect().execute("SELECT count(*) FROM raw_episodes").fetchone()[0]


@pytest.mark.parametrize("repeat", range(3))
def test_threads_released_together_store_each_episode_once(tmp_path: Path, repeat: int) -> None:
    barrier = threading.Barrier(2)
    reports: list[Any] = [None, None]

    def run(index: int) -> None:
        barrier.wait()
        reports[index] = Workspace(tmp_path).ingest([SAMPLE], "d")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = sum(1 for line in SAMPLE.read_bytes().splitlines() if line.strip())
    assert _count(tmp_path) == (total, total)  # 36 distinct ids, 36 rows: no episode twice
    assert sorted(r.episodes for r in reports) in ([0, total], [total, total]) and sum(
        r.duplicates for r in reports) == total  # the second found them all, at its start or at its commit


def _ingest(root: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    report = Workspace(root).ingest([SAMPLE], "d")
    out.put((report.episodes, report.duplicates, report.committed))


def test_processes_released_together_store_each_episode_once(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_ingest, args=(str(tmp_path), barrier, out)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    outcomes = sorted(out.get(timeout=10) for _ in workers)
    total = sum(1 for line in SAMPLE.read_bytes().splitlines() if line.strip())
    assert _count(tmp_path) == (total, total)
    assert outcomes == [(0, total, False), (total, 0, True)]
