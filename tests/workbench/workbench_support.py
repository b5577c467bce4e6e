"""Paths shared by the workbench tests (importable by name; conftest modules are not)."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("WORLDSMITH_SHARED", REPO.parent / "shared"))
FORMATS = SHARED / "data" / "formats"
APP = REPO / "workbench" / "app.py"
TRACES_PAGE = REPO / "pages" / "traces.py"
HOME_PAGE = REPO / "pages" / "home.py"


def shown(markdown: object) -> str:
    """What Markdown built with `workbench.common.text.md_escape` reads as on the page (escapes removed)."""
    return re.sub(r"\\(.)", r"\1", str(markdown))
