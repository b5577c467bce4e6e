"""`worldsmith book ...` as real subprocesses on a stored worldbook: list, rules with provenance, patch, diff, undo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from worldsmith.worldbook import Rule, RuleProvenance, RuleStatus, Worldbook, WorldbookStore

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    rules = [Rule(id="open-ok", action="open", template="You open the {arg.target}.", status=RuleStatus.SUPPORTED,
                  support=5, provenance=RuleProvenance(supporting=["ep1#0", "ep2#4"], contradicting=["ep3#1"])),
             Rule(id="open-locked", action="open", outcome="failure:locked", template="It is locked.")]
    WorldbookStore(tmp_path / "worldbooks").save(Worldbook(name="doors", env_id="textworld", rules=rules))
    return tmp_path


def test_rules_json_lists_status_and_provenance(workspace: Path) -> None:
    listed = orjson.loads(run("book", "list", "--json", workspace=workspace).stdout)["worldbooks"]
    assert [row["name"] for row in listed] == ["doors"]
    rules = orjson.loads(run("book", "rules", "doors", "--json", workspace=workspace).stdout)["rules"]
    by_id = {rule["id"]: rule for rule in rules}
    assert by_id["open-ok"]["status"] == "supported"
    assert by_id["open-ok"]["provenance"] == {"supporting": ["ep1#0", "ep2#4"], "contradicting": ["ep3#1"]}
    shown = orjson.loads(run("book", "show", "doors", "--json", workspace=workspace).stdout)
    assert shown["rules"]["supported"] == 1 and shown["rules"]["tentative"] == 1


def test_demote_diff_and_undo(workspace: Path) -> None:
    first = orjson.loads(run("book", "show", "doors", "--json", workspace=workspace).stdout)["version"]
    patched = orjson.loads(run("book", "patch", "doors", "--rule", "open-ok", "--status", "conflicted", "--json",
                               workspace=workspace).stdout)
    assert patched["parent"] == first
    diff = orjson.loads(run("book", "diff", "doors", first, "--json", workspace=workspace).stdout)
    assert diff["rules"]["changed"]["open-ok"]["status"] == {"before": "supported", "after": "conflicted"}
    text = run("book", "diff", "doors", first, workspace=workspace).stdout
    assert "~ rule open-ok.status: 'supported' -> 'conflicted'" in text
    stale = run("book", "patch", "doors", "--rule", "open-ok", "--status", "deprecated", "--base", first,
                workspace=workspace, code=5)  # a ConflictError
    assert "changed there too" in stale.stderr
    run("book", "undo", "doors", workspace=workspace)
    rules = orjson.loads(run("book", "rules", "doors", "--status", "supported", "--json", workspace=workspace).stdout)
    assert [rule["id"] for rule in rules["rules"]] == ["open-ok"]
    history = orjson.loads(run("book", "history", "doors", "--json", workspace=workspace).stdout)["versions"]
    assert len(history) == 3 and history[-1]["version"] == first


def test_patch_file_and_errors(workspace: Path, tmp_path: Path) -> None:
    patch = tmp_path / "patch.json"
    patch.write_bytes(orjson.dumps({"ops": [{"op": "add_note", "id": "n1", "value": {"text": "Doors may be locked."}}],
                                    "message": "a note"}))
    run("book", "patch", "doors", "--file", str(patch), workspace=workspace)
    bad = tmp_path / "bad.json"
    bad.write_text('{"ops": [{"op": "update_rule", "id": "nope", "fields": {}}]}')
    assert "no rule 'nope'" in run("book", "patch", "doors", "--file", str(bad), workspace=workspace, code=3).stderr
    assert "no worldbook 'missing'" in run("book", "show", "missing", workspace=workspace, code=4).stderr
    assert "no rule 'x'" in run("book", "rule", "doors", "x", workspace=workspace, code=1).stderr


def test_routes_lists_the_held_out_route_table_of_a_built_book(tmp_path: Path) -> None:
    from helpers import sample_episodes
    from worldsmith.sim.route_learning import build_simulator_book

    book = build_simulator_book(sample_episodes("alfworld_expert"), name="alf").book
    WorldbookStore(tmp_path / "worldbooks").save(book)
    shown = orjson.loads(run("book", "routes", "alf", "--json", workspace=tmp_path).stdout)
    assert shown["folds"] == 5 and shown["turns"] == sum(len(e.turns) for e in sample_episodes("alfworld_expert"))
    rows = {(row["action"], row["source"]): row for row in shown["routes"]}
    take = rows[("take", "rule")]
    assert take["proposed"] > 0 and take["trusted"] == (take["wins"] >= take["losses"])
    assert ("*", "rule") in rows
    assert "held-out turns, 5 cross-fitted folds" in run("book", "routes", "alf", workspace=tmp_path).stdout
    WorldbookStore(tmp_path / "worldbooks").save(Worldbook(name="bare"))
    assert "no route table" in run("book", "routes", "bare", workspace=tmp_path).stdout
