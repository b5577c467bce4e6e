"""`worldsmith proxy` as a subprocess: what it would run (--describe --json) and its clear refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "worldsmith", "proxy", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == code, result.stderr + result.stdout
    return result


def test_describe_says_the_mode_the_upstream_and_the_endpoint(tmp_path: Path) -> None:
    described = orjson.loads(run("--mode", "hybrid", "--book", "shop", "--dataset", "shop", "--transport", "http",
                                 "--port", "9124", "--describe", "--json", "--", "mcp-server-sqlite", "--db-path",
                                 "my shop.db", workspace=tmp_path).stdout)
    assert described["mode"] == "hybrid" and described["transport"] == "http"
    assert described["upstream"] == "mcp-server-sqlite --db-path 'my shop.db'"
    assert described["endpoint"] == "http://127.0.0.1:9124/mcp"


def test_a_mode_without_what_it_needs_is_refused_naming_it(tmp_path: Path) -> None:
    missing = run("--mode", "record", "--", "server", workspace=tmp_path, code=3)
    assert "record records into a dataset: give --dataset" in missing.stderr
    both = run("--mode", "replay", "--book", "b", "--upstream-url", "http://127.0.0.1:1/mcp", workspace=tmp_path,
               code=3)
    assert "replay has no upstream" in both.stderr
    absent = run("--mode", "replay", "--book", "nowhere", workspace=tmp_path, code=4)
    assert "nowhere" in absent.stderr
