"""Concurrent worldbook writers released together: no lost edit, unique version numbers, a clear conflict."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from worldsmith.worldbook import Patch, PatchConflictError, PatchOp, Rule, Worldbook, WorldbookStore

REPEATS = 5


def _book() -> Worldbook:
    return Worldbook(name="kitchen", rules=[Rule(id=f"r{n}", action="take", template=f"T{n}") for n in range(4)])


def _patch(base: str, rule: str, template: str) -> Patch:
    return Patch(base=base, author=template, ops=[PatchOp(op="update_rule", id=rule, fields={"template": template})])


def _race(store: WorldbookStore, patches: list[Patch]) -> list[Any]:
    """Every patch released at once from its own thread; each one's version info or exception."""
    barrier = threading.Barrier(len(patches))
    results: list[Any] = [None] * len(patches)

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = store.patch("kitchen", patches[index])
        except Exception as error:  # noqa: BLE001 - the outcome under test
            results[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(patches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_edits_of_one_rule_released_together_one_lands_the_other_is_refused(tmp_path: Path, repeat: int) -> None:
    store = WorldbookStore(tmp_path)
    base = store.save(_book()).version
    results = _race(store, [_patch(base, "r0", "ana"), _patch(base, "r0", "ben"), _patch(base, "r0", "ben")])
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) == 1 and all(isinstance(e, PatchConflictError) for e in lost)  # identical edits too: no OSError
    assert store.head("kitchen") == won[0].version
    assert store.load("kitchen").rule("r0").template == won[0].author
    versions = [info.version for info in store.versions("kitchen")]
    assert len({v.split("-")[0] for v in versions}) == len(versions) == 2  # numbers unique


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_edits_of_different_rules_released_together_all_land(tmp_path: Path, repeat: int) -> None:
    store = WorldbookStore(tmp_path)
    base = store.save(_book()).version
    results = _race(store, [_patch(base, f"r{n}", f"edit {n}") for n in range(4)])
    assert not [r for r in results if isinstance(r, Exception)], results
    book = store.load("kitchen")
    assert [book.rule(f"r{n}").template for n in range(4)] == [f"edit {n}" for n in range(4)]
    versions = [info.version for info in store.versions("kitchen")]
    assert len({v.split("-")[0] for v in versions}) == len(versions) == 5
    assert len(store.history("kitchen")) == 5  # one chain: every edit's parent is the HEAD it landed on


def _patch_in_process(root: str, base: str, rule: str, template: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    try:
        out.put(WorldbookStore(root).patch("kitchen", _patch(base, rule, template)).version)
    except PatchConflictError:
        out.put("conflict")


def test_processes_released_together_keep_every_edit_of_different_rules(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    base = store.save(_book()).version
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(3), context.Queue()
    workers = [context.Process(target=_patch_in_process, args=(str(tmp_path), base, rule, f"p{rule}", barrier, out))
               for rule in ("r1", "r2", "r2")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    outcomes = sorted(out.get(timeout=10) for _ in workers)
    assert outcomes.count("conflict") == 1  # the second edit of r2
    book = store.load("kitchen")
    assert book.rule("r1").template == "pr1" and book.rule("r2").template == "pr2"


def test_a_save_on_a_stale_head_is_refused_not_dropped(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    first = store.save(_book()).version
    second = store.patch("kitchen", _patch(first, "r0", "newer")).version
    with pytest.raises(PatchConflictError, match=f"is at {second} now, not at {first}"):
        store.save(_book(), parent=first)  # a build that read HEAD before the patch
    assert store.head("kitchen") == second
