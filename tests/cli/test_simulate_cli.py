"""`worldsmith simulate` and `worldsmith play` as real subprocesses on a worldbook built from ALFWorld samples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from worldsmith.sim import Session
from worldsmith.traces import Episode
from worldsmith.worldbook import WorldbookStore, build_worldbook

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, workspace: Path, code: int = 0, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            input=stdin, timeout=300)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    lines = (REPO / "data_samples" / "collected" / "alfworld.jsonl").read_bytes().splitlines()
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in lines]
    book = build_worldbook(episodes, name="alfworld", env_id="alfworld").book
    WorldbookStore.of_workspace(tmp_path).save(book)
    return tmp_path


def test_simulate_creates_then_continues_a_session(workspace: Path) -> None:
    session = workspace / "s1"
    first = orjson.loads(run("simulate", "alfworld", "--session", str(session), "--action", "take mug 3 from shelf 2",
                             "--initial", "You are in a room.", "--json", workspace=workspace).stdout)
    assert first["turn"] == 0 and first["revision"] == 1
    assert first["observation"] == "You pick up the mug 3 from the shelf 2."
    assert first["audit"]["route"] == "fast_path" and first["audit"]["rules"]  # the default: the harness
    nearest = orjson.loads(run("simulate", "alfworld", "--session", str(workspace / "s0"), "--action",
                               "take mug 3 from shelf 2", "--model", "nearest", "--json", workspace=workspace).stdout)
    assert nearest["observation"] == first["observation"]
    assert nearest["audit"]["route"] == "fallback:nearest_evidence" and nearest["audit"]["retrieved"]
    text = run("simulate", "alfworld", "--session", str(session), "--action", "xyzzy", workspace=workspace).stdout
    assert "[turn 1: fallback:nearest_evidence, failure:unknown_action" in text
    with Session.open(session) as stored:
        assert len(stored) == 2 and stored.meta["book_ref"].startswith("alfworld@v0001")
        assert stored.prefix().initial_observation.text == "You are in a room."
    wrong = run("simulate", "other", "--session", str(session), "--action", "look", "--json", workspace=workspace,
                code=1)
    assert "was made with worldbook 'alfworld'" in orjson.loads(wrong.stdout)["error"]


def test_simulate_says_how_unsure_the_book_is_before_playing(workspace: Path) -> None:
    session = workspace / "s2"
    out = orjson.loads(run("simulate", "alfworld", "--session", str(session), "--action", "take mug 3 from shelf 2",
                           "--initial", "You are in a room.", "--uncertainty", "--candidate", "frobnicate the unicorn",
                           "--candidate", "take mug 3 from shelf 2", "--json", workspace=workspace).stdout)
    unsure = out["uncertainty"]
    assert unsure["source"] == "rule" and unsure["rule_status"] == "supported" and unsure["evidence"] >= 1
    assert out["observation"] == "You pick up the mug 3 from the shelf 2."  # the prediction is played as before
    ranked = [item["action"] for item in out["candidates"]]
    assert ranked == ["frobnicate the unicorn", "take mug 3 from shelf 2"]
    assert out["candidates"][0]["action_seen"] == 0 and out["candidates"][0]["score"] > unsure["score"]
    with Session.open(session) as stored:
        assert len(stored) == 1  # only the action was played
    text = run("simulate", "alfworld", "--session", str(session), "--action", "xyzzy", "--uncertainty",
               workspace=workspace).stdout
    assert "[uncertainty " in text and "never seen" in text
    refused = run("simulate", "alfworld", "--session", str(session), "--action", "look", "--candidate", "x",
                  "--json", workspace=workspace, code=1)
    assert "--uncertainty" in orjson.loads(refused.stdout)["error"]


@pytest.mark.integration
def test_simulate_with_the_tiny_model(workspace: Path) -> None:
    out = orjson.loads(run("simulate", "alfworld", "--session", str(workspace / "s"), "--action", "go to desk 1",
                           "--model", "direct", "--llm", f"tiny:{REPO / 'data_samples' / 'models' / 'tiny'}",
                           "--max-tokens", "12", "--json", workspace=workspace).stdout)
    assert out["audit"]["model_calls"] == 1 and out["audit"]["tokens"] > 0
    assert out["audit"]["route"] in ("model", "fallback:nearest_evidence")


def test_play_loop_with_fork_state_and_history(workspace: Path) -> None:
    session = workspace / "p"
    script = "go to desk 1\ntake mug 3 from shelf 2\n:state\n:fork 1\ngo to bed 1\n:history\n:fork x\n:nope\n:quit\n"
    out = run("play", "alfworld", "--session", str(session), "--json", workspace=workspace, stdin=script).stdout
    events = [orjson.loads(line) for line in out.splitlines()]
    assert [e["event"] for e in events] == ["start", "turn", "turn", "state", "fork", "turn", "history", "error",
                                           "error"]
    assert events[2]["observation"] == "You pick up the mug 3 from the shelf 2."
    fork = Path(events[4]["session"])
    assert fork == workspace / "p-fork1" and events[4]["turns"] == 1
    assert [t["action"] for t in events[6]["turns"]] == ["go to desk 1", "go to bed 1"]
    with Session.open(session) as original, Session.open(fork) as forked:
        assert len(original) == 2 and len(forked) == 2
        rows = original.compare(forked)
        assert rows[0]["same_action"] and not rows[1]["same_action"]
    text = run("play", "alfworld", "--session", str(session), workspace=workspace, stdin="look\n").stdout
    assert "(2 turns so far)" in text and "[turn 2:" in text


def test_simulate_from_a_recorded_episode_opens_as_it_does(workspace: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from worldsmith.cli.main import main
    from worldsmith.workspace import Workspace

    Workspace(workspace).ingest([REPO / "data_samples" / "collected" / "alfworld.jsonl"], "alf")
    episode = next(Workspace(workspace).dataset("alf").iter_episodes())
    directory = workspace / "from-episode"
    assert main(["simulate", "alfworld", "--session", str(directory), "--action", "look", "--from-episode",
                 episode.id, "--dataset", "alf", "--workspace", str(workspace), "--json"]) == 0
    with Session.open(directory) as session:
        assert session.meta["initial_observation"] == episode.initial_observation.text
        assert session.meta["task"] == episode.task and session.meta["env_id"] == episode.env_id
        assert session.meta["metadata"]["from_episode"]["episode"] == episode.id
        assert len(session) == 1
    capsys.readouterr()
    assert main(["simulate", "alfworld", "--session", str(workspace / "x"), "--action", "look", "--from-episode",
                 "nope", "--dataset", "alf", "--workspace", str(workspace)]) == 1
    assert "nope" in capsys.readouterr().err and not (workspace / "x").exists()
