"""Export then import gives back equal episodes, for every exporter and every sample format."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import airline_conversation, tool_call, write_json, write_jsonl
from worldsmith.traces import Episode, export_episodes, read_traces


def _episodes(path: Path) -> list[Episode]:
    items = list(read_traces([path]))
    assert all(isinstance(i, Episode) for i in items), [i for i in items if not isinstance(i, Episode)]
    return items


@pytest.fixture
def source_files(tmp_path: Path, ledger_file: Path, awb_file: Path) -> list[Path]:
    t2e = write_jsonl(tmp_path / "t2e.jsonl", [{
        "episode_id": "t2e-1", "environment_id": "textgame", "task_id": "7", "success": True, "family": "fam-a",
        "metadata": {"seed": 3},
        "events": [
            {"kind": "instruction", "content": "Win."},
            {"kind": "observation", "content": "Start room.", "info": {"admissible_commands": ["go north", "look"]}},
            {"kind": "action", "content": "go north"},
            {"kind": "observation", "content": "North room.", "reward": 1.0, "done": True, "info": {"score": 1}},
            {"kind": "context", "role": "assistant", "content": "I won."},
        ],
    }])
    parallel = write_jsonl(tmp_path / "parallel.jsonl", [{
        "id": "p1", "messages": [
            {"role": "user", "content": "two things"},
            {"role": "assistant", "content": "on it", "reasoning_content": "think",
             "tool_calls": [tool_call("x1", "f", {"a": [1, 2]}), tool_call("x2", "g", "{bad")]},
            {"role": "tool", "tool_call_id": "x2", "content": "g failed"},
            {"role": "tool", "tool_call_id": "x1", "content": "{\"ok\": 1}", "is_error": False},
        ],
    }])
    airline = write_json(tmp_path / "airline.json", [airline_conversation(0, 0.0), airline_conversation(5, 1.0)])
    return [ledger_file, awb_file, t2e, parallel, airline]


@pytest.mark.parametrize("format", ["jsonl", "openai", "trace2env"])
def test_export_then_import_gives_equal_episodes(tmp_path: Path, source_files: list[Path], format: str) -> None:
    for source in source_files:
        originals = _episodes(source)
        out = tmp_path / f"{source.stem}.{format}.jsonl"
        assert export_episodes(originals, format, out) == len(originals)
        again = _episodes(out)
        assert [e.content() for e in again] == [e.content() for e in originals], source.name
        assert [e.content_hash() for e in again] == [e.content_hash() for e in originals]


def test_content_hash_ignores_provenance_and_id(tmp_path: Path, ledger_file: Path) -> None:
    (episode,) = _episodes(ledger_file)
    copy = episode.model_copy(deep=True)
    copy.id = "other"
    copy.turns[0].provenance = None
    assert copy.content_hash() == episode.content_hash()
    copy.turns[0].observation.text = "changed"
    assert copy.content_hash() != episode.content_hash()
