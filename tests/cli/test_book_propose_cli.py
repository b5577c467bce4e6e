"""`worldsmith book propose` as a real subprocess on the bundled samples: list proposals with their held-out
effect, apply one as a patch (a new, undoable version), and refuse bad input with a clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from proposal_samples import BOOK, RULE, build_heldout_workspace

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_heldout_workspace(tmp_path_factory.mktemp("ws-propose"))


def test_propose_lists_verified_patches_with_their_held_out_effect_and_applies_one(workspace: Path) -> None:
    listed = orjson.loads(run("book", "propose", BOOK, "--rule", RULE, "--json", workspace=workspace).stdout)
    assert listed["heldout_split"] == "test" and listed["proposals"]
    first = listed["proposals"][0]
    assert first["failed_before"] > first["failed_after"] and first["fixes"]
    effect = first["heldout"]
    assert effect["turns"] > 0 and effect["fits_after"] > effect["fits_before"] and effect["broken"] == []
    fidelity = first["heldout_delta"]
    assert fidelity["turns"] > 0 and [t for t in fidelity["flipped"] if t["kind"] == "broken"] == []
    text = run("book", "propose", BOOK, "--rule", RULE, workspace=workspace).stdout
    assert "[1] " + first["kind"] in text and "held-out (test" in text and "simulator fidelity on" in text
    before = orjson.loads(run("book", "show", BOOK, "--json", workspace=workspace).stdout)["version"]
    applied = orjson.loads(run("book", "propose", BOOK, "--rule", RULE, "--apply", "1", "--json",
                               workspace=workspace).stdout)
    assert applied["parent"] == before
    diff = orjson.loads(run("book", "diff", BOOK, before, "--json", workspace=workspace).stdout)
    assert RULE in diff["rules"]["changed"]
    again = orjson.loads(run("book", "propose", BOOK, "--rule", RULE, "--json", workspace=workspace).stdout)
    assert all(p["fixes"] != first["fixes"] for p in again["proposals"]), "the fixed turns are fixed"
    run("book", "undo", BOOK, workspace=workspace)
    assert orjson.loads(run("book", "propose", BOOK, "--rule", RULE, "--json", workspace=workspace).stdout)[
        "proposals"][0]["fixes"] == first["fixes"]


def test_propose_refuses_an_unknown_rule_and_a_proposal_out_of_range(workspace: Path) -> None:
    missing = run("book", "propose", BOOK, "--rule", "no.such", workspace=workspace, code=1)
    assert "no rule 'no.such'" in missing.stderr
    out_of_range = run("book", "propose", BOOK, "--rule", RULE, "--apply", "99", workspace=workspace, code=1)
    assert "--apply 99" in out_of_range.stderr
