"""`worldsmith book tools` and `book patch --tool-rule` as real subprocesses on a book with learned write rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import tool_api
from worldsmith.worldbook import Worldbook, WorldbookStore
from worldsmith.worldbook.writes import learn_tool_rules

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per call


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == code, result.stderr + result.stdout
    return result


def test_tools_lists_write_rules_and_a_status_patch_makes_a_new_version(tmp_path: Path) -> None:
    rules = learn_tool_rules(tool_api.evidence(20))
    WorldbookStore(tmp_path / "worldbooks").save(Worldbook(name="shop", tool_rules=rules))
    listed = orjson.loads(run("book", "tools", "shop", "--kind", "write", "--json", workspace=tmp_path).stdout)
    by_tool = {rule["tool"]: rule for rule in listed["tool_rules"]}
    cancel = by_tool["cancel_order"]
    assert cancel["status"] == "supported" and cancel["selector"]["argument"] == "order_id"
    assert cancel["provenance"]["supporting"] and cancel["support"] >= 2
    assert {c["path"]: c["op"] for c in cancel["changes"]}["status"] == "set"
    text = run("book", "tools", "shop", workspace=tmp_path).stdout
    assert "write:cancel_order" in text and "payment_history" in text
    patched = orjson.loads(run("book", "patch", "shop", "--tool-rule", "write:cancel_order", "--status", "deprecated",
                               "--json", workspace=tmp_path).stdout)
    assert patched["parent"]
    after = orjson.loads(run("book", "tools", "shop", "--status", "deprecated", "--json", workspace=tmp_path).stdout)
    assert [rule["id"] for rule in after["tool_rules"]] == ["write:cancel_order"]
    diff = orjson.loads(run("book", "diff", "shop", patched["parent"], "--json", workspace=tmp_path).stdout)
    assert diff["tool_rules"]["changed"]["write:cancel_order"]["status"]["after"] == "deprecated"
    missing = run("book", "patch", "shop", "--tool-rule", "write:nope", "--status", "deprecated", workspace=tmp_path,
                  code=3)
    assert "no tool_rule 'write:nope'" in missing.stderr
