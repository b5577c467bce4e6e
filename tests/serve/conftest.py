"""Fixtures for the serving tests: a workspace holding a worldbook built from the BFCL samples."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_support import bfcl_workspace

from worldsmith.traces import Episode


@pytest.fixture(scope="module")
def served_workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Episode]]:
    """(workspace root holding worldbook "bfcl" built from the BFCL samples, those episodes longest first)."""
    return bfcl_workspace(tmp_path_factory.mktemp("serve-ws"))
