"""`ingest_isolated`: the import runs in a child process under a memory limit (what the workbench uses), so a
file that exhausts memory kills that child, never the caller, and leaves nothing staged behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.workspace import Workspace
from worldsmith.workspace.isolated_ingest import IsolatedIngestError, ingest_isolated


def episode_line(episode_id: str, pad: str = "") -> str:
    turn = {"index": 0, "action": {"name": "look", "arguments": {}}, "observation": {"text": f"room {episode_id}"}}
    return json.dumps({"id": episode_id, "metadata": {"pad": pad}, "turns": [turn]}) + "\n"


def test_an_isolated_ingest_reports_progress_and_commits(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(episode_line("a") + episode_line("b") + "{broken\n")
    seen = []
    summary = ingest_isolated(tmp_path / "ws", [path], "d", format="native", progress=seen.append)
    assert summary["committed"] and summary["episodes"] == 2 and summary["rejected"] == 1
    assert seen and seen[-1].files_done == 1 and seen[-1].episodes == 2
    assert sorted(e.id for e in Workspace(tmp_path / "ws").dataset("d").iter_episodes()) == ["a", "b"]


def test_a_usage_error_comes_back_as_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(episode_line("a"))
    with pytest.raises(ValueError, match="dataset name '../x'"):
        ingest_isolated(tmp_path / "ws", [path], "../x")


def test_a_file_that_exhausts_the_memory_limit_costs_the_child_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDSMITH_IMPORT_MAX_RECORD_BYTES", str(1 << 30))  # let the huge record be read
    small, huge = tmp_path / "small.jsonl", tmp_path / "huge.jsonl"
    small.write_text(episode_line("small"))
    with open(huge, "w") as handle:  # a 300 MB record, written in pieces (this process stays small)
        handle.write('{"id": "huge", "metadata": {"pad": "')
        for _ in range(300):
            handle.write("x" * (1 << 20))
        handle.write('"}, "turns": []}\n')
    root = tmp_path / "ws"
    try:
        summary = ingest_isolated(root, [small, huge], "d", format="native", memory_limit=600 << 20)
    except IsolatedIngestError as error:  # the child died of it: nothing committed
        assert "memory" in str(error).lower() or "killed by" in str(error)
        assert not (root / "datasets" / "d" / "manifest.json").exists()
    else:  # the allocation failed inside the child: that file rejected, the other kept
        assert "MemoryError" in summary["files"][1]["error"] and summary["files"][0]["episodes"] == 1
        assert [e.id for e in Workspace(root).dataset("d").iter_episodes()] == ["small"]
    leftovers = [p.name for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".staging-")]
    assert leftovers == []
