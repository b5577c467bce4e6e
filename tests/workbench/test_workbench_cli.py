"""`worldsmith workbench` is the server process: stopping the command stops Streamlit (no orphan on the port)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from browser_support import _wait_healthy

from ports import free_port

pytestmark = pytest.mark.integration


def test_sigterm_to_the_command_stops_the_server(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "workbench.log"
    env = {**os.environ, "WORLDSMITH_SAMPLES": "", "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "worldsmith", "workbench", "--port", str(port), "--workspace", str(tmp_path / "ws")],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        process.send_signal(signal.SIGTERM)  # the command's own pid, as a supervisor would
        process.wait(timeout=30)
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the group
        except ProcessLookupError:
            pass
        process.wait(timeout=15)
