"""Importers stream (memory stays bounded by one record), and the trace model's invariants."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest

from helpers import airline_conversation
from worldsmith.traces import Episode, Observation, get_importer, split_turn_id, turn_id


def _big_file(path: Path, conversations: int, as_array: bool) -> Path:
    with open(path, "wb") as handle:
        handle.write(b"[\n" if as_array else b"")
        for index in range(conversations):
            record = orjson.dumps(airline_conversation(index, 1.0, user_id=f"user_{index}"))
            handle.write(record + (b",\n" if as_array and index < conversations - 1 else b"\n"))
        handle.write(b"]\n" if as_array else b"")
    return path


@pytest.mark.parametrize("as_array", [False, True])
def test_reading_a_large_file_keeps_memory_bounded(tmp_path: Path, as_array: bool) -> None:
    path = _big_file(tmp_path / ("big.json" if as_array else "big.jsonl"), 15000, as_array)
    assert path.stat().st_size > 20_000_000
    importer = get_importer("openai")
    tracemalloc.start()
    try:
        count = sum(1 for item in importer.read(path) if isinstance(item, Episode))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 15000
    assert peak < 8_000_000, f"peak {peak / 1e6:.1f} MB while reading a {path.stat().st_size / 1e6:.0f} MB file"


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
