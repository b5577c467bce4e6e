"""Paths shared by the workbench tests (importable by name; conftest modules are not)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("WORLDSMITH_SHARED", REPO.parent / "shared"))
FORMATS = SHARED / "data" / "formats"
APP = REPO / "workbench" / "app.py"
TRACES_PAGE = REPO / "pages" / "traces.py"
HOME_PAGE = REPO / "pages" / "home.py"


WORLDBOOK_TAB = "wb_tab"  # the Worldbook page draws only its open tab


def show_tab(at: AppTest, tab: str, key: str = WORLDBOOK_TAB) -> AppTest:
    """Switch the page to `tab`, as a click on it does (a rerun with that tab open: only the open tab is drawn)."""
    at.session_state[key] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(markdown: object) -> str:
    """What Markdown built with `workbench.common.text.md_escape` reads as on the page (escapes removed)."""
    return re.sub(r"\\(.)", r"\1", str(markdown))


def press_launch(at):
    """Press the Evaluate page's Launch button as a person would: after the page reran on the last change (the
    settings are checked as they change), and only when the settings were not refused (it is disabled then)."""
    at.run()
    button = at.button(key="ev_launch")
    if not button.disabled:
        button.click().run()
    return at
