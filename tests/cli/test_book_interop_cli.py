"""`worldsmith book export|import|search` as real subprocesses on a stored worldbook (real MiniLM for search)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from worldsmith.worldbook import Evidence, Note, Rule, RuleProvenance, RuleStatus, Worldbook, WorldbookStore
from worldsmith.worldbook.interop import import_trace2env

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    rules = [Rule(id="open-ok", action="open", template="You open the {arg.target}.", status=RuleStatus.SUPPORTED,
                  support=5, provenance=RuleProvenance(supporting=["ep1#0", "ep2#4"])),
             Rule(id="open-locked", action="open", outcome="failure:locked", template="The {arg.target} is locked."),
             Rule(id="take-ok", action="take", template="You pick up the {arg.object}.", status=RuleStatus.SUPPORTED)]
    evidence = [Evidence(turn_id="ep1#0", action="open", arguments={"target": "door"}, action_text="open door",
                         observation="You open the door.")]
    notes = [Note(id="n1", kind="fact", text="Some doors need a key.")]
    book = Worldbook(name="doors", env_id="textworld", rules=rules, evidence=evidence, notes=notes)
    WorldbookStore(tmp_path / "worldbooks").save(book, message="first")
    return tmp_path


def test_export_then_import_as_new_version_and_new_book(workspace: Path, tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    exported = orjson.loads(run("book", "export", "doors", str(out), "--json", workspace=workspace).stdout)
    assert exported["path"] == str(out) and exported["rules"] == 3
    store = WorldbookStore(workspace / "worldbooks")
    first = store.head("doors")
    assert import_trace2env(out).canonical() == store.load("doors").canonical()
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["worldsmith"]["version"] == first

    refused = run("book", "export", "doors", str(out), "--json", workspace=workspace, code=3)
    assert "not empty" in orjson.loads(refused.stdout)["error"]
    run("book", "export", "doors", str(out), "--overwrite", workspace=workspace)

    # A person edits the package in another tool: a rule gets supported, with an unknown field.
    lines = (out / "candidates/rules.jsonl").read_bytes().splitlines()
    locked = {**orjson.loads(lines[0]), "status": "supported", "trace2env_score": 0.7}
    (out / "candidates/rules.jsonl").write_bytes(b"")
    (out / "rules/index.jsonl").write_bytes((out / "rules/index.jsonl").read_bytes() + orjson.dumps(locked) + b"\n")
    imported = orjson.loads(run("book", "import", str(out), "--json", workspace=workspace).stdout)
    assert imported["book"] == "doors" and imported["parent"] == first and imported["rules"] == 3
    assert [field.rsplit(": ", 1)[1] for field in imported["ignored"]] == ["trace2env_score"]
    assert store.load("doors").rule("open-locked").status == RuleStatus.SUPPORTED
    info = store.info("doors", store.head("doors"))
    assert info.message == f"imported from {out}" and info.sources[0]["kind"] == "trace2env"
    diff = orjson.loads(run("book", "diff", "doors", first, "--json", workspace=workspace).stdout)
    assert diff["rules"]["changed"]["open-locked"]["status"] == {"before": "tentative", "after": "supported"}

    copy = orjson.loads(run("book", "import", str(out), "--name", "doors-copy", "--json", workspace=workspace).stdout)
    assert copy["book"] == "doors-copy" and copy["parent"] is None
    assert store.load("doors-copy").name == "doors-copy"


def test_import_errors(workspace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    (bad / "rules").mkdir(parents=True)
    (bad / "rules/index.jsonl").write_text('{"id": "x", "action": "open"}\n{"id": "y"}\n')
    error = run("book", "import", str(bad), workspace=workspace, code=3).stderr
    assert "rules/index.jsonl:2: field 'action': Field required" in error
    assert "not a folder" in run("book", "import", str(tmp_path / "none"), workspace=workspace, code=3).stderr
    (bad / "rules/index.jsonl").write_text('{"id": "x", "action": "open"}\n')
    assert "worldbook name 'no spaces'" in run("book", "import", str(bad), "--name", "no spaces",
                                                workspace=workspace, code=3).stderr


def test_search_lexical_dense_and_hybrid(workspace: Path) -> None:
    lexical = orjson.loads(run("book", "search", "doors", "locked", "--mode", "lexical", "--json",
                               workspace=workspace).stdout)
    assert lexical["hits"][0]["id"] == "open-locked" and lexical["hits"][0]["kind"] == "rule"
    folder = workspace / "worldbooks" / "doors" / "index" / lexical["version"]
    assert (folder / "index.sqlite").is_file() and not (folder / "dense.faiss").exists()

    dense = orjson.loads(run("book", "search", "doors", "grab an item", "--mode", "dense", "--kind", "rule",
                             "--k", "1", "--json", workspace=workspace).stdout)
    assert [hit["id"] for hit in dense["hits"]] == ["take-ok"] and (folder / "dense.faiss").is_file()

    hybrid = orjson.loads(run("book", "search", "doors", 'key "OR -* door', "--action", "open", "--json",
                              workspace=workspace).stdout)
    assert {hit["kind"] for hit in hybrid["hits"]} <= {"rule", "evidence"} and hybrid["hits"]
    text = run("book", "search", "doors", "door key", "--k", "2", workspace=workspace).stdout
    assert len(text.strip().splitlines()) == 2
    assert "no worldbook 'nope'" in run("book", "search", "nope", "x", workspace=workspace, code=4).stderr
