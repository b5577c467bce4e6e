"""Role-prefixed text, AgentWorldBench rows, Trace2Env layout and native JSONL."""

from __future__ import annotations

from pathlib import Path

import orjson

from helpers import write_jsonl
from worldsmith.traces import Episode, Reject, detect_format, read_traces
from worldsmith.traces.exporters import episode_to_native


def _read(path: Path) -> tuple[list[Episode], list[Reject]]:
    items = list(read_traces([path]))
    return [i for i in items if isinstance(i, Episode)], [i for i in items if isinstance(i, Reject)]


def test_role_prefixed_ledger_sample(ledger_file: Path) -> None:
    assert detect_format(ledger_file).importer.name == "role_prefixed"
    (episode,), rejects = _read(ledger_file)
    assert rejects == []
    assert [(t.action.name, t.action.arguments) for t in episode.turns] == [
        ("deposit", {"amount": 20}), ("withdraw", {"amount": 200})]
    assert episode.turns[1].observation.text == "Insufficient funds. Balance: 120.0"
    assert episode.turns[1].context[0].content == "Withdraw more than is available."
    assert episode.turns[1].provenance.line == 5


def test_role_prefixed_multiline_initial_observation_and_episodes(tmp_path: Path) -> None:
    path = tmp_path / "game.txt"
    path.write_text(
        "Episode: g1\nTask: find the key\nObservation: You are in a hall.\nThere is a door.\n"
        "Action: open door\nObservation: The door is locked.\n\n"
        "Episode: g2\nAction: look\nObservation: Dark.\nAction: look\n"
    )
    episodes, rejects = _read(path)
    assert [e.id for e in episodes] == ["g1", "g2"]
    assert episodes[0].task == "find the key"
    assert episodes[0].initial_observation.text == "You are in a hall.\nThere is a door."
    assert episodes[0].turns[0].action.name == "open" and episodes[0].turns[0].action.raw == "open door"
    assert [r.reason for r in rejects] == ["action has no observation (episode ends)"]
    assert rejects[0].line == 11


def test_agentworldbench_rebuilds_one_episode_from_the_longest_row(awb_file: Path) -> None:
    assert detect_format(awb_file).importer.name == "agentworldbench"
    (episode,), rejects = _read(awb_file)
    assert rejects == []
    assert episode.id == "terminal-1" and episode.env_id == "terminal" and len(episode.turns) == 3
    assert episode.initial_observation.text == "root@host:/app#"
    assert episode.turns[1].action.arguments == [{"keystrokes": "cd tests\n", "duration": 0.1}]
    assert episode.turns[2].observation.text == "root@host:/app/tests# pwd\n/app/tests\nroot@host:/app/tests#"
    assert episode.metadata["rows_merged"] == 3
    assert "predicted_observation" in episode.metadata["prompt_suffix"]


def test_agentworldbench_rows_in_any_order_and_bad_rows(tmp_path: Path, awb_file: Path) -> None:
    rows = [orjson.loads(line) for line in awb_file.read_bytes().splitlines() if line.strip()]
    other = dict(rows[0], id=2)
    bad = dict(rows[1], response=["only one"] * 5)
    path = write_jsonl(tmp_path / "awb.jsonl", [rows[2], rows[0], other, bad, rows[1]])
    episodes, rejects = _read(path)
    assert sorted((e.id, len(e.turns)) for e in episodes) == [("terminal-1", 3), ("terminal-2", 1)]
    assert len(rejects) == 1 and rejects[0].line == 4 and "'response' has 5" in rejects[0].reason


def test_trace2env_layout(tmp_path: Path) -> None:
    record = {
        "episode_id": "e1", "environment_id": "ledger", "reward": 1.0,
        "events": [
            {"kind": "instruction", "content": "Keep the books."},
            {"kind": "observation", "content": "Balance: 100.0"},
            {"kind": "context", "role": "user", "content": "Add 20"},
            {"kind": "action", "name": "deposit", "arguments": {"amount": 20}},
            {"kind": "observation", "content": "Deposited 20. Balance: 120.0", "reward": 0.5, "done": False},
            {"kind": "action", "content": "withdraw 5"},
            {"kind": "observation", "content": "Withdrew 5."},
        ],
    }
    path = write_jsonl(tmp_path / "t2e.jsonl", [record])
    assert detect_format(path).importer.name == "trace2env"
    (episode,), rejects = _read(path)
    assert rejects == []
    assert episode.task == "Keep the books." and episode.env_id == "ledger"
    assert episode.initial_observation.text == "Balance: 100.0"
    assert episode.turns[0].reward == 0.5 and episode.turns[0].done is False
    assert episode.turns[1].action.name == "withdraw" and episode.turns[1].action.arguments == {"text": "5"}
    assert episode.turns[0].provenance.pointer == "/events/3"


def test_native_jsonl_roundtrip_and_validation_errors(tmp_path: Path, ledger_file: Path) -> None:
    (episode,), _ = _read(ledger_file)
    bad = episode_to_native(episode)
    bad["turns"][0]["index"] = "zero"
    path = write_jsonl(tmp_path / "native.jsonl", [episode_to_native(episode), bad])
    assert detect_format(path).importer.name == "native"
    episodes, rejects = _read(path)
    assert episodes[0].content() == episode.content()
    assert len(rejects) == 1 and rejects[0].line == 2
    assert "turns.0.index" in rejects[0].reason
