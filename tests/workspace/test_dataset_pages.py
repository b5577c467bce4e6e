"""The paged episode listing: every page, count and filter against a list built in Python."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from worldsmith import EpisodeFilter, Workspace
from worldsmith.traces.model import Action, Episode, Observation, Turn

ENVIRONMENTS = ("alpha", "beta", "gamma")


def _episode(number: int) -> Episode:
    """Varied lengths, environments and outcomes (success, failure, unknown) by the episode's number."""
    outcome = number % 3
    turns = [Turn(index=i, action=Action(name="step", arguments={"i": i}), observation=Observation(text=f"o{i}"))
             for i in range(1 + number % 7)]
    return Episode(id=f"ep-{number:03d}", env_id=ENVIRONMENTS[number % 3 if number % 5 else 0],
                   task=f"task {number} {'refund' if number % 4 == 0 else 'book'}", family=f"fam-{number // 2}",
                   turns=turns, reward=None if outcome == 2 else float(outcome == 0),
                   success=None if outcome == 2 else outcome == 0)


EPISODES = [_episode(n) for n in range(60)]


def _outcome(episode: Episode) -> str:
    return "unknown" if episode.success is None else "success" if episode.success else "failure"


CASES: dict[str, tuple[EpisodeFilter, Callable[[Episode], bool]]] = {
    "all": (EpisodeFilter(), lambda e: True),
    "env": (EpisodeFilter(env_id="beta"), lambda e: e.env_id == "beta"),
    "success": (EpisodeFilter(outcome="success"), lambda e: _outcome(e) == "success"),
    "failure": (EpisodeFilter(outcome="failure"), lambda e: _outcome(e) == "failure"),
    "unknown": (EpisodeFilter(outcome="unknown"), lambda e: _outcome(e) == "unknown"),
    "length": (EpisodeFilter(min_turns=3, max_turns=5), lambda e: 3 <= len(e.turns) <= 5),
    "task": (EpisodeFilter(task_contains="REFUND"), lambda e: "refund" in (e.task or "")),
    "search": (EpisodeFilter(search="ep-01"), lambda e: e.id.startswith("ep-01")),
    "combined": (EpisodeFilter(env_id="alpha", outcome="failure", max_turns=4),
                 lambda e: e.env_id == "alpha" and _outcome(e) == "failure" and len(e.turns) <= 4),
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    workspace = Workspace(tmp_path_factory.mktemp("pages"))
    workspace.add_episodes("d", EPISODES[:40], label="first")  # two ingests: two parts, listed in import order
    workspace.add_episodes("d", EPISODES[40:], label="second")
    return workspace


def _all_pages(workspace: Workspace, where: EpisodeFilter, size: int) -> list[str]:
    dataset, ids, offset = workspace.dataset("d"), [], 0
    while True:
        page = dataset.list_episodes(where, limit=size, offset=offset)
        assert len(page) <= size
        ids.extend(page["episode_id"])
        if len(page) < size:
            return ids
        offset += size


@pytest.mark.parametrize("case", CASES)
def test_pages_and_counts_match_the_filter(workspace: Workspace, case: str) -> None:
    where, keep = CASES[case]
    expected = [e.id for e in EPISODES if keep(e)]
    assert expected, "every case must match something"
    assert workspace.dataset("d").count_episodes(where) == len(expected)
    assert _all_pages(workspace, where, 7) == expected
    assert _all_pages(workspace, where, 100) == expected


def test_a_page_carries_the_summary_columns(workspace: Workspace) -> None:
    page = workspace.dataset("d").list_episodes(limit=3, offset=41)
    assert list(page["episode_id"]) == ["ep-041", "ep-042", "ep-043"]
    assert list(page["n_turns"]) == [len(EPISODES[n].turns) for n in (41, 42, 43)]
    assert list(page["env_id"]) == [EPISODES[n].env_id for n in (41, 42, 43)]
    assert list(page.columns) == ["episode_id", "env_id", "task_id", "task", "n_turns", "dialogue_only", "reward",
                                  "success", "split", "family", "source_format", "source_path"]
    assert not page["dialogue_only"].any()


def test_past_the_end_is_an_empty_page_and_negative_bounds_are_refused(workspace: Workspace) -> None:
    dataset = workspace.dataset("d")
    assert dataset.list_episodes(limit=10, offset=60).empty
    assert dataset.count_episodes(EpisodeFilter(env_id="nowhere")) == 0
    with pytest.raises(ValueError, match="must not be negative"):
        dataset.list_episodes(limit=-1)
    with pytest.raises(ValueError, match="must not be negative"):
        dataset.list_episodes(offset=-5)


def test_split_assignments_show_on_pages_and_filter_them(tmp_path_factory: pytest.TempPathFactory) -> None:
    workspace = Workspace(tmp_path_factory.mktemp("splits"))
    workspace.add_episodes("d", EPISODES, label="all")
    workspace.split("d", {"train": 0.6, "validation": 0.2, "test": 0.2}, seed=3)
    dataset = workspace.dataset("d")
    assigned = dataset.split_assignments()
    assert set(assigned.values()) == {"train", "validation", "test"}
    shown = {}
    for offset in range(0, 60, 11):
        page = dataset.list_episodes(limit=11, offset=offset)
        shown.update(zip(page["episode_id"], page["split"], strict=True))
    assert shown == {e.id: assigned[e.id] for e in EPISODES}
    for split in ("train", "validation", "test"):
        expected = [e.id for e in EPISODES if assigned[e.id] == split]
        assert dataset.count_episodes(EpisodeFilter(split=split)) == len(expected)
        assert _all_pages(workspace, EpisodeFilter(split=split), 4) == expected
    both = EpisodeFilter(split="train", env_id="gamma")
    assert _all_pages(workspace, both, 5) == [e.id for e in EPISODES if assigned[e.id] == "train" and e.env_id == "gamma"]
    assert dataset.stats()["episodes"] == 60 and dataset.environments() == list(ENVIRONMENTS)


def test_queries_never_draw_a_progress_bar(workspace: Workspace) -> None:
    """DuckDB prints it on stdout once a query runs 2 s (a full scan of millions of turns), into --json output."""
    setting = workspace.dataset("d").connect().execute("SELECT current_setting('enable_progress_bar')").fetchone()[0]
    assert setting is False
