"""`worldsmith side-by-side` as a real subprocess: a held-out ALFWorld episode, harness beside nearest evidence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ports import free_port
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode, trajectory_family
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "worldsmith", "side-by-side", *args], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Episode]:
    root = tmp_path_factory.mktemp("ws")
    workspace = Workspace(root)
    assert workspace.ingest([REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"], "alfworld").committed
    episodes = list(workspace.dataset("alfworld").iter_episodes())
    families = sorted({trajectory_family(e) for e in episodes})
    held = {f for i, f in enumerate(families) if i % 4 == 0}
    book = build_simulator_book([e for e in episodes if trajectory_family(e) not in held], name="alfworld").book
    WorldbookStore(root / "worldbooks").save(book)
    return root, max((e for e in episodes if trajectory_family(e) in held), key=lambda e: (len(e.turns), e.id))


def test_json_steps_scores_and_typed_actions(workspace: tuple[Path, Episode]) -> None:
    root, episode = workspace
    out = orjson.loads(run("alfworld", "--dataset", "alfworld", "--episode", episode.id, "--methods",
                           "harness,nearest", "--steps", "3", "--action", "inventory", "--json",
                           workspace=root).stdout)
    assert out["methods"] == ["harness", "nearest"] and out["mode"] == "teacher"
    steps = out["steps"]
    assert [s["action_text"] for s in steps] == [t.action.raw for t in episode.turns[:3]] + ["inventory"]
    assert [s["real"] for s in steps[:3]] == [t.observation.text for t in episode.turns[:3]] and steps[3]["real"] is None
    harness = [s["methods"]["harness"] for s in steps]
    assert all(h["score"] is not None for h in harness[:3]) and harness[3]["score"] is None
    assert "state_before" not in harness[0]  # only with --states
    assert out["summary"]["harness"]["steps"] == 3 and 0 <= out["summary"]["harness"]["f1"] <= 1
    with_states = orjson.loads(run("alfworld", "--dataset", "alfworld", "--episode", episode.id, "--methods",
                                   "harness", "--steps", "1", "--mode", "open_loop", "--states", "--json",
                                   workspace=root).stdout)
    assert "state_after" in with_states["steps"][0]["methods"]["harness"]


def test_text_output_and_errors(workspace: tuple[Path, Episode]) -> None:
    root, episode = workspace
    text = run("alfworld", "--dataset", "alfworld", "--episode", episode.id, "--methods", "harness,nearest",
               workspace=root).stdout
    assert f"step 0 > {episode.turns[0].action.raw}" in text and f"  real: {episode.turns[0].observation.text}" in text
    assert "mean over scored steps:" in text and f"harness: {len(episode.turns)} steps" in text
    bad = orjson.loads(run("alfworld", "--dataset", "alfworld", "--episode", episode.id, "--methods", "oracle",
                           "--json", workspace=root, code=1).stdout)
    assert "unknown world model(s) oracle" in bad["error"]
    missing = orjson.loads(run("alfworld", "--dataset", "alfworld", "--episode", "nope", "--json", workspace=root,
                               code=1).stdout)
    assert "nope" in missing["error"]


def test_a_leaked_episode_and_a_failing_model_are_named(workspace: tuple[Path, Episode]) -> None:

    root, held = workspace
    book = WorldbookStore(root / "worldbooks").load("alfworld")
    trained = sorted({item.turn_id.split("#")[0] for item in book.evidence})[0]
    port = free_port()  # nothing listens there
    spec = f"openai:m@http://127.0.0.1:{port}/v1?max_retries=0&timeout=5"
    out = orjson.loads(run("alfworld", "--dataset", "alfworld", "--episode", trained, "--methods", "nearest,direct",
                           "--llm", spec, "--steps", "1", "--json", workspace=root).stdout)
    assert out["leaked"] and out["excluded_evidence"] > 0 and trained in out["leak_notice"]
    direct = out["steps"][0]["methods"]["direct"]
    assert direct["status"] == "fallback" and direct["score"] is None and "model call failed" in direct["fallback_reason"]
    assert out["summary"]["direct"]["fallbacks"] == 1
    text = run("alfworld", "--dataset", "alfworld", "--episode", trained, "--methods", "nearest,direct", "--llm",
               spec, "--steps", "1", workspace=root).stdout
    assert text.startswith("LEAKED: ") and "direct: FALLBACK (" in text and "not scored as direct" in text
    clean = orjson.loads(run("alfworld", "--dataset", "alfworld", "--episode", held.id, "--methods", "nearest",
                             "--steps", "1", "--json", workspace=root).stdout)
    assert not clean["leaked"] and clean["leak_notice"] is None
