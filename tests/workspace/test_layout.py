"""The workspace layout is spelled in one place, and env ids are parsed by one function."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worldsmith.workspace import Workspace, WorkspaceLayout, env_family
from worldsmith.worldbook import WorldbookStore

REPO = Path(__file__).resolve().parents[2]
# A path segment of the layout joined by hand (`root / "worldbooks"`, `root / "runs" / ...`).
_HAND_MADE = re.compile(r'root\)? / "(datasets|worldbooks|reports|uploads|recorded|sessions|runs|cache|\.staging)"')


def test_layout_paths(tmp_path: Path) -> None:
    layout = WorkspaceLayout.of(tmp_path)
    assert layout.books_dir == tmp_path / "worldbooks"
    assert layout.run_dir("collect", "ds") == tmp_path / "runs" / "collect" / "ds"
    assert layout.cache_dir("heldout") == tmp_path / "cache" / "heldout"
    assert not any(tmp_path.iterdir())  # a layout touches no file


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a\\b", "x\0"])
def test_layout_refuses_segments_that_leave_the_workspace(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="one folder name"):
        WorkspaceLayout.of(tmp_path).run_dir("eval", bad)


def test_workspace_and_store_agree(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    assert workspace.layout == WorkspaceLayout(tmp_path)
    assert workspace.books_dir == WorldbookStore.of_workspace(workspace).root == WorldbookStore.of_workspace(tmp_path).root


@pytest.mark.parametrize(("env_id", "family"), [
    ("alfworld/pick_and_place/trial_1", "alfworld"), ("toolshop", "toolshop"), (None, ""), ("", ""),
    ("bfcl/multi_turn_base_1", "bfcl"),
])
def test_env_family(env_id: str | None, family: str) -> None:
    assert env_family(env_id) == family


def test_no_module_joins_workspace_folders_by_hand() -> None:
    offenders = []
    for folder in ("lib/worldsmith", "workbench", "pages"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.name == "layout.py" and path.parent.name == "workspace":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _HAND_MADE.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "use worldsmith.workspace.WorkspaceLayout:\n" + "\n".join(offenders)


def test_no_module_splits_env_ids_by_hand() -> None:
    offenders = []
    pattern = re.compile(r'env\w*\b[^\n]*\.split\("/"(, 1)?\)\[0\]')
    for folder in ("lib/worldsmith", "workbench", "pages"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.name == "layout.py" and path.parent.name == "workspace":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "use worldsmith.workspace.env_family:\n" + "\n".join(offenders)


def test_splits_and_folds_group_by_one_family_definition(tmp_path: Path) -> None:
    """Two trials of one game are one family for `worldsmith split` as for the builder's folds."""
    from worldsmith.traces import trajectory_family
    from worldsmith.traces.model import Action, Episode, Observation, Turn
    from worldsmith.workspace import assign_splits

    def episode(index: int, task: str) -> Episode:
        turn = Turn(index=0, action=Action(name="look"), observation=Observation(text=f"room {index}"))
        return Episode(id=f"e{index}", task_id=task, turns=[turn])

    episodes = [episode(i, f"game-{i // 2}/trial_{i % 2}") for i in range(80)]  # 40 games, 2 trials each
    workspace = Workspace(tmp_path)
    workspace.add_episodes("d", episodes)
    dataset = workspace.dataset("d")
    assign_splits(dataset, {"train": 0.5, "test": 0.5}, seed=3)
    split_of = dict(dataset.connect().execute(f"SELECT episode_id, split FROM read_parquet('{dataset.path}/splits.parquet')").fetchall())
    for a in episodes:
        for b in episodes:
            if trajectory_family(a) == trajectory_family(b):
                assert split_of[a.id] == split_of[b.id], (a.id, b.id)
    assert len({split_of[e.id] for e in episodes}) == 2
