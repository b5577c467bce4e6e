"""Fixtures for the serving tests: a workspace holding a worldbook built from the BFCL samples."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from serve_support import bfcl_workspace  # noqa: E402

from worldsmith.traces import Episode  # noqa: E402


@pytest.fixture(scope="module")
def served_workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Episode]]:
    """(workspace root holding worldbook "bfcl" built from the BFCL samples, those episodes longest first)."""
    return bfcl_workspace(tmp_path_factory.mktemp("serve-ws"))
