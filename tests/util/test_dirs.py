"""The folder swap helpers: `replace_dir` replaces on purpose, `publish_dir` never replaces another's work."""

from __future__ import annotations

from pathlib import Path

from worldsmith.util.dirs import publish_dir, replace_dir, staging_dir


def _staged(target: Path, text: str) -> Path:
    staging = staging_dir(target)
    (staging / "data.txt").write_text(text)
    return staging


def test_replace_dir_swaps_a_whole_folder_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "out"
    replace_dir(_staged(target, "one"), target)
    replace_dir(_staged(target, "two"), target)
    assert (target / "data.txt").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_publish_dir_fills_an_absent_or_empty_target(tmp_path: Path) -> None:
    assert publish_dir(_staged(tmp_path / "a", "a"), tmp_path / "a")
    (tmp_path / "b").mkdir()
    assert publish_dir(_staged(tmp_path / "b", "b"), tmp_path / "b")
    assert (tmp_path / "a" / "data.txt").read_text() == "a" and (tmp_path / "b" / "data.txt").read_text() == "b"


def test_publish_dir_keeps_the_first_writers_folder_and_drops_its_staging(tmp_path: Path) -> None:
    target = tmp_path / "out"
    assert publish_dir(_staged(target, "first"), target)
    assert not publish_dir(_staged(target, "second"), target)
    assert (target / "data.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
