"""A real tool-API worldbook for the workbench tests: built from the recorded toolshop expert runs.

`data_samples/toolshop/expert.jsonl` holds 30 episodes of a customer-service agent on the toolshop API
(`worldsmith.envs.toolshop`): reads, and writes such as `cancel_order` and `modify_order_address`, from which a
build learns write tool rules. Importable by name (conftest modules are not).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
import pytest
from workbench_support import REPO

TOOLSHOP = REPO / "data_samples" / "toolshop" / "expert.jsonl"
DATASET = "shop"
BOOK = "shop"


def toolshop_episodes() -> list[Any]:
    from worldsmith.traces import Episode

    if not TOOLSHOP.exists():
        pytest.fail(f"sample missing: {TOOLSHOP} (data_samples/make_toolshop.py)")
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in TOOLSHOP.read_bytes().splitlines() if line.strip()]


@functools.cache
def toolshop_book() -> Any:
    """The worldbook `shop` built from every toolshop expert episode (built once per test process)."""
    from worldsmith.worldbook import build_worldbook

    return build_worldbook(toolshop_episodes(), name=BOOK).book


def toolshop_workspace(root: Path) -> Any:
    """`root` with dataset `shop` (the toolshop expert runs) and worldbook `shop` built from it; the book."""
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook import WorldbookStore

    assert Workspace(root).ingest([TOOLSHOP], DATASET).committed
    book = toolshop_book()
    WorldbookStore(root / "worldbooks").save(book, sources=[{"dataset": DATASET}])
    return book


def write_episode(tool: str) -> Any:
    """The first recorded episode that calls the write `tool`, and the index of that call."""
    for episode in toolshop_episodes():
        for turn in episode.turns:
            if turn.action.name == tool:
                return episode, turn.index
    raise AssertionError(f"no toolshop episode calls {tool}")
