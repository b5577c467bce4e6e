"""`worldsmith book tools --kind query|empty|precondition` as real subprocesses on a book with look-up rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from lookup_api import cancel_log
from worldsmith.worldbook import Worldbook, WorldbookStore
from worldsmith.worldbook.lookup_rules import learn_lookup_rules

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per call


def run(*args: str, workspace: Path) -> str:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def test_tools_lists_each_lookup_kind(tmp_path: Path) -> None:
    WorldbookStore(tmp_path / "worldbooks").save(Worldbook(name="shop", tool_rules=learn_lookup_rules(
        cancel_log().items)))
    for kind in ("query", "empty", "precondition"):
        listed = orjson.loads(run("book", "tools", "shop", "--kind", kind, "--json", workspace=tmp_path))
        assert listed["tool_rules"] and {rule["kind"] for rule in listed["tool_rules"]} == {kind}
    text = run("book", "tools", "shop", "--kind", "precondition", workspace=tmp_path)
    assert "precondition:cancel_pending_order:1" in text and "'Error: order not found'" in text
    assert "status not in ['pending']" in text
