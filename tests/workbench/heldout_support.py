"""A workspace for the curation-loop tests: the bundled ALFWorld expert episodes split train/test, and a book
built on the train split only (so the test split is a clean held-out set)."""

from __future__ import annotations

from pathlib import Path

from helpers import sample_episodes
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore

DATASET = "alfworld_expert"
BOOK = "alf"


def loop_workspace(root: Path) -> str:
    """Fill `root`; returns the id of the best-supported `go` rule (one that gets held-out turns right)."""
    ws = Workspace(root)
    ws.add_episodes(DATASET, sample_episodes(DATASET))
    ws.split(DATASET, {"train": 0.75, "test": 0.25})
    book = build_simulator_book(ws.dataset(DATASET).iter_episodes("train"), name=BOOK).book
    WorldbookStore(root / "worldbooks").save(book, author="test", sources=[{"dataset": DATASET}])
    return max((r for r in book.rules if r.action == "go"), key=lambda r: r.support).id
