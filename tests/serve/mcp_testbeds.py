"""The official MCP servers the proxy is tested in front of, as command lines (`make install` provides them).

mcp-server-sqlite needs the mcp 1.x server API, so it runs from its own folder (`<venv>/testbeds/...`, with its
own mcp) put first on its PYTHONPATH; mcp-server-time runs from the virtual environment itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SQLITE_FOLDER = Path(sys.prefix) / "testbeds" / "mcp-server-sqlite"


def sqlite_server(db: Path) -> list[str]:
    """The command that starts mcp-server-sqlite on `db` (the test is skipped, saying why, where `make install`
    has not put it in place)."""
    if not (SQLITE_FOLDER / "mcp_server_sqlite").is_dir():
        pytest.skip(f"mcp-server-sqlite is not installed in {SQLITE_FOLDER} (make install puts it there)")
    return ["env", f"PYTHONPATH={SQLITE_FOLDER}", sys.executable, "-c",
            "import mcp_server_sqlite; mcp_server_sqlite.main()", "--db-path", str(db)]


def time_server() -> list[str]:
    script = Path(sys.executable).parent / "mcp-server-time"
    if not script.is_file():
        pytest.skip("mcp-server-time is not installed (a dev dependency)")
    return [str(script), "--local-timezone", "UTC"]
