"""`worldsmith book patch ... --against SPLIT` as a real subprocess: the held-out delta of the edit, text and JSON;
a leaking or unknown held-out set is refused before any version is stored; so is an edit that makes a supported
rule fail its own evidence, unless --force; `book diff --words` compares templates word by word."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from helpers import sample_episodes
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test

NAME = "alfworld_expert"


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("book-heldout")
    ws = Workspace(root)
    ws.add_episodes(NAME, sample_episodes(NAME))
    ws.split(NAME, {"train": 0.75, "test": 0.25})
    book = build_simulator_book(ws.dataset(NAME).iter_episodes("train"), name="alf").book
    WorldbookStore(root / "worldbooks").save(book, author="test", sources=[{"dataset": NAME}])
    rule = max((r for r in book.rules if r.action == "go"), key=lambda r: r.support)
    return root, rule.id


def write_patch(root: Path, rule_id: str, template: str) -> Path:
    path = root / f"patch-{abs(hash(template))}.json"
    path.write_bytes(orjson.dumps({"ops": [{"op": "update_rule", "id": rule_id, "fields": {"template": template}}],
                                   "message": "break the go rule"}))
    return path


def versions(root: Path) -> int:
    return len(orjson.loads(run("book", "history", "alf", "--json", workspace=root).stdout)["versions"])


def test_patch_against_a_split_prints_the_delta_and_the_broken_turns(workspace) -> None:
    root, rule_id = workspace
    out = orjson.loads(run("book", "patch", "alf", "--file", str(write_patch(root, rule_id, "You go nowhere.")),
                           "--against", "test", "--force", "--json", workspace=root).stdout)
    delta = out["heldout_delta"]
    assert delta["heldout"]["dataset"] == NAME and delta["heldout"]["split"] == "test"
    assert delta["metrics"]["exact_match"]["diff"] < 0 and delta["broken"] > 0 and delta["fixed"] == 0
    assert delta["by_action"]["go"]["exact_match"]["diff"] < 0
    assert {t["kind"] for t in delta["flipped"]} == {"broken"}
    assert all(t["after"] == "You go nowhere." for t in delta["flipped"])
    undone = run("book", "undo", "alf", workspace=root)
    assert "new version" in undone.stdout
    text = run("book", "patch", "alf", "--file", str(write_patch(root, rule_id, "You go nowhere.")),
               "--against", "test", "--against-dataset", NAME, "--force", workspace=root).stdout
    assert f"held-out {NAME}:test" in text and f"0 fixed, {delta['broken']} broken" in text
    assert "broken " in text and "go:" in text
    assert text.index("open loop (drift") < text.index("teacher forced (next-obs")
    assert delta["open_loop"]["exact_match"]["n"] == delta["metrics"]["exact_match"]["n"]


def test_a_leaking_or_unknown_held_out_set_is_refused_before_saving(workspace) -> None:
    root, rule_id = workspace
    before = versions(root)
    train = sorted(e.id for e in Workspace(root).dataset(NAME).iter_episodes("train"))[:2]
    patch = str(write_patch(root, rule_id, "Somewhere else."))
    leak = run("book", "patch", "alf", "--file", patch, "--against-episodes", ",".join(train), workspace=root, code=1)
    assert "leak" in leak.stderr
    unknown = run("book", "patch", "alf", "--file", patch, "--against", "dev", workspace=root, code=1)
    assert "no split 'dev'" in unknown.stderr
    assert versions(root) == before


def test_breaking_a_supported_rule_needs_force_and_diff_words_shows_it(workspace) -> None:
    root, rule_id = workspace
    store = WorldbookStore(root / "worldbooks")
    template = store.load("alf", store.history("alf")[-1].version).rule(rule_id).template  # as built
    run("book", "patch", "alf", "--file", str(write_patch(root, rule_id, template)), workspace=root)  # restoring: safe
    before = versions(root)
    first = orjson.loads(run("book", "show", "alf", "--json", workspace=root).stdout)["version"]
    patch = str(write_patch(root, rule_id, template.replace("You arrive", "You stroll", 1)))
    refused = run("book", "patch", "alf", "--file", patch, workspace=root, code=1)
    assert "fail its own evidence" in refused.stderr and "→ 0/" in refused.stderr and "--force" in refused.stderr
    assert versions(root) == before
    saved = orjson.loads(run("book", "patch", "alf", "--file", patch, "--force", "--json", workspace=root).stdout)
    history = orjson.loads(run("book", "history", "alf", "--json", workspace=root).stdout)["versions"]
    assert history[0]["version"] == saved["version"] and "saved despite" in history[0]["message"]
    words = run("book", "diff", "alf", first, "--words", workspace=root).stdout
    assert f"template {rule_id} (changed): You [-arrive-] {{+stroll+}} at" in words
    listed = orjson.loads(run("book", "diff", "alf", first, "--words", "--json", workspace=root).stdout)["templates"]
    assert [c["rule"] for c in listed] == [rule_id]
    demoted = orjson.loads(run("book", "patch", "alf", "--rule", rule_id, "--status", "tentative", "--reason",
                               "fails on stroll", "--json", workspace=root).stdout)
    history = orjson.loads(run("book", "history", "alf", "--json", workspace=root).stdout)["versions"]
    assert history[0]["version"] == demoted["version"]
    assert history[0]["message"] == f"{rule_id}: tentative: fails on stroll"
