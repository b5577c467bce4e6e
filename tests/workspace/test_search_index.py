"""Full-text search: index built at ingest, incremental per part, rebuild, ranking (the rule: test_search_semantics)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helpers import airline_conversation, write_json
from worldsmith import Workspace
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.workspace import build_index, has_index, search, search_turns
from worldsmith.workspace.search import INDEX_FILE, parse_query, scan_turns


def _indexed_parts(dataset_path: Path) -> dict[str, int]:
    with sqlite3.connect(dataset_path / INDEX_FILE) as conn:
        return dict(conn.execute("SELECT turns, n_rows FROM parts").fetchall())


def _episodes(prefix: str, words: list[str]) -> list[Episode]:
    return [Episode(id=f"{prefix}-{n}", env_id="kitchen", task=f"{prefix} task {n}", turns=[
        Turn(index=0, action=Action(name="look"), observation=Observation(text=f"You see a {word} on the shelf.")),
        Turn(index=1, action=Action(name="take_item", arguments={"item": word, "slot": n}),
             observation=Observation(text=f'{{"held": "{word}", "count": {n}}}'))]) for n, word in enumerate(words)]


def test_index_is_built_at_ingest_and_grows_by_part(workspace: Workspace) -> None:
    workspace.add_episodes("d", _episodes("a", ["mug", "apple", "knife"]))
    dataset = workspace.dataset("d")
    assert has_index(dataset) and list(_indexed_parts(dataset.path).values()) == [6]
    first = _indexed_parts(dataset.path)
    workspace.add_episodes("d", _episodes("b", ["plate", "mug"]))
    dataset = workspace.dataset("d")
    parts = _indexed_parts(dataset.path)
    assert len(parts) == 2 and {k: v for k, v in parts.items() if k in first} == first  # the old part kept as is
    assert sorted(parts.values()) == [4, 6]
    hits = search_turns(dataset, "mug", limit=50, refresh=False)
    assert hits.used_index and sorted(h.turn_id for h in hits.hits) == ["a-0#0", "a-0#1", "b-1#0", "b-1#1"]
    best = search_turns(dataset, "take_item plate").hits
    assert [h.turn_id for h in best] == ["b-0#1"] and best[0].dataset == "d" and best[0].rank is not None


def test_two_terms_match_the_scan(workspace: Workspace, tmp_path: Path) -> None:
    conversations = [airline_conversation(task, float(trial), user_id=f"user_{task}_{trial}")
                     for task in range(8) for trial in range(2)]
    workspace.ingest([write_json(tmp_path / "airline.json", conversations)], "air")
    dataset = workspace.dataset("air")
    two = {h.turn_id for h in search_turns(dataset, "flight HAT136", limit=10_000).hits}
    assert two == {h.turn_id for h in scan_turns(dataset, parse_query("flight HAT136"), limit=10_000)} and two


def test_rebuild_and_scan_without_index(workspace: Workspace) -> None:
    workspace.add_episodes("d", _episodes("a", ["mug", "apple"]))
    dataset = workspace.dataset("d")
    before = {h.turn_id for h in search_turns(dataset, "apple").hits}
    (dataset.path / INDEX_FILE).unlink()
    scanned = search_turns(dataset, "apple")
    assert not scanned.used_index and {h.turn_id for h in scanned.hits} == before == {"a-1#0", "a-1#1"}
    assert "[apple]" in scanned.hits[0].snippet
    stats = build_index(dataset)
    assert (stats.rows, stats.parts) == (4, 1) and not list(dataset.path.glob(".*.tmp"))
    rebuilt = search_turns(dataset, "apple")
    assert rebuilt.used_index and {h.turn_id for h in rebuilt.hits} == before
    assert {h.turn_id for h in search_turns(dataset, "app*").hits} == before
    assert {h.turn_id for h in search_turns(dataset, '"a apple"').hits} == {"a-1#0"}
    assert search_turns(dataset, "  ").hits == []


def test_common_words_rank_the_newest_matches(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace.add_episodes("d", _episodes("a", ["mug", "mug", "mug"]))
    workspace.add_episodes("d", _episodes("b", ["mug", "mug"]))
    dataset = workspace.dataset("d")
    monkeypatch.setattr(search, "RANK_LIMIT", 5)
    common = search_turns(dataset, "mug", limit=2)  # 10 turns
    assert not common.ranked and [h.turn_id for h in common.hits] == ["b-1#1", "b-1#0"]  # the newest
    assert common.hits[0].rank is None
    rare = search_turns(dataset, "take_item", limit=20)
    assert rare.ranked and len(rare.hits) == 5 and rare.hits[0].rank is not None
