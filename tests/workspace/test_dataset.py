"""Datasets: browsing with filters and pages, turn look-up, DuckDB queries, splits, export."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import airline_conversation, write_json
from worldsmith import EpisodeFilter, Workspace
from worldsmith.traces import read_traces


@pytest.fixture
def airline(workspace: Workspace, tmp_path: Path) -> Workspace:
    conversations = []
    for task_id in range(12):
        for trial in range(2):  # two trials per task: a trajectory family
            conversation = airline_conversation(task_id, float(trial), user_id=f"user_{task_id}_{trial}")
            conversations.append(conversation)
    workspace.ingest([write_json(tmp_path / "airline.json", conversations)], "air")
    return workspace


def test_filters_and_pages(airline: Workspace) -> None:
    dataset = airline.dataset("air")
    assert dataset.stats()["episodes"] == 24 and dataset.stats()["turns"] == 72
    page = dataset.list_episodes(limit=10, offset=20)
    assert len(page) == 4 and list(page["episode_id"]) == [f"airline-{i}" for i in range(21, 25)]
    assert dataset.count_episodes(EpisodeFilter(outcome="success")) == 12
    assert dataset.count_episodes(EpisodeFilter(outcome="failure")) == 12
    assert dataset.count_episodes(EpisodeFilter(min_turns=4)) == 0
    assert dataset.count_episodes(EpisodeFilter(search="user_3_1")) == 1


def test_turn_lookup_and_search_within_an_episode(airline: Workspace) -> None:
    dataset = airline.dataset("air")
    turn = dataset.turn("airline-1#2")
    assert turn.action.name == "search_onestop_flight" and turn.provenance.pointer == "/0/traj/10/tool_calls/0"
    assert dataset.has_turn("airline-1#2") and not dataset.has_turn("airline-1#9") and not dataset.has_turn("nope")
    assert [t.index for t in dataset.turns_page("airline-1", search="HAT136")] == [2]
    assert dataset.count_turns("airline-1", search="flight") == 2
    with pytest.raises(KeyError):
        dataset.turn("airline-1#7")


def test_duckdb_queries_over_turns(airline: Workspace) -> None:
    counts = airline.dataset("air").query(
        "SELECT action_name, count(*) AS n FROM turns GROUP BY 1 ORDER BY 2 DESC, 1")
    assert counts.to_dict("records")[0] == {"action_name": "get_user_details", "n": 24}


def test_splits_never_split_a_family_and_are_reproducible(airline: Workspace) -> None:
    result = airline.split("air", {"train": 0.5, "validation": 0.25, "test": 0.25}, seed=7)
    assert {name: counts["families"] for name, counts in result["splits"].items()} == {
        "train": 6, "validation": 3, "test": 3}
    dataset = airline.dataset("air")
    frame = dataset.query("SELECT task_id, count(DISTINCT split) AS n FROM episodes GROUP BY 1")
    assert set(frame["n"]) == {1}
    first = dataset.split_assignments()
    airline.split("air", {"train": 0.5, "validation": 0.25, "test": 0.25}, seed=7)
    assert dataset.split_assignments() == first
    airline.split("air", {"train": 0.5, "validation": 0.25, "test": 0.25}, seed=8)
    assert dataset.split_assignments() != first
    assert dataset.count_episodes(EpisodeFilter(split="test")) == 6


def test_tiny_datasets_still_get_every_split(workspace: Workspace, tmp_path: Path) -> None:
    workspace.ingest([write_json(tmp_path / "a.json", [airline_conversation(i, 1.0) for i in range(3)])], "small")
    result = workspace.split("small")
    assert [counts["families"] for counts in result["splits"].values()] == [1, 1, 1]


def test_export_a_split(airline: Workspace, tmp_path: Path) -> None:
    airline.split("air", seed=1)
    out = tmp_path / "test.openai.jsonl"
    count = airline.export("air", "openai", out, split="test")
    episodes = list(read_traces([out]))
    assert count == len(episodes) > 0
    originals = {e.id: e for e in airline.dataset("air").iter_episodes()}
    for episode in episodes:
        assert episode.content() == originals[episode.id].content()
        assert episode.split == "test"


def test_iter_episodes_restores_what_was_ingested(workspace: Workspace, ledger_file: Path, awb_file: Path) -> None:
    workspace.ingest([ledger_file, awb_file], "s")
    stored = {e.id: e for e in workspace.dataset("s").iter_episodes()}
    for original in read_traces([ledger_file, awb_file]):
        assert stored[original.id].model_dump() == original.model_dump()
    assert workspace.dataset("s").episode("terminal-1").model_dump() == stored["terminal-1"].model_dump()


def test_unknown_dataset(workspace: Workspace) -> None:
    from worldsmith.workspace import DatasetNotFound

    with pytest.raises(DatasetNotFound, match="none yet"):
        workspace.dataset("missing")


def test_uploads_are_sanitised_and_limited(workspace: Workspace) -> None:
    path = workspace.save_upload("../../etc/pass wd.jsonl", b"{}")
    assert path.parent.parent == workspace.uploads_dir and ".." not in path.name and " " not in path.name
    assert path.name == "pass_wd.jsonl"  # the file's own name, in a folder of its own: no prefix in derived ids
    assert workspace.save_upload("../../etc/pass wd.jsonl", b"{}") != path
    with pytest.raises(ValueError, match="over the limit"):
        workspace.save_upload("big.jsonl", b"x" * 11, limit=10)


def test_missing_text_reads_as_none_not_nan(workspace: Workspace, ledger_file: Path, awb_file: Path) -> None:
    """A text column with some NULLs: DuckDB alone hands pandas NaN (a float) for them; the dataset gives None."""
    workspace.ingest([ledger_file, awb_file], "mixed")
    dataset = workspace.dataset("mixed")
    envs = dict(zip(*(dataset.list_episodes()[c] for c in ("episode_id", "env_id")), strict=True))
    assert None in envs.values() and any(isinstance(env, str) for env in envs.values())
    assert all(env is None or isinstance(env, str) for env in envs.values()), envs
    queried = dataset.query("SELECT env_id FROM episodes ORDER BY episode_id")["env_id"].tolist()
    assert sorted(queried, key=str) == sorted(envs.values(), key=str)
