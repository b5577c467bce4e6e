"""The official MCP servers the mcp environment and the proxy are tested on, as command lines (`make install`
provides them).

mcp-server-sqlite needs the mcp 1.x server API, so `make install` gives it a virtual environment of its own inside
the project's (`<venv>/mcp-sqlite`); mcp-server-time runs from the project's virtual environment itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SQLITE_SERVER = Path(sys.prefix) / "mcp-sqlite" / "bin" / "mcp-server-sqlite"


def need_sqlite_server() -> Path:
    """The mcp-server-sqlite program (the test is skipped, saying why, where `make install` has not put it)."""
    if not SQLITE_SERVER.is_file():
        pytest.skip(f"mcp-server-sqlite is not installed at {SQLITE_SERVER} (make install puts it there)")
    return SQLITE_SERVER


def sqlite_server(db: Path) -> list[str]:
    """The command that starts mcp-server-sqlite on `db`."""
    return [str(need_sqlite_server()), "--db-path", str(db)]


def time_server() -> list[str]:
    script = Path(sys.executable).parent / "mcp-server-time"
    if not script.is_file():
        pytest.skip("mcp-server-time is not installed (a dev dependency)")
    return [str(script), "--local-timezone", "UTC"]
