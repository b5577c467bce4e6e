"""The Simulate page's side-by-side view with a tool-API worldbook while "Episode from" keeps its default.

The default source is the book's own dataset when it exists, else the first dataset; that dataset's
episodes may partly name no environment, which DuckDB hands pandas as NaN (a float) among strings.
Once that broke the "own environment first" ordering (`'float' object has no attribute 'split'`).
"""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest
from toolshop_support import BOOK, toolshop_book
from workbench_support import APP, REPO

from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore

SIMULATE = REPO / "pages" / "simulate.py"
LEDGER = REPO / "data_samples" / "ledger.role_prefixed.txt"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_tool_book_with_the_default_episode_source_has_no_traceback(empty_root: Path, chat_file: Path) -> None:
    # one dataset, not the book's: a ledger episode of no environment beside OpenAI chats of a derived one
    assert Workspace(empty_root).ingest([LEDGER, chat_file], "mixed").committed
    WorldbookStore(empty_root / "worldbooks").save(toolshop_book(), sources=[{"dataset": "shop"}])
    at = no_exception(AppTest.from_file(str(APP), default_timeout=120).run())
    at = no_exception(at.switch_page(str(SIMULATE)).run())
    no_exception(at.radio(key="sim_view").set_value("Side by side").run())
    assert at.selectbox(key="sbs_book").value == BOOK
    assert at.selectbox(key="sbs_dataset").value == "mixed"  # the default: the book's dataset is not here
    assert at.selectbox(key="sbs_env").value == "(any environment)"
    episodes = at.selectbox(key="sbs_episode").options
    assert len(episodes) == 4 and any(e.startswith("ledger.role_prefixed") for e in episodes)
    no_exception(at.button(key="sbs_step").click().run())
