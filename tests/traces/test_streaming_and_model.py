"""Importers stream (memory stays bounded by one record), and the trace model's invariants."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest

from helpers import airline_conversation
from worldsmith.traces import Episode, Observation, get_importer, split_turn_id, turn_id


def _big_file(path: Path, conversations: int, layout: str) -> Path:
    """JSONL, a JSON array, or a results document (`{"info": ..., "simulations": [...]}`)."""
    opening, closing = {"jsonl": (b"", b""), "array": (b"[\n", b"]\n"),
                        "results": (b'{"info": {"agent": "x"},\n "simulations": [\n', b'],\n "tasks": []}\n')}[layout]
    with open(path, "wb") as handle:
        handle.write(opening)
        for index in range(conversations):
            record = orjson.dumps(airline_conversation(index, 1.0, user_id=f"user_{index}"))
            last = index == conversations - 1
            handle.write(record + (b"\n" if layout == "jsonl" or last else b",\n"))
        handle.write(closing)
    return path


@pytest.mark.parametrize("layout", ["jsonl", "array", "results"])
def test_reading_a_large_file_keeps_memory_bounded(tmp_path: Path, layout: str) -> None:
    path = _big_file(tmp_path / f"big.{layout}.json", 12000, layout)
    assert path.stat().st_size > 15_000_000
    importer = get_importer("openai")
    tracemalloc.start()
    try:
        items = [(type(item).__name__, getattr(item, "reason", None)) for item in importer.read_rows(path)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert items == [("EpisodeRows", None)] * 12000
    assert peak < 8_000_000, f"peak {peak / 1e6:.1f} MB while reading a {path.stat().st_size / 1e6:.0f} MB file"


def test_a_truncated_results_document_keeps_the_complete_conversations(tmp_path: Path) -> None:
    path = _big_file(tmp_path / "results.json", 5, "results")
    text = path.read_text()
    path.write_text(text[: text.index('{"task_id":4')] + '{"task_id": 4, "traj": [')
    items = list(get_importer("openai").read(path))
    assert [type(i).__name__ for i in items] == ["Episode"] * 4 + ["Reject"]
    assert items[-1].pointer == "/simulations/4" and "truncated" in items[-1].reason


def test_turn_ids_and_indexes() -> None:
    episode = Episode.model_validate({"id": "ep:1", "turns": [
        {"index": 0, "action": {"name": "a"}, "observation": {"text": "x"}},
        {"index": 1, "action": {"name": "b"}, "observation": {"text": "[1, 2]"}},
    ]})
    assert [t.id for t in episode.turns] == ["ep:1#0", "ep:1#1"]
    assert episode.turns[1].observation.data == [1, 2] and episode.turns[0].observation.data is None
    assert split_turn_id(turn_id("a#b", 3)) == ("a#b", 3)
    with pytest.raises(ValueError, match="not a turn id"):
        split_turn_id("no-index")
    with pytest.raises(ValueError, match="turn indexes must be"):
        Episode.model_validate({"id": "e", "turns": [{"index": 1, "action": {"name": "a"}, "observation": {"text": ""}}]})


def test_observation_data_is_derived_not_input() -> None:
    observation = Observation.model_validate({"text": '{"a": 1}', "data": "ignored"})
    assert observation.data == {"a": 1}
    assert observation.model_dump() == {"text": '{"a": 1}', "data": {"a": 1}}
    assert Observation(text="{not json").data is None
